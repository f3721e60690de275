//===- Device.cpp - The GPU and streams of a CUDA backend -----------------===//

#include "Device.h"
#include "KernelTimes.h"
#include "zest_runtime_cuda.h"

// The C bindings only.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

using namespace zest::rt;

cuda::DeviceStreams cuda::streams;

void cuda::checkCuda(cudaError_t status, const std::string &what) {
  if (status != cudaSuccess)
    fatal("CUDA error in " + what + ": " + cudaGetErrorString(status));
}

/// This rank's index among the ranks of its node: the ranks that share
/// memory with it, whatever launcher started them (MPI-3).
static int nodeLocalRank() {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                      &node);
  int rank = 0;
  MPI_Comm_rank(node, &rank);
  MPI_Comm_free(&node);
  return rank;
}

void cuda::initDevice() {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess)
    fatal(std::string("ZEST_BACKEND asks for a GPU backend, but CUDA finds "
                      "no usable GPU (") +
          cudaGetErrorString(status) +
          "); run on a machine with an NVIDIA GPU and its driver");
  if (count == 0)
    fatal("ZEST_BACKEND asks for a GPU backend but no CUDA device is "
          "visible; use the default CPU backend");
  streams.device = nodeLocalRank() % count;
  checkCuda(cudaSetDevice(streams.device), "cudaSetDevice");
  checkCuda(cudaStreamCreateWithFlags(&streams.compute, cudaStreamNonBlocking),
            "creating the compute stream");
  checkCuda(
      cudaStreamCreateWithFlags(&streams.communication, cudaStreamNonBlocking),
      "creating the communication stream");
}

void cuda::synchronize(cudaStream_t stream, const std::string &what) {
  cudaEvent_t done;
  checkCuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), what);
  checkCuda(cudaEventRecord(done, stream), what);
  waitForEvent(done, what);
  checkCuda(cudaEventDestroy(done), what);
}

/// The first host wait since DeviceBackend::takeHostWait last asked.
static std::optional<std::string> firstHostWait;

