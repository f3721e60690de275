//===- Device.h - The GPU and streams of a CUDA backend ---------*- C++ -*-===//
//
// Every rank drives one GPU (its local rank modulo the devices it sees) with
// two streams: the compute stream, on which compiled kernels and the
// runtime's copies run, and a communication stream for collectives.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_CUDA_NCCL_DEVICE_H
#define ZEST_RUNTIME_CUDA_NCCL_DEVICE_H

#include "../common/Backend.h"

#include <cuda_runtime.h>

#include <memory>
#include <string>

namespace zest::rt::cuda {

struct DeviceStreams {
  int device = 0;
  cudaStream_t compute = nullptr, communication = nullptr;
};
/// This process's device and streams (set by initDevice).
extern DeviceStreams streams;

/// Aborts the job with a message naming `what` unless `status` is success.
void checkCuda(cudaError_t status, const std::string &what);
/// Picks rank `rank`'s GPU and creates the two streams.
void initDevice(int rank);
/// Device memory for the runtime's pool, ordered on the compute stream
/// (cudaMallocAsync); 256-byte aligned, which covers any `alignment` the
/// pool asks for.
void *allocateDeviceMemory(size_t bytes, size_t alignment);
/// Makes `waiter` wait for the work enqueued so far on `producer`.
void streamWaits(cudaStream_t waiter, cudaStream_t producer,
                 const std::string &what);

/// NCCL communicators bootstrapped over `mpi` (one GPU per rank).
std::unique_ptr<Backend> createNcclBackend(std::unique_ptr<Backend> mpi);
/// Device -> host -> MPI -> device (several ranks may share a GPU).
std::unique_ptr<Backend> createStagedBackend(std::unique_ptr<Backend> mpi);

} // namespace zest::rt::cuda

#endif // ZEST_RUNTIME_CUDA_NCCL_DEVICE_H
