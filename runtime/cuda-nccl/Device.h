//===- Device.h - The GPU and streams of a CUDA backend ---------*- C++ -*-===//
//
// Every rank drives one GPU (its node-local rank modulo the devices it sees)
// with two streams: the compute stream, on which compiled kernels and the
// runtime's copies run, and a communication stream for collectives.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_CUDA_NCCL_DEVICE_H
#define ZEST_RUNTIME_CUDA_NCCL_DEVICE_H

#include "../common/Backend.h"

#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace zest::rt::cuda {

struct DeviceStreams {
  int device = 0;
  cudaStream_t compute = nullptr, communication = nullptr;
  /// Aborts the job if the communication library reports an asynchronous
  /// error (set by the NCCL backend).
  std::function<void()> checkAsyncErrors;
};
/// This process's device and streams (set by initDevice).
extern DeviceStreams streams;

/// Aborts the job with a message naming `what` unless `status` is success.
void checkCuda(cudaError_t status, const std::string &what);
/// Picks this rank's GPU (its rank among the node's ranks, modulo the
/// visible devices) and creates the two streams.
void initDevice();
/// Waits on the host for the work enqueued so far on `stream`, polling: a
/// kernel's fault is reported as such, an asynchronous NCCL error aborts
/// every rank, and a wait longer than the runtime's timeout (a collective
/// whose peers never came) ends the job naming `what`.
void synchronize(cudaStream_t stream, const std::string &what);
/// The same for the work before `event` was recorded.
void waitForEvent(cudaEvent_t event, const std::string &what);
/// Makes `waiter` wait for the work enqueued so far on `producer`.
void streamWaits(cudaStream_t waiter, cudaStream_t producer,
                 const std::string &what);

/// What the CUDA backends share: this rank's GPU and streams, the MPI
/// backend they start from (ranks, barrier, abort, finalize) and device
/// memory for the runtime's pool.
class DeviceBackend : public Backend {
public:
  /// Picks this rank's GPU and creates its streams.
  explicit DeviceBackend(std::unique_ptr<Backend> mpi);
  int rank() const override { return mpi->rank(); }
  int worldSize() const override { return mpi->worldSize(); }
  bool supportsProgressThread() const override { return false; }
  Backend &host() override { return *mpi; }
  /// Ordered on the compute stream (cudaMallocAsync); 256-byte aligned,
  /// which covers any `alignment` the pool asks for.
  void *allocateMemory(size_t bytes, size_t alignment) override;
  void freeMemory(void *ptr) override;
  bool buffersOnDevice() const override { return true; }
  /// On the compute stream, through a pinned staging buffer (a copy from
  /// pageable memory would wait for the stream without a timeout); returns
  /// once `host` may be reused.
  void copyToDevice(void *device, const void *host, size_t bytes) override;
  /// On the compute stream, after everything enqueued before, through the
  /// staging buffer; waits (with the timeout).
  void copyToHost(void *host, const void *device, size_t bytes) override;
  /// cudaMemsetAsync on the compute stream.
  void zeroMemory(void *device, size_t bytes) override;
  /// cudaMallocHost, so the copies below run without staging.
  void *allocatePinned(size_t bytes) override;
  void freePinned(void *ptr) override;
  /// Straight cudaMemcpyAsync on the compute stream; a copy to the host
  /// records an event that copyWait waits for (with the timeout).
  void copyToDeviceAsync(void *device, const void *host, size_t bytes) override;
  void copyToHostStart(void *host, const void *device, size_t bytes) override;
  void copyWait(const void *host) override;
  /// Waits for the compute stream, then for every rank.
  std::unique_ptr<PendingOp> barrier() override;
  [[noreturn]] void abort(int code) override;
  /// Entry points as CUDA graphs: the compute stream is captured, the
  /// communication stream forked into the capture and joined back.
  std::optional<std::string> whyNoCapture() const override;
  void beginCapture() override;
  std::unique_ptr<CapturedWork> endCapture() override;
  /// Every wait goes through waitForEvent, which notes the first one.
  std::optional<std::string> takeHostWait() override;
  /// ZEST_KERNEL_TIMES: the step's GPU times are summed.
  void endStep() override;
  /// Waits for both streams, prints ZEST_KERNEL_TIMES' table, then
  /// finalizes MPI.
  void finalize() override;

protected:
  std::unique_ptr<Backend> mpi;

private:
  /// Page-locked staging for copies, in chunks; `stagingFree` is recorded
  /// after the last copy that reads it.
  static constexpr size_t kStagingBytes = 16 << 20;
  char *staging = nullptr;
  cudaEvent_t stagingFree = nullptr;
  char *getStaging();
  /// Events of the copies to the host in flight, by destination, and
  /// events free for the next ones.
  std::unordered_map<const void *, cudaEvent_t> pendingCopies;
  std::vector<cudaEvent_t> idleCopyEvents;
  /// Between beginCapture and endCapture: an allocation then is a bug (the
  /// graph would address memory of the capture's own).
  bool capturing = false;
  void refuseWhileCapturing(const std::string &what) const;
};

/// NCCL communicators bootstrapped over `mpi` (one GPU per rank).
std::unique_ptr<Backend> createNcclBackend(std::unique_ptr<Backend> mpi);
/// Device -> host -> MPI -> device (several ranks may share a GPU).
std::unique_ptr<Backend> createStagedBackend(std::unique_ptr<Backend> mpi);

} // namespace zest::rt::cuda

#endif // ZEST_RUNTIME_CUDA_NCCL_DEVICE_H