void cuda::waitForEvent(cudaEvent_t done, const std::string &what) {
  if (!firstHostWait)
    firstHostWait = what;
  auto start = std::chrono::steady_clock::now();
  for (int polls = 0;; ++polls) {
    cudaError_t status = cudaEventQuery(done);
    if (status == cudaSuccess)
      break;
    if (status != cudaErrorNotReady)
      checkCuda(status, what + " (a kernel or copy enqueued before failed)");
    if (streams.checkAsyncErrors)
      streams.checkAsyncErrors();
    double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (waited > timeoutSeconds())
      fatal("the GPU's work before " + what + " did not complete within " +
            std::to_string(int(timeoutSeconds())) +
            " s (ZEST_TIMEOUT_S); another rank may have died or issued "
            "different collectives");
    if (polls > 100)
      std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void cuda::streamWaits(cudaStream_t waiter, cudaStream_t producer,
                       const std::string &what) {
  // One event serves every wait: a wait takes the event's state when it is
  // enqueued, so recording it again later does not disturb it.
  static cudaEvent_t event = [&] {
    cudaEvent_t created;
    checkCuda(cudaEventCreateWithFlags(&created, cudaEventDisableTiming), what);
    return created;
  }();
  checkCuda(cudaEventRecord(event, producer), what);
  checkCuda(cudaStreamWaitEvent(waiter, event, 0), what);
}

cuda::DeviceBackend::DeviceBackend(std::unique_ptr<Backend> mpi)
    : mpi(std::move(mpi)) {
  initDevice();
}

void *cuda::DeviceBackend::allocateMemory(size_t bytes, size_t alignment) {
  refuseWhileCapturing("allocating " + std::to_string(bytes) +
                       " bytes of device memory");
  if (alignment > 256)
    fatal("device memory is 256-byte aligned; " + std::to_string(alignment) +
          " was asked for");
  void *ptr = nullptr;
  checkCuda(cudaMallocAsync(&ptr, bytes, streams.compute),
            "allocating " + std::to_string(bytes) + " bytes of device memory");
  return ptr;
}

void cuda::DeviceBackend::freeMemory(void *ptr) {
  checkCuda(cudaFreeAsync(ptr, streams.compute), "freeing device memory");
}

char *cuda::DeviceBackend::getStaging() {
  if (!staging) {
    checkCuda(
        cudaMallocHost(reinterpret_cast<void **>(&staging), kStagingBytes),
        "allocating pinned staging memory");
    checkCuda(cudaEventCreateWithFlags(&stagingFree, cudaEventDisableTiming),
              "creating an event");
    checkCuda(cudaEventRecord(stagingFree, streams.compute), "an event");
  }
  return staging;
}

void cuda::DeviceBackend::copyToDevice(void *device, const void *host,
                                       size_t bytes) {
  std::string what =
      "copying " + std::to_string(bytes) + " bytes to the device";
  TimedScope timed("copy to the device, staged", streams.compute);
  char *buffer = getStaging();
  for (size_t offset = 0; offset < bytes; offset += kStagingBytes) {
    size_t chunk = std::min(kStagingBytes, bytes - offset);
    waitForEvent(stagingFree, what); // the previous chunk has left
    std::memcpy(buffer, static_cast<const char *>(host) + offset, chunk);
    checkCuda(cudaMemcpyAsync(static_cast<char *>(device) + offset, buffer,
                              chunk, cudaMemcpyHostToDevice, streams.compute),
              what);
    checkCuda(cudaEventRecord(stagingFree, streams.compute), what);
  }
}

void cuda::DeviceBackend::copyToHost(void *host, const void *device,
                                     size_t bytes) {
  std::string what = "copying " + std::to_string(bytes) + " bytes to the host";
  TimedScope timed("copy to the host, staged", streams.compute);
  char *buffer = getStaging();
  for (size_t offset = 0; offset < bytes; offset += kStagingBytes) {
    size_t chunk = std::min(kStagingBytes, bytes - offset);
    checkCuda(cudaMemcpyAsync(buffer,
                              static_cast<const char *>(device) + offset, chunk,
                              cudaMemcpyDeviceToHost, streams.compute),
              what);
    checkCuda(cudaEventRecord(stagingFree, streams.compute), what);
    waitForEvent(stagingFree, what);
    std::memcpy(static_cast<char *>(host) + offset, buffer, chunk);
  }
}

void cuda::DeviceBackend::zeroMemory(void *device, size_t bytes) {
  checkCuda(cudaMemsetAsync(device, 0, bytes, streams.compute),
            "zeroing " + std::to_string(bytes) + " bytes of device memory");
}

void *cuda::DeviceBackend::allocatePinned(size_t bytes) {
  refuseWhileCapturing("allocating " + std::to_string(bytes) +
                       " bytes of pinned memory");
  void *ptr = nullptr;
  checkCuda(cudaMallocHost(&ptr, bytes),
            "allocating " + std::to_string(bytes) + " bytes of pinned memory");
  return ptr;
}

void cuda::DeviceBackend::freePinned(void *ptr) {
  checkCuda(cudaFreeHost(ptr), "freeing pinned memory");
}

void cuda::DeviceBackend::copyToDeviceAsync(void *device, const void *host,
                                            size_t bytes) {
  TimedScope timed("copy to the device", streams.compute);
  checkCuda(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice,
                            streams.compute),
            "copying " + std::to_string(bytes) + " bytes to the device");
}

void cuda::DeviceBackend::copyToHostStart(void *host, const void *device,
                                          size_t bytes) {
  std::string what = "copying " + std::to_string(bytes) + " bytes to the host";
  if (pendingCopies.count(host))
    fatal(what + ": a copy into this host buffer is still in flight");
  cudaEvent_t event;
  if (idleCopyEvents.empty()) {
    checkCuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), what);
  } else {
    event = idleCopyEvents.back();
    idleCopyEvents.pop_back();
  }
  {
    TimedScope timed("copy to the host", streams.compute);
    checkCuda(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost,
                              streams.compute),
              what);
  }
  checkCuda(cudaEventRecord(event, streams.compute), what);
  pendingCopies[host] = event;
}

