//===- Launch.h - CUDA C++ kernels on the emulated GPU ----------*- C++ -*-===//
//
// The runtime's own CUDA C++ kernels (cuda-blas/EpilogueKernels.cuh) are
// compiled for the host when the runtime is built for the emulated device:
// a launch runs every thread of every block in order on the calling thread,
// with the thread's index in `current`. They have no barriers (one thread
// per element or per column), which is what makes this order valid; kernels
// with barriers, warp-wide operations and shared memory run as fibers
// (Simt.h).
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_CUDA_EMULATED_LAUNCH_H
#define ZEST_RUNTIME_CUDA_EMULATED_LAUNCH_H

#include "DeviceMemory.h"

#include <cuda_runtime.h>

#include <functional>
#include <string>
#include <type_traits>

namespace zest::emulated {

/// The running emulated thread's coordinates (CUDA's blockIdx, blockDim,
/// threadIdx and gridDim; named apart from them, which Simt.h's kernels
/// define as macros).
struct ThreadIndex {
  dim3 block, blockSize, thread, grid;
};
extern thread_local ThreadIndex current;

/// Queues a grid x block launch on `stream` that runs `thread` for every
/// thread (`thread` holds the arguments, captured by value).
void launchThreads(const char *kernel, dim3 grid, dim3 block,
                   cudaStream_t stream, std::function<void()> thread);

/// Checks that every pointer argument of a launch of `kernel` is device
/// memory (or null).
inline void requireDeviceArguments(const char *kernel) {}
template <typename First, typename... Rest>
void requireDeviceArguments(const char *kernel, First first, Rest... rest) {
  if constexpr (std::is_pointer_v<First>)
    if (first)
      requireDevice(first, 1,
                    std::string("a pointer argument of kernel ") + kernel);
  requireDeviceArguments(kernel, rest...);
}

} // namespace zest::emulated

#endif // ZEST_RUNTIME_CUDA_EMULATED_LAUNCH_H
