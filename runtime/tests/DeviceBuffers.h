//===- DeviceBuffers.h - Device buffers of the CUDA tests ------*- C++ -*-===//

#ifndef ZEST_RUNTIME_TESTS_DEVICEBUFFERS_H
#define ZEST_RUNTIME_TESTS_DEVICEBUFFERS_H

#include "zest_runtime_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

/// The runtime's compute stream, which the tests' copies use too.
inline cudaStream_t stream() {
  return static_cast<cudaStream_t>(zest_cuda_compute_stream());
}

/// Stops the test at a CUDA error (a kernel's fault surfaces at the next
/// call): the cases checked after it would compare garbage.
inline void expectCuda(cudaError_t error, const char *call) {
  if (error == cudaSuccess)
    return;
  std::fflush(stdout);
  std::fprintf(stderr, "error: %s: %s\n", call, cudaGetErrorString(error));
  std::exit(1);
}

/// A device copy of `host` (at least one element, so never null).
template <typename T> T *toDevice(const std::vector<T> &host) {
  T *device = nullptr;
  expectCuda(cudaMalloc(&device, std::max<size_t>(1, host.size()) * sizeof(T)),
             "cudaMalloc");
  expectCuda(cudaMemcpyAsync(device, host.data(), host.size() * sizeof(T),
                             cudaMemcpyHostToDevice, stream()),
             "a copy to the device");
  return device;
}

/// The first `n` elements of `device`, once the stream has written them.
template <typename T> std::vector<T> toHost(const T *device, size_t n) {
  std::vector<T> host(n);
  expectCuda(cudaMemcpyAsync(host.data(), device, n * sizeof(T),
                             cudaMemcpyDeviceToHost, stream()),
             "a copy to the host");
  expectCuda(cudaStreamSynchronize(stream()), "the work before a copy");
  return host;
}

#endif // ZEST_RUNTIME_TESTS_DEVICEBUFFERS_H
