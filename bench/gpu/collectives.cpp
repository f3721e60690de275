//===- collectives.cpp - Transport bandwidth of the CUDA backends ---------===//
//
// All-gather, reduce-scatter and all-reduce of f32 device buffers through
// the runtime's C API, from 1 MiB to 1 GiB per rank, under the backend
// ZEST_BACKEND names (nccl: one GPU per rank; staged: device -> host -> MPI
// -> device). Prints algbw (bytes of the full buffer / time) and busbw as
// nccl-tests define it: algbw x (n-1)/n for gathers and reduce-scatters,
// x 2(n-1)/n for all-reduces. Medians of CUDA-event timings.
//   ZEST_BACKEND=nccl mpirun -np N build/bin/zest-bench-cuda-collectives
//
//===----------------------------------------------------------------------===//

#include "CudaTiming.h"
#include "zest_runtime.h"
#include "zest_runtime_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char **argv) {
  zest_init(&argc, &argv);
  if (!zest_cuda_compute_stream()) {
    std::fprintf(stderr, "run with ZEST_BACKEND=nccl or staged on a GPU\n");
    return 2;
  }
  int reps = argc > 1 ? std::atoi(argv[1]) : 10;
  int n = zest_world_size();
  bool root = zest_rank() == 0;
  if (root)
    std::printf("%-14s %12s %10s %10s %10s %10s %10s %10s\n", "bytes",
                "gather ms", "algbw", "busbw", "rs algbw", "rs busbw",
                "ar algbw", "ar busbw");
  for (int64_t bytes = int64_t(1) << 20; bytes <= (int64_t(1) << 30);
       bytes *= 4) {
    int64_t total = bytes / sizeof(float) / n * n, shard = total / n;
    float *full = nullptr, *part = nullptr, *out = nullptr;
    cudaMalloc(&full, total * sizeof(float));
    cudaMalloc(&out, total * sizeof(float));
    cudaMalloc(&part, shard * sizeof(float));
    cudaMemset(full, 0, total * sizeof(float));
    cudaMemset(part, 0, shard * sizeof(float));
    double gather = medianMs(
        reps,
        [&] {
          zest_wait(zest_all_gather_start(part, out, shard, ZEST_F32,
                                          ZEST_GROUP_WORLD, "gather"));
        },
        zest_barrier);
    double scatter = medianMs(
        reps,
        [&] {
          zest_wait(zest_reduce_scatter_start(full, part, shard, ZEST_F32,
                                              ZEST_SUM, ZEST_GROUP_WORLD,
                                              "reduce-scatter"));
        },
        zest_barrier);
    double reduce = medianMs(
        reps,
        [&] {
          zest_wait(zest_all_reduce_start(full, out, total, ZEST_F32, ZEST_SUM,
                                          ZEST_GROUP_WORLD, "all-reduce"));
        },
        zest_barrier);
    double size = double(total) * sizeof(float);
    auto gbps = [&](double ms) { return size / (ms * 1e-3) / 1e9; };
    double ring = double(n - 1) / n;
    if (root)
      std::printf("%-14lld %12.3f %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f\n",
                  (long long)size, gather, gbps(gather), gbps(gather) * ring,
                  gbps(scatter), gbps(scatter) * ring, gbps(reduce),
                  gbps(reduce) * 2 * ring);
    cudaFree(full);
    cudaFree(out);
    cudaFree(part);
  }
  zest_finalize();
  return 0;
}
