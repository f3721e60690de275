//===- GroupedMatmul.cpp - Grouped products on the GPU --------------------===//
//
// The CUDA runtime's zest_cuda_grouped_matmul and its weights' gradient:
// the contracts of the CPU kernels (zest_runtime.h; device pointers), on
// the compute stream, with the group bounds read on the device (no copy of
// the offsets to the host, no synchronization). A thread per output
// element, its row's group found from the offsets, its dot product in f32:
// correct on every routing, not yet a tiled product. Built as CUDA for a GPU
// and, through cuda-emulated/GroupedMatmulHost.cpp, as C++ for the emulated
// device.
//
//===----------------------------------------------------------------------===//

#include "../cuda-nccl/Device.h"
#include "EpilogueKernels.cuh"
#include "zest_runtime.h"
#include "zest_runtime_cuda.h"

using namespace zest::rt;
using namespace zest::rt::cuda;

namespace {

struct GroupShape {
  int64_t rows, n, k, groups;
  const void *offsets;
  int32_t offsetBits;
};

/// Group g's end, clamped as the CPU kernel clamps it: to [the previous
/// end, rows].
inline __device__ int64_t rawEnd(const GroupShape &s, int64_t g) {
  int64_t end = s.offsetBits == 32 ? static_cast<const int32_t *>(s.offsets)[g]
                                   : static_cast<const int64_t *>(s.offsets)[g];
  return end < s.rows ? end : s.rows;
}

/// The group row `row` belongs to; `groups` past the last end.
inline __device__ int64_t groupOf(const GroupShape &s, int64_t row) {
  int64_t end = 0;
  for (int64_t g = 0; g < s.groups; ++g) {
    int64_t raw = rawEnd(s, g);
    end = raw > end ? raw : end;
    if (row < end)
      return g;
  }
  return s.groups;
}

template <typename T>
__global__ void groupedMatmulKernel(GroupShape s, const T *x, const T *w,
                                    int32_t wTransposed, T *y) {
  int64_t index = globalThreadIndex();
  if (index >= s.rows * s.n)
    return;
  int64_t row = index / s.n, col = index % s.n;
  int64_t g = groupOf(s, row);
  float sum = 0.0f;
  if (g < s.groups) {
    const T *a = x + row * s.k, *b = w + g * s.k * s.n;
    for (int64_t i = 0; i < s.k; ++i)
      sum +=
          load(a[i]) * load(wTransposed ? b[col * s.k + i] : b[i * s.n + col]);
  }
  y[index] = store<T>(sum);
}

template <typename T>
__global__ void groupedWeightGradKernel(GroupShape s, const T *x, const T *dy,
                                        T *dw, int32_t dwTransposed) {
  int64_t index = globalThreadIndex();
  int64_t matrix = s.k * s.n;
  if (index >= s.groups * matrix)
    return;
  int64_t g = index / matrix, at = index % matrix;
  // dw[g] is [k, n], or [n, k] transposed.
  int64_t i = dwTransposed ? at % s.k : at / s.n;
  int64_t j = dwTransposed ? at / s.k : at % s.n;
  int64_t begin = 0, end = 0;
  for (int64_t h = 0; h <= g; ++h) {
    begin = end;
    int64_t raw = rawEnd(s, h);
    end = raw > end ? raw : end;
  }
  float sum = 0.0f;
  for (int64_t r = begin; r < end; ++r)
    sum += load(x[r * s.k + i]) * load(dy[r * s.n + j]);
  dw[index] = store<T>(sum);
}

int64_t blocks(int64_t threads) { return (threads + 255) / 256; }

template <typename T>
void groupedMatmul(const GroupShape &s, const T *x, const T *w,
                   int32_t wTransposed, T *y) {
  if (s.rows * s.n == 0)
    return;
  ZEST_LAUNCH(groupedMatmulKernel<T>, blocks(s.rows * s.n), 256,
              cuda::streams.compute, s, x, w, wTransposed, y);
  cuda::checkCuda(cudaGetLastError(), "a grouped product");
}

template <typename T>
void groupedWeightGrad(const GroupShape &s, const T *x, const T *dy, T *dw,
                       int32_t dwTransposed) {
  if (s.groups * s.k * s.n == 0)
    return;
  ZEST_LAUNCH(groupedWeightGradKernel<T>, blocks(s.groups * s.k * s.n), 256,
              cuda::streams.compute, s, x, dy, dw, dwTransposed);
  cuda::checkCuda(cudaGetLastError(), "a grouped product's weight gradient");
}

} // namespace

#define ZEST_CUDA_GROUPED_MATMUL_ENTRIES(SUFFIX, C, T)                         \
  void zest_cuda_grouped_matmul##SUFFIX(ZEST_grouped_matmul_PARAMS(C)) {       \
    groupedMatmul({rows, n, k, groups, offsets, offset_bits},                  \
                  reinterpret_cast<const T *>(x),                              \
                  reinterpret_cast<const T *>(w), w_transposed,                \
                  reinterpret_cast<T *>(y));                                   \
  }                                                                            \
  void zest_cuda_grouped_matmul_weight_grad##SUFFIX(                           \
      ZEST_grouped_matmul_weight_grad_PARAMS(C)) {                             \
    groupedWeightGrad({rows, n, k, groups, offsets, offset_bits},              \
                      reinterpret_cast<const T *>(x),                          \
                      reinterpret_cast<const T *>(dy),                         \
                      reinterpret_cast<T *>(dw), dw_transposed);               \
  }

extern "C" {
ZEST_CUDA_GROUPED_MATMUL_ENTRIES(, float, float)
ZEST_CUDA_GROUPED_MATMUL_ENTRIES(_bf16, uint16_t, __nv_bfloat16)
ZEST_CUDA_GROUPED_MATMUL_ENTRIES(_f16, uint16_t, __half)
}
