//===- DeviceBuiltins.cuh - CUDA's built-ins, or the emulator's --*- CUDA -*-//
//
// The kernels of cuda-blas/ that synchronize are written against CUDA's
// built-ins: threadIdx and the other coordinates, __syncthreads,
// __syncwarp, __shfl_xor_sync, static and dynamic shared memory. Built for the
// emulated device (ZEST_CUDA_EMULATED) those are the fiber emulator's
// (cuda-emulated/Simt.h), so one source runs on the GPU and in every test
// run; launchKernel launches such a kernel on either.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_CUDA_BLAS_DEVICEBUILTINS_CUH
#define ZEST_RUNTIME_CUDA_BLAS_DEVICEBUILTINS_CUH

#include "../cuda-nccl/KernelTimes.h"

#include <cuda_runtime.h>

#ifdef ZEST_CUDA_EMULATED
#include "../cuda-emulated/Launch.h"
#include "../cuda-emulated/Simt.h"

#include <algorithm>
#include <cmath>

// nvcc's hint of the block size: nothing to do on the host.
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif

// Macros, not variables: the emulator's coordinates are per fiber.
#define threadIdx (::zest::emulated::current.thread)
#define blockIdx (::zest::emulated::current.block)
#define blockDim (::zest::emulated::current.blockSize)
#define gridDim (::zest::emulated::current.grid)

// A block's static shared memory: one array for the fibers of the block
// (blocks run one after another on a host thread).
#undef __shared__
#define __shared__ static thread_local

inline void __syncthreads() { ::zest::emulated::simt::syncThreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::zest::emulated::simt::exchange(mask, nullptr, 0, "__syncwarp");
}
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T value, int laneMask) {
  namespace simt = ::zest::emulated::simt;
  static_assert(sizeof(T) <= simt::kSlotBytes, "a shuffled value fits a slot");
  const unsigned char *values =
      simt::exchange(mask, &value, sizeof value, "__shfl_xor_sync");
  return simt::laneValue<T>(values, (simt::laneIndex() ^ laneMask) % 32);
}
// CUDA's device code has min and max for every arithmetic type.
using std::max;
using std::min;

/// The kernel's dynamic shared memory as an array of `type` named `name`.
#define ZEST_DYNAMIC_SHARED(type, name)                                        \
  type *name = reinterpret_cast<type *>(::zest::emulated::simt::dynamicShared())
#else
#define ZEST_DYNAMIC_SHARED(type, name)                                        \
  extern __shared__ __align__(128) type name[]
#endif

namespace zest::rt::cuda {

/// Launches `kernel` over `blocks` blocks of `threads` with `shared` bytes
/// of dynamic shared memory on `stream`: on the GPU, or on the emulated
/// device as cooperative fibers, every pointer argument checked to be
/// device memory; timed as `name` under ZEST_KERNEL_TIMES, as ZEST_LAUNCH
/// times the kernels without barriers.
template <typename... Params, typename... Args>
void launchKernel(const char *name, void (*kernel)(Params...), int64_t blocks,
                  int threads, size_t shared, cudaStream_t stream,
                  Args... args) {
  TimedScope timed(name, stream);
#ifdef ZEST_CUDA_EMULATED
  ::zest::emulated::requireDeviceArguments(name, args...);
  ::zest::emulated::simt::launchBlocks(
      name, reinterpret_cast<const void *>(kernel), dim3(unsigned(blocks)),
      dim3(unsigned(threads)), shared, stream, [=] { kernel(args...); });
#else
  kernel<<<blocks, threads, shared, stream>>>(args...);
#endif
}

} // namespace zest::rt::cuda

#endif // ZEST_RUNTIME_CUDA_BLAS_DEVICEBUILTINS_CUH
