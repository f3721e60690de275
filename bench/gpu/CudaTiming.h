//===- CudaTiming.h - Timing on the compute stream -------------*- C++ -*-===//

#ifndef ZEST_BENCH_GPU_CUDATIMING_H
#define ZEST_BENCH_GPU_CUDATIMING_H

#include "zest_runtime_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

inline cudaStream_t stream() {
  return static_cast<cudaStream_t>(zest_cuda_compute_stream());
}

/// Median milliseconds, by CUDA events on the compute stream, of `run` over
/// `reps` calls after one warm-up; `before` runs untimed before each.
template <typename Run, typename Before>
double medianMs(int reps, const Run &run, const Before &before) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  run();
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    before();
    cudaEventRecord(start, stream());
    run();
    cudaEventRecord(stop, stream());
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

template <typename Run> double medianMs(int reps, const Run &run) {
  return medianMs(reps, run, [] {});
}

#endif // ZEST_BENCH_GPU_CUDATIMING_H
