//===- GroupedMatmul.cpp - Grouped products on the GPU --------------------===//
//
// The CUDA runtime's zest_cuda_grouped_matmul and its weights' gradient:
// the contracts of the CPU kernels (zest_runtime.h; device pointers), on
// the compute stream. The group ends are copied to the host (one small copy
// and a wait for the stream per call: the routing decides the products'
// sizes), then each non-empty group is one product of the runtime's fused
// linear layer on cuBLASLt (common/GroupedProducts.h), f32 accumulation,
// 16-bit storage rounded once; rows past the last end are cleared on the
// stream. Built as CUDA for a GPU and, through
// cuda-emulated/GroupedMatmulHost.cpp, as C++ for the emulated device.
//
//===----------------------------------------------------------------------===//

#include "../common/GroupedProducts.h"
#include "../cuda-nccl/Device.h"
#include "zest_runtime.h"
#include "zest_runtime_cuda.h"

#include <cuda_runtime.h>

#include <vector>

using namespace zest::rt;

namespace {

void clear(void *memory, size_t bytes) {
  cuda::checkCuda(cudaMemsetAsync(memory, 0, bytes, cuda::streams.compute),
                  "clearing a grouped product's rows");
}

/// The group bounds, from the offsets in device memory.
std::vector<std::pair<int64_t, int64_t>> readGroupBounds(const void *offsets,
                                                         int32_t offsetBits,
                                                         int64_t groups,
                                                         int64_t rows) {
  std::vector<int64_t> ends(groups);
  size_t bytes = size_t(groups) * (offsetBits / 8);
  cuda::checkCuda(cudaMemcpyAsync(ends.data(), offsets, bytes,
                                  cudaMemcpyDeviceToHost,
                                  cuda::streams.compute),
                  "reading a grouped product's offsets");
  // A host wait (so no CUDA graph captures the step): the products' sizes
  // come from the routing.
  cuda::synchronize(cuda::streams.compute, "reading a grouped product's "
                                           "offsets");
  return getGroupBounds(ends.data(), offsetBits, groups, rows);
}

} // namespace

extern "C" {
ZEST_GROUPED_PRODUCT_ENTRIES(_cuda_, , float, readGroupBounds, clear)
ZEST_GROUPED_PRODUCT_ENTRIES(_cuda_, _bf16, uint16_t, readGroupBounds, clear)
ZEST_GROUPED_PRODUCT_ENTRIES(_cuda_, _f16, uint16_t, readGroupBounds, clear)
}