void cuda::DeviceBackend::copyWait(const void *host) {
  auto it = pendingCopies.find(host);
  if (it == pendingCopies.end())
    fatal("zest_copy_wait: no copy into this host buffer is in flight");
  waitForEvent(it->second, "a copy to the host");
  idleCopyEvents.push_back(it->second);
  pendingCopies.erase(it);
}

std::unique_ptr<PendingOp> cuda::DeviceBackend::barrier() {
  synchronize(streams.compute, "a barrier");
  return mpi->barrier();
}

void cuda::DeviceBackend::abort(int code) {
  mpi->abort(code);
  std::_Exit(code); // not reached: the MPI backend aborts the job
}

void cuda::DeviceBackend::refuseWhileCapturing(const std::string &what) const {
  if (capturing)
    fatal(what + " while an entry point was being captured as a CUDA graph: "
                 "its first call should have allocated it; recompile with "
                 "--cuda-graphs=false and report this");
}

namespace {
/// An instantiated CUDA graph, launched on the compute stream.
class CudaGraph : public Backend::CapturedWork {
public:
  explicit CudaGraph(cudaGraphExec_t exec) : exec(exec) {}
  ~CudaGraph() override { cudaGraphExecDestroy(exec); }
  void launch() override {
    cuda::checkCuda(cudaGraphLaunch(exec, cuda::streams.compute),
                    "launching an entry point's CUDA graph");
  }

private:
  cudaGraphExec_t exec;
};
} // namespace

std::optional<std::string> cuda::DeviceBackend::whyNoCapture() const {
  if (kernelTimesEnabled())
    return std::string("ZEST_KERNEL_TIMES times every launch apart");
  return std::nullopt;
}

void cuda::DeviceBackend::beginCapture() {
  const char *what = "capturing an entry point as a CUDA graph";
  checkCuda(
      cudaStreamBeginCapture(streams.compute, cudaStreamCaptureModeThreadLocal),
      what);
  // Collectives run on the communication stream: forked into the capture
  // here, joined back in endCapture, whether or not the entry has any.
  streamWaits(streams.communication, streams.compute, what);
  capturing = true;
}

std::unique_ptr<Backend::CapturedWork> cuda::DeviceBackend::endCapture() {
  const char *what = "capturing an entry point as a CUDA graph";
  capturing = false;
  streamWaits(streams.compute, streams.communication, what);
  cudaGraph_t graph = nullptr;
  checkCuda(cudaStreamEndCapture(streams.compute, &graph), what);
  cudaGraphExec_t exec = nullptr;
  checkCuda(cudaGraphInstantiate(&exec, graph, 0),
            "instantiating an entry point's CUDA graph");
  checkCuda(cudaGraphDestroy(graph), what);
  return std::make_unique<CudaGraph>(exec);
}

std::optional<std::string> cuda::DeviceBackend::takeHostWait() {
  return std::exchange(firstHostWait, std::nullopt);
}

void cuda::DeviceBackend::endStep() { endKernelTimesStep(); }

void cuda::DeviceBackend::finalize() {
  synchronize(streams.compute, "the end");
  synchronize(streams.communication, "the end");
  reportKernelTimes(rank());
  if (staging) {
    cudaFreeHost(staging);
    cudaEventDestroy(stagingFree);
    staging = nullptr;
  }
  for (auto &[host, event] : pendingCopies)
    cudaEventDestroy(event);
  for (cudaEvent_t event : idleCopyEvents)
    cudaEventDestroy(event);
  pendingCopies.clear();
  idleCopyEvents.clear();
  mpi->finalize();
}

std::unique_ptr<Backend> zest::rt::createCudaBackend(const std::string &kind,
                                                     int *argc, char ***argv) {
  if (kind != "nccl" && kind != "staged")
    fatal("ZEST_BACKEND=" + kind +
          " is not a backend: use cpu, nccl or "
          "staged");
  std::unique_ptr<Backend> mpi = createMpiBackend(argc, argv, false);
  if (kind == "staged")
    return cuda::createStagedBackend(std::move(mpi));
  return cuda::createNcclBackend(std::move(mpi));
}

extern "C" void *zest_cuda_compute_stream(void) {
  return cuda::streams.compute;
}

extern "C" int zest_cuda_device(void) { return cuda::streams.device; }
