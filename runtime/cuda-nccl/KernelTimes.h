//===- KernelTimes.h - GPU time per kernel, product and collective -*- C++
//-*-===//
//
// ZEST_KERNEL_TIMES=1 times, with CUDA events around each, every kernel the
// compiled step launches, every cuBLASLt product and epilogue kernel, every
// collective and copy the runtime enqueues, and prints at the end the GPU
// time per name over the steps after the first (the warm-up): what Nsight
// Compute's per-kernel replay would tell, in seconds instead of minutes
// for a step of thousands of launches. Off, it costs one branch a launch.
// Beside each time: the bytes and operations of one run (compiled kernels
// from zestc's table, products from their sizes), the cost model's
// prediction, the fraction of the GPU's peak reached and the time lost
// against it (KernelProfile.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_CUDA_NCCL_KERNELTIMES_H
#define ZEST_RUNTIME_CUDA_NCCL_KERNELTIMES_H

#include <cuda_runtime.h>

#include <string>
#include <type_traits>

namespace zest::rt::cuda {

/// Whether ZEST_KERNEL_TIMES is set to a value other than 0.
bool kernelTimesEnabled();

/// Times the work enqueued on `stream` while it lives under `name`, where
/// ZEST_KERNEL_TIMES is set.
class TimedScope {
public:
  TimedScope(const char *name, cudaStream_t stream);
  /// The same with a name built by `name()`, called only where
  /// ZEST_KERNEL_TIMES is set (a product's name from its shape).
  template <typename NameFn, typename = std::enable_if_t<
                                 std::is_invocable_r_v<std::string, NameFn &>>>
  TimedScope(NameFn &&name, cudaStream_t stream) : stream(stream) {
    if (kernelTimesEnabled())
      start(name());
  }
  ~TimedScope();
  TimedScope(const TimedScope &) = delete;
  TimedScope &operator=(const TimedScope &) = delete;

private:
  void start(const std::string &name);

  int record = -1; // its index among the step's records; -1: not timed
  cudaStream_t stream = nullptr;
};

/// What one run of a timed piece of work moves and computes, for the
/// profile's bytes, operations, prediction and fraction of the peak.
struct Work {
  double bytes = 0, flops = 0;
  /// On tensor cores (a product), with 16-bit operands.
  bool tensorCores = false, halfPrecision = false;
};
/// Records the work of each run named `name` (a product: its sizes are
/// known only at run time). Compiled kernels' work comes from the
/// executable's table (zestc: `zest_model_kernel_profile`).
void noteWork(const std::string &name, const Work &work);

/// A training step ended: the first step's records are dropped, later ones
/// summed per name.
void endKernelTimesStep();
/// Prints the table on rank 0 (on stderr) if any step was timed.
void reportKernelTimes(int rank);

} // namespace zest::rt::cuda

#endif // ZEST_RUNTIME_CUDA_NCCL_KERNELTIMES_H
