//===- DeviceBuffers.h - Device buffers of the CUDA tests ------*- C++ -*-===//

#ifndef ZEST_RUNTIME_TESTS_DEVICEBUFFERS_H
#define ZEST_RUNTIME_TESTS_DEVICEBUFFERS_H

#include "zest_runtime_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

/// The runtime's compute stream, which the tests' copies use too.
inline cudaStream_t stream() {
  return static_cast<cudaStream_t>(zest_cuda_compute_stream());
}

/// A device copy of `host` (at least one element, so never null).
template <typename T> T *toDevice(const std::vector<T> &host) {
  T *device = nullptr;
  cudaMalloc(&device, std::max<size_t>(1, host.size()) * sizeof(T));
  cudaMemcpyAsync(device, host.data(), host.size() * sizeof(T),
                  cudaMemcpyHostToDevice, stream());
  return device;
}

/// The first `n` elements of `device`, once the stream has written them.
template <typename T> std::vector<T> toHost(const T *device, size_t n) {
  std::vector<T> host(n);
  cudaMemcpyAsync(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost,
                  stream());
  cudaStreamSynchronize(stream());
  return host;
}

#endif // ZEST_RUNTIME_TESTS_DEVICEBUFFERS_H
