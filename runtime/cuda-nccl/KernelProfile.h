//===- KernelProfile.h - ZEST_KERNEL_TIMES' table ---------------*- C++ -*-===//
//
// The table ZEST_KERNEL_TIMES prints: per kernel, product, collective and
// copy, its GPU time and launches per step, and where its work is known
// (compiled kernels from zestc's table, products from their sizes) the
// bytes and operations of one run, the cost model's prediction, the
// fraction of the GPU's peak it reached and the time it lost against that
// peak, sorted by the time lost. On the emulated device, whose times are
// the host's, only the predictions are printed, sorted by them.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_CUDA_NCCL_KERNELPROFILE_H
#define ZEST_RUNTIME_CUDA_NCCL_KERNELPROFILE_H

#include "KernelTimes.h"

#include <optional>
#include <string>
#include <vector>

namespace zest::rt::cuda {

/// A name's GPU time and launches summed over the timed steps, and the
/// work of one run where a product noted it.
struct ProfileRow {
  std::string name;
  double ms = 0;
  long launches = 0;
  std::optional<Work> work;
};

/// Prints the table on stderr as rank `rank` (steps: how many were timed).
void printKernelProfile(int rank, std::vector<ProfileRow> rows, long steps);

} // namespace zest::rt::cuda

#endif // ZEST_RUNTIME_CUDA_NCCL_KERNELPROFILE_H
