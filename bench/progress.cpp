//===- progress.cpp - Does a collective progress while a rank computes? ---===//
//
//   mpirun -np 2 build/bin/zest-bench-progress [MiB...]
//   ZEST_PROGRESS=thread mpirun -np 2 build/bin/zest-bench-progress
//
// For each size: the time of an all-gather alone (start + wait), of a fixed
// compute loop alone, and of start + compute + wait, in two modes:
//   quiet  the compute loop makes no runtime calls;
//   poll   the compute loop calls zest_progress() every ~100 us.
// "hidden" is the share of the collective's time that overlapped compute:
// (comm + compute - overlapped) / comm. With ZEST_PROGRESS=thread both modes
// also have the runtime's progress thread.
//
//===----------------------------------------------------------------------===//

#include "zest_runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// A dependent floating-point chain the compiler cannot remove; calls
/// zest_progress every `pollEvery` iterations when asked to.
double compute(long iterations, long pollEvery) {
  double x = 1.0;
  for (long i = 0; i < iterations; ++i) {
    x = x * 1.0000001 + 1e-9;
    if (pollEvery && i % pollEvery == 0)
      zest_progress();
  }
  return x;
}

/// Keeps compute()'s result alive so the loop is not optimized away.
volatile double sink;

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
  zest_init(&argc, &argv);
  int rank = zest_rank(), world = zest_world_size();
  std::vector<double> sizesMiB;
  for (int i = 1; i < argc; ++i)
    sizesMiB.push_back(std::atof(argv[i]));
  if (sizesMiB.empty())
    sizesMiB = {1, 8, 32};
  const char *progress = std::getenv("ZEST_PROGRESS");
  if (rank == 0)
    std::printf("all-gather progress, %d ranks, progress thread %s\n"
                "%8s %6s %10s %10s %10s %8s\n",
                world, progress ? progress : "off", "MiB/rank", "mode",
                "comm ms", "comp ms", "both ms", "hidden");

  // Calibrate ~20 ms of compute.
  long iterations = 1000000;
  double t0 = now();
  sink = compute(iterations, 0);
  iterations = long(iterations * 0.020 / std::max(now() - t0, 1e-6));
  // A poll every ~100 us of compute: 200 polls per 20 ms.
  long pollEvery = std::max(1L, iterations / 200);

  for (double mib : sizesMiB) {
    int64_t count = int64_t(mib * (1 << 20) / 4);
    std::vector<float> shard(count, 1.0f), full(count * world);
    auto gather = [&] {
      return zest_all_gather_start(shard.data(), full.data(), count, ZEST_F32,
                                   ZEST_GROUP_WORLD, "bench");
    };
    for (int mode = 0; mode < 2; ++mode) {
      long poll = mode ? pollEvery : 0;
      std::vector<double> comm, comp, both;
      for (int rep = 0; rep < 7; ++rep) {
        zest_barrier();
        double a = now();
        zest_wait(gather());
        comm.push_back(now() - a);
        zest_barrier();
        a = now();
        sink = compute(iterations, poll);
        comp.push_back(now() - a);
        zest_barrier();
        a = now();
        zest_request_t request = gather();
        sink = compute(iterations, poll);
        zest_wait(request);
        both.push_back(now() - a);
      }
      double c = median(comm), k = median(comp), b = median(both);
      double hidden = std::clamp((c + k - b) / c, 0.0, 1.0);
      if (rank == 0)
        std::printf("%8.1f %6s %10.2f %10.2f %10.2f %7.0f%%\n", mib,
                    mode ? "poll" : "quiet", c * 1e3, k * 1e3, b * 1e3,
                    hidden * 100);
    }
  }
  zest_finalize();
  return 0;
}
