//===- CudaRuntime.cpp - The CUDA runtime API on the emulated GPU ---------===//
//
// The part of the CUDA runtime API that Zest's device runtime calls (device,
// streams, events, memory, copies), implemented on the host: device memory
// is DeviceMemory.h's region, streams and events are Streams.h's. Every call
// checks its pointers' kinds and its stream, and names itself when one is
// wrong. Kernels are in Kernels.cpp, stream capture and graphs in Graphs.cpp:
// here, the calls a capture forbids (allocations, synchronizing calls,
// pageable copies, queries of captured work) return CUDA's capture errors.
//
//===----------------------------------------------------------------------===//

#include "DeviceMemory.h"
#include "StreamObjects.h"
#include "zest_runtime_emulated.h"

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <optional>
#include <set>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace zest::emulated;

namespace {

struct Objects {
  std::set<cudaStream_t> streams;
  std::set<cudaEvent_t> events;
  CUstream_st legacy; // the default stream
  int device = 0;
};

Objects &objects() {
  static Objects *o = new Objects; // alive for exit-time calls
  return *o;
}

/// Host work in stream order.
class Work : public StreamOp {
public:
  explicit Work(std::function<void()> work) : work(std::move(work)) {}
  bool advance() override {
    AccessScope scope;
    work();
    return true;
  }

private:
  std::function<void()> work;
};

/// cudaStreamWaitEvent: complete once the event's operation is.
class WaitEvent : public StreamOp {
public:
  explicit WaitEvent(std::shared_ptr<StreamOp> last) : last(std::move(last)) {}
  bool advance() override { return !last || last->done; }

private:
  std::shared_ptr<StreamOp> last;
};

/// Runs the front operations of `stream` that can complete; true if any did.
bool advanceStream(CUstream_st &stream) {
  bool moved = false;
  while (!stream.queue.empty()) {
    std::shared_ptr<StreamOp> op = stream.queue.front();
    if (!op->advance())
      break;
    op->done = true;
    op->doneAt = std::chrono::steady_clock::now();
    stream.queue.pop_front();
    moved = true;
  }
  return moved;
}

bool running = false; // progress() is not reentrant

void waitUntil(const std::function<bool()> &complete) {
  for (int spins = 0; !complete(); ++spins) {
    progress();
    if (spins > 1000)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

int deviceCount() {
  const char *count = std::getenv("ZEST_EMULATED_DEVICES");
  return count ? std::max(1, std::atoi(count)) : 1;
}

/// Checks the two sides of a copy for its kind; returns the kind with
/// cudaMemcpyDefault resolved.
cudaMemcpyKind checkCopy(void *dst, size_t dstBytes, const void *src,
                         size_t srcBytes, cudaMemcpyKind kind,
                         const std::string &what) {
  if (kind == cudaMemcpyDefault)
    kind = isDevice(dst) ? (isDevice(src) ? cudaMemcpyDeviceToDevice
                                          : cudaMemcpyHostToDevice)
                         : (isDevice(src) ? cudaMemcpyDeviceToHost
                                          : cudaMemcpyHostToHost);
  bool toDevice =
      kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  bool fromDevice =
      kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (toDevice)
    requireDevice(dst, dstBytes, what + " destination");
  else
    requireHost(dst, what + " destination");
  if (fromDevice)
    requireDevice(src, srcBytes, what + " source");
  else
    requireHost(src, what + " source");
  return kind;
}

/// A copy of `height` rows of `width` bytes in stream order, as the CUDA
/// runtime does it: pageable host sources are read now, pageable host
/// destinations written before the call returns; pinned memory is read and
/// written when the stream gets there.
cudaError_t copy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
                   size_t width, size_t height, cudaMemcpyKind kind,
                   cudaStream_t stream, const std::string &what) {
  if (height == 0 || width == 0)
    return cudaSuccess;
  if (width > dpitch || width > spitch)
    return cudaErrorInvalidPitchValue;
  kind = checkCopy(dst, (height - 1) * dpitch + width, src,
                   (height - 1) * spitch + width, kind, what);
  bool pageable = (kind == cudaMemcpyHostToDevice && !isPinned(src)) ||
                  (kind == cudaMemcpyDeviceToHost && !isPinned(dst));
  if (pageable && getStream(stream, what).capture)
    return captureViolation(cudaErrorStreamCaptureUnsupported,
                            what + " copies pageable host memory on a stream "
                                   "that is being captured: a graph copies "
                                   "page-locked memory (cudaMallocHost) only");
  std::shared_ptr<std::vector<char>> staged;
  if (kind == cudaMemcpyHostToDevice && !isPinned(src)) {
    // CUDA synchronizes the stream before a copy from pageable memory.
    CUstream_st &s = getStream(stream, what);
    waitUntil([&] { return s.queue.empty(); });
    staged = std::make_shared<std::vector<char>>((height - 1) * spitch + width);
    std::memcpy(staged->data(), src, staged->size());
    src = staged->data();
  }
  auto op = enqueueWork(
      stream,
      [=] {
        for (size_t row = 0; row < height; ++row)
          std::memmove(static_cast<char *>(dst) + row * dpitch,
                       static_cast<const char *>(src) + row * spitch, width);
        (void)staged;
      },
      what);
  if (kind == cudaMemcpyDeviceToHost && !isPinned(dst))
    waitFor(op);
  return cudaSuccess;
}

/// The capture error of a call that would wait for `stream`'s work, which a
/// captured stream never runs; success otherwise.
cudaError_t checkNotCaptured(const CUstream_st &stream,
                             const std::string &what) {
  if (!stream.capture)
    return cudaSuccess;
  return captureViolation(cudaErrorStreamCaptureUnsupported,
                          what + " waits for a stream that is being captured "
                                 "(its work runs only when the graph is "
                                 "launched)");
}

/// The capture error of `what` on an event recorded in a capture.
cudaError_t checkNotCaptured(const CUevent_st &event, const std::string &what) {
  if (!event.capture)
    return cudaSuccess;
  return captureViolation(cudaErrorCapturedEvent,
                          what + " is given an event recorded in a stream "
                                 "capture, whose work has not run");
}

/// The capture error of an allocation or a free while a stream is captured.
cudaError_t checkNoCapture(const std::string &what) {
  if (!capturing())
    return cudaSuccess;
  return captureViolation(cudaErrorStreamCaptureUnsupported,
                          what + " while a stream is being captured: "
                                 "allocate before the capture, and replay "
                                 "the graph on the same memory");
}

/// The kernels built for the emulated device trap on a misaligned access
/// (runtime/CMakeLists.txt), where a GPU faults and x86 would not: say so
/// instead of dying of an unexplained SIGILL.
void reportKernelTrap(int) {
  const char message[] =
      "zest: error: the emulated device trapped in a kernel: a misaligned "
      "access (a GPU stops with cudaErrorMisalignedAddress)\n";
  ssize_t written = write(STDERR_FILENO, message, sizeof(message) - 1);
  (void)written;
  _exit(1);
}

void installKernelTrapReport() {
  static bool installed = [] {
    struct sigaction action = {};
    action.sa_handler = reportKernelTrap;
    return sigaction(SIGILL, &action, nullptr) == 0;
  }();
  (void)installed;
}

} // namespace

CUstream_st &zest::emulated::getStream(cudaStream_t stream,
                                       const std::string &what) {
  Objects &o = objects();
  if (!stream)
    return o.legacy;
  if (!o.streams.count(stream))
    deviceError(what + " is given a stream that was never created or was "
                       "destroyed");
  return *stream;
}

CUevent_st &zest::emulated::getEvent(cudaEvent_t event,
                                     const std::string &what) {
  if (!objects().events.count(event))
    deviceError(what + " is given an event that was never created or was "
                       "destroyed");
  return *event;
}

std::shared_ptr<StreamOp> zest::emulated::enqueue(cudaStream_t stream,
                                                  OpFactory make,
                                                  const std::string &what) {
  CUstream_st &s = getStream(stream, what);
  if (s.capture) {
    s.capture->nodes.push_back({std::move(make), s.tail});
    s.tail = {s.capture->nodes.size() - 1};
    return nullptr;
  }
  if (!stream && capturing())
    deviceError(what + " on the legacy default stream while a stream is "
                       "captured (cudaErrorStreamCaptureImplicit on a GPU)");
  std::shared_ptr<StreamOp> op = make();
  s.queue.push_back(op);
  progress();
  return op;
}

std::shared_ptr<StreamOp>
zest::emulated::enqueueWork(cudaStream_t stream, std::function<void()> work,
                            const std::string &what) {
  return enqueue(
      stream, [work = std::move(work)] { return std::make_shared<Work>(work); },
      what);
}

void zest::emulated::progress() {
  if (running)
    return;
  running = true;
  Objects &o = objects();
  for (bool moved = true; moved;) {
    moved = advanceStream(o.legacy);
    for (cudaStream_t stream : o.streams)
      moved = advanceStream(*stream) || moved;
  }
  running = false;
}

void zest::emulated::waitFor(const std::shared_ptr<StreamOp> &op) {
  waitUntil([&] { return op->done; });
}

extern "C" {

int zest_emulated_device(void) { return 1; }

const char *cudaGetErrorString(cudaError_t error) {
  if (const char *message = captureViolationMessage(error))
    return message;
  switch (error) {
  case cudaSuccess:
    return "no error (emulated device)";
  case cudaErrorMemoryAllocation:
    return "out of memory (emulated device)";
  case cudaErrorNotReady:
    return "not ready (emulated device)";
  case cudaErrorInvalidValue:
    return "invalid argument (emulated device)";
  default:
    return "error (emulated device)";
  }
}

cudaError_t cudaGetLastError(void) { return cudaSuccess; }

cudaError_t cudaGetDeviceCount(int *count) {
  *count = deviceCount();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= deviceCount())
    return cudaErrorInvalidDevice;
  installKernelTrapReport();
  objects().device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
  *device = objects().device;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  if (capturing())
    return captureViolation(cudaErrorStreamCaptureUnsupported,
                            "cudaDeviceSynchronize while a stream is being "
                            "captured");
  Objects &o = objects();
  waitUntil([&] {
    bool idle = o.legacy.queue.empty();
    for (cudaStream_t stream : o.streams)
      idle = idle && stream->queue.empty();
    return idle;
  });
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int) {
  *stream = new CUstream_st;
  objects().streams.insert(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream) {
  return cudaStreamCreateWithFlags(stream, 0);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  CUstream_st &s = getStream(stream, "cudaStreamDestroy");
  if (cudaError_t status = checkNotCaptured(s, "cudaStreamDestroy"))
    return status;
  // As CUDA: the stream's work completes first.
  waitUntil([&] { return s.queue.empty(); });
  objects().streams.erase(stream);
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  CUstream_st &s = getStream(stream, "cudaStreamSynchronize");
  if (cudaError_t status = checkNotCaptured(s, "cudaStreamSynchronize"))
    return status;
  waitUntil([&] { return s.queue.empty(); });
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  CUstream_st &s = getStream(stream, "cudaStreamQuery");
  if (cudaError_t status = checkNotCaptured(s, "cudaStreamQuery"))
    return status;
  progress();
  return s.queue.empty() ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                unsigned int) {
  CUevent_st &e = getEvent(event, "cudaStreamWaitEvent");
  CUstream_st &s = getStream(stream, "cudaStreamWaitEvent");
  if (e.capture || s.capture)
    return joinCapture(stream, e);
  std::shared_ptr<StreamOp> last = e.last;
  enqueue(
      stream, [last] { return std::make_shared<WaitEvent>(last); },
      "cudaStreamWaitEvent");
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int) {
  *event = new CUevent_st;
  objects().events.insert(*event);
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event) {
  return cudaEventCreateWithFlags(event, 0);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  getEvent(event, "cudaEventDestroy");
  objects().events.erase(event);
  delete event; // streams waiting on it keep its operation
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  CUevent_st &e = getEvent(event, "cudaEventRecord");
  CUstream_st &s = getStream(stream, "cudaEventRecord");
  // Recorded in a capture, it stands for the stream's last node there.
  e.capture = s.capture;
  e.nodes = s.tail;
  e.last = s.queue.empty() || s.capture ? nullptr : s.queue.back();
  e.recordedAt = std::chrono::steady_clock::now();
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start,
                                 cudaEvent_t end) {
  // An event completes when the work recorded before it does.
  auto completedAt = [](CUevent_st &e)
      -> std::optional<std::chrono::steady_clock::time_point> {
    if (!e.last)
      return e.recordedAt;
    if (!e.last->done)
      return std::nullopt;
    return e.last->doneAt;
  };
  CUevent_st &startEvent = getEvent(start, "cudaEventElapsedTime");
  CUevent_st &endEvent = getEvent(end, "cudaEventElapsedTime");
  for (CUevent_st *e : {&startEvent, &endEvent})
    if (cudaError_t status = checkNotCaptured(*e, "cudaEventElapsedTime"))
      return status;
  auto first = completedAt(startEvent);
  auto second = completedAt(endEvent);
  if (!first || !second)
    return cudaErrorNotReady;
  *ms = std::chrono::duration<float, std::milli>(*second - *first).count();
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  CUevent_st &e = getEvent(event, "cudaEventQuery");
  if (cudaError_t status = checkNotCaptured(e, "cudaEventQuery"))
    return status;
  progress();
  return !e.last || e.last->done ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  CUevent_st &e = getEvent(event, "cudaEventSynchronize");
  if (cudaError_t status = checkNotCaptured(e, "cudaEventSynchronize"))
    return status;
  std::shared_ptr<StreamOp> last = e.last;
  waitUntil([&] { return !last || last->done; });
  return cudaSuccess;
}

cudaError_t cudaMalloc(void **ptr, size_t bytes) {
  if (cudaError_t status = checkNoCapture("cudaMalloc"))
    return status;
  *ptr = allocateDevice(bytes);
  return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaMallocAsync(void **ptr, size_t bytes, cudaStream_t stream) {
  getStream(stream, "cudaMallocAsync");
  // Stricter than a GPU, where a capture makes it a graph's allocation: the
  // runtime's pool allocates before any capture and keeps its memory.
  if (cudaError_t status = checkNoCapture("cudaMallocAsync"))
    return status;
  return cudaMalloc(ptr, bytes); // usable by the stream's later work
}

cudaError_t cudaFree(void *ptr) {
  if (!ptr)
    return cudaSuccess;
  if (cudaError_t status = checkNoCapture("cudaFree"))
    return status;
  if (!isDevice(ptr))
    deviceError("cudaFree is given " + describePointer(ptr) +
                ", which cudaMalloc did not return");
  cudaDeviceSynchronize(); // as CUDA's cudaFree
  freeDevice(ptr);
  return cudaSuccess;
}

cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream) {
  if (cudaError_t status = checkNoCapture("cudaFreeAsync"))
    return status;
  if (ptr && !isDevice(ptr))
    deviceError("cudaFreeAsync is given " + describePointer(ptr) +
                ", which cudaMalloc did not return");
  enqueueWork(
      stream, [ptr] { freeDevice(ptr); }, "cudaFreeAsync");
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t bytes) {
  if (cudaError_t status = checkNoCapture("cudaMallocHost"))
    return status;
  *ptr = allocatePinned(bytes);
  return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned int) {
  return cudaMallocHost(ptr, bytes);
}

cudaError_t cudaFreeHost(void *ptr) {
  if (cudaError_t status = checkNoCapture("cudaFreeHost"))
    return status;
  if (ptr && !freePinned(ptr))
    deviceError("cudaFreeHost is given " + describePointer(ptr) +
                ", which cudaMallocHost did not return");
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *attributes,
                                     const void *ptr) {
  std::memset(attributes, 0, sizeof(*attributes));
  attributes->device = objects().device;
  if (isDevice(ptr)) {
    attributes->type = cudaMemoryTypeDevice;
    attributes->devicePointer = const_cast<void *>(ptr);
  } else {
    attributes->type =
        isPinned(ptr) ? cudaMemoryTypeHost : cudaMemoryTypeUnregistered;
    attributes->hostPointer = const_cast<void *>(ptr);
  }
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                            cudaMemcpyKind kind, cudaStream_t stream) {
  return copy2D(dst, bytes, src, bytes, bytes, 1, kind, stream,
                "cudaMemcpyAsync");
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes,
                       cudaMemcpyKind kind) {
  if (capturing())
    return captureViolation(cudaErrorStreamCaptureUnsupported,
                            "cudaMemcpy (synchronous) while a stream is being "
                            "captured");
  cudaError_t status =
      copy2D(dst, bytes, src, bytes, bytes, 1, kind, nullptr, "cudaMemcpy");
  cudaStreamSynchronize(nullptr);
  return status;
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src,
                              size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind kind, cudaStream_t stream) {
  return copy2D(dst, dpitch, src, spitch, width, height, kind, stream,
                "cudaMemcpy2DAsync");
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes,
                            cudaStream_t stream) {
  requireDevice(ptr, bytes, "cudaMemsetAsync destination");
  enqueueWork(
      stream, [=] { std::memset(ptr, value, bytes); }, "cudaMemsetAsync");
  return cudaSuccess;
}

} // extern "C"
