//===- CudaRuntime.cpp - The CUDA runtime API on the emulated GPU ---------===//
//
// The part of the CUDA runtime API that Zest's device runtime calls (device,
// streams, events, memory, copies), implemented on the host: device memory
// is DeviceMemory.h's region, streams and events are Streams.h's. Every call
// checks its pointers' kinds and its stream, and names itself when one is
// wrong. Kernels are in Kernels.cpp.
//
//===----------------------------------------------------------------------===//

#include "DeviceMemory.h"
#include "Streams.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

using namespace zest::emulated;

struct CUstream_st {
  WorkList pending;
};

struct CUevent_st {
  WorkList pending;
};

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

CUstream_st &getStream(cudaStream_t stream, const std::string &what) {
  Objects &o = objects();
  if (!stream)
    return o.legacy;
  if (!o.streams.count(stream))
    deviceError(what + " is given a stream that was never created or was "
                       "destroyed");
  return *stream;
}

CUevent_st &getEvent(cudaEvent_t event, const std::string &what) {
  if (!objects().events.count(event))
    deviceError(what + " is given an event that was never created or was "
                       "destroyed");
  return *event;
}

int deviceCount() {
  const char *count = std::getenv("ZEST_EMULATED_DEVICES");
  return count ? std::max(1, std::atoi(count)) : 1;
}

/// Checks the two sides of a copy of `bytes` for its kind.
void checkCopy(void *dst, size_t dstBytes, const void *src, size_t srcBytes,
               cudaMemcpyKind kind, const std::string &what) {
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
}

} // namespace

void zest::emulated::waitAll(const WorkList &work) {
  for (const auto &item : work)
    item->wait();
}

bool zest::emulated::testAll(const WorkList &work) {
  bool done = true;
  for (const auto &item : work)
    done = item->test() && done;
  return done;
}

void zest::emulated::beforeWorkOn(cudaStream_t stream,
                                  const std::string &what) {
  CUstream_st &s = getStream(stream, what);
  waitAll(s.pending);
  s.pending.clear();
}

void zest::emulated::addWork(cudaStream_t stream, std::shared_ptr<Work> work) {
  getStream(stream, "a collective").pending.push_back(std::move(work));
}

extern "C" {

const char *cudaGetErrorString(cudaError_t error) {
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
  objects().device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
  *device = objects().device;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  for (cudaStream_t stream : objects().streams)
    beforeWorkOn(stream, "cudaDeviceSynchronize");
  beforeWorkOn(nullptr, "cudaDeviceSynchronize");
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
  getStream(stream, "cudaStreamDestroy");
  objects().streams.erase(stream);
  delete stream; // pending work completes through the events holding it
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  beforeWorkOn(stream, "cudaStreamSynchronize");
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  return testAll(getStream(stream, "cudaStreamQuery").pending)
             ? cudaSuccess
             : cudaErrorNotReady;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                unsigned int) {
  CUevent_st &e = getEvent(event, "cudaStreamWaitEvent");
  CUstream_st &s = getStream(stream, "cudaStreamWaitEvent");
  s.pending.insert(s.pending.end(), e.pending.begin(), e.pending.end());
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
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  getEvent(event, "cudaEventRecord").pending =
      getStream(stream, "cudaEventRecord").pending;
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  return testAll(getEvent(event, "cudaEventQuery").pending) ? cudaSuccess
                                                            : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  waitAll(getEvent(event, "cudaEventSynchronize").pending);
  return cudaSuccess;
}

cudaError_t cudaMalloc(void **ptr, size_t bytes) {
  *ptr = allocateDevice(bytes);
  return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaMallocAsync(void **ptr, size_t bytes, cudaStream_t stream) {
  beforeWorkOn(stream, "cudaMallocAsync");
  return cudaMalloc(ptr, bytes);
}

cudaError_t cudaFree(void *ptr) {
  if (ptr && !freeDevice(ptr))
    deviceError("cudaFree is given " + describePointer(ptr) +
                ", which cudaMalloc did not return");
  return cudaSuccess;
}

cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream) {
  beforeWorkOn(stream, "cudaFreeAsync");
  return cudaFree(ptr);
}

cudaError_t cudaMallocHost(void **ptr, size_t bytes) {
  *ptr = allocatePinned(bytes);
  return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned int) {
  return cudaMallocHost(ptr, bytes);
}

cudaError_t cudaFreeHost(void *ptr) {
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
  beforeWorkOn(stream, "cudaMemcpyAsync");
  checkCopy(dst, bytes, src, bytes, kind, "cudaMemcpyAsync");
  AccessScope scope;
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes,
                       cudaMemcpyKind kind) {
  return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src,
                              size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind kind, cudaStream_t stream) {
  beforeWorkOn(stream, "cudaMemcpy2DAsync");
  if (height == 0 || width == 0)
    return cudaSuccess;
  if (width > dpitch || width > spitch)
    return cudaErrorInvalidPitchValue;
  checkCopy(dst, (height - 1) * dpitch + width, src,
            (height - 1) * spitch + width, kind, "cudaMemcpy2DAsync");
  AccessScope scope;
  for (size_t row = 0; row < height; ++row)
    std::memmove(static_cast<char *>(dst) + row * dpitch,
                 static_cast<const char *>(src) + row * spitch, width);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes,
                            cudaStream_t stream) {
  beforeWorkOn(stream, "cudaMemsetAsync");
  requireDevice(ptr, bytes, "cudaMemsetAsync destination");
  AccessScope scope;
  std::memset(ptr, value, bytes);
  return cudaSuccess;
}

} // extern "C"
