//===- Simt.h - Cooperative blocks of threads on the emulated GPU -*- C++ -*-//
//
// The runtime's CUDA C++ kernels that synchronize (barriers, warp shuffles,
// tensor-core fragments, asynchronous copies into shared memory: the
// attention kernels of cuda-blas/) run on the emulated device as a GPU runs
// them: every thread of a block is a fiber on the calling host thread, and a
// thread gives way at each barrier or warp-wide operation until every
// thread it waits for has arrived. A thread therefore sees what the others
// wrote before the barrier and nothing they write after it, and the
// emulator is as strict as the hardware where kernels go wrong: threads of a
// block at different barriers, lanes of a warp at different warp-wide
// operations (reported as the hang they are on a GPU), shared memory read
// before it is written (it starts as NaNs), an asynchronous copy read
// before it is waited for (it lands at the wait), an operand outside shared
// memory or misaligned, or more dynamic shared memory than the kernel was
// allowed (cudaFuncSetAttribute).
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_CUDA_EMULATED_SIMT_H
#define ZEST_RUNTIME_CUDA_EMULATED_SIMT_H

#include <cuda_runtime.h>

#include <cstddef>
#include <cstring>
#include <functional>

namespace zest::emulated::simt {

/// The largest value a lane gives to one warp-wide operation, in bytes.
constexpr size_t kSlotBytes = 32;

/// Queues a launch of `grid` blocks of `block` threads on `stream`, each
/// block with `sharedBytes` of dynamic shared memory, that runs `thread`
/// (the kernel and its arguments) in every thread, block after block, the
/// threads of a block as fibers. `function` is the kernel's address, whose
/// shared-memory limit cudaFuncSetAttribute raises.
void launchBlocks(const char *kernel, const void *function, dim3 grid,
                  dim3 block, size_t sharedBytes, cudaStream_t stream,
                  std::function<void()> thread);

/// __syncthreads: waits for every thread of the block that has not exited.
void syncThreads();

/// The 32 values of `bytes` each that the lanes of the calling warp give to
/// the warp-wide operation `what` (`value` this lane's), once all 32 have
/// given theirs: lane i's at result + i * kSlotBytes, valid until this
/// lane's next warp-wide operation. `mask` must name the whole warp.
const unsigned char *exchange(unsigned mask, const void *value, size_t bytes,
                              const char *what);

/// Lane `lane`'s value of type T in what exchange returned.
template <typename T> T laneValue(const unsigned char *values, int lane) {
  T value;
  std::memcpy(&value, values + lane * kSlotBytes, sizeof value);
  return value;
}

/// The calling thread's lane in its warp.
int laneIndex();

/// The block's dynamic shared memory (NaN bytes when the block starts).
unsigned char *dynamicShared();
/// Checks that [p, p + bytes) lies in the block's shared memory, aligned to
/// `alignment`, for `what`.
void requireShared(const void *p, size_t bytes, size_t alignment,
                   const char *what);

/// cp.async: copies `bytes` from global memory at `src` (zeros if !valid)
/// to shared memory at `dst` when the thread waits for its group.
void copyAsync(void *dst, const void *src, size_t bytes, bool valid);
/// cp.async.commit_group: the copies issued since the last commit form a
/// group.
void commitCopies();
/// cp.async.wait_group: completes every committed group but the newest
/// `pending`.
void waitCopies(int pending);

} // namespace zest::emulated::simt

#endif // ZEST_RUNTIME_CUDA_EMULATED_SIMT_H
