//===- Runtime.cpp - Zest runtime core: start, stop, ranks, errors --------===//
//
// zest_init picks the backend (ZEST_BACKEND), the modeled links and the
// progress thread; the rest of the C API lives by concern in Requests.cpp
// (collectives), Pool.cpp (memory) and Trace.cpp.
//
//===----------------------------------------------------------------------===//

#include "RuntimeState.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace zest::rt;

Runtime *zest::rt::runtime = nullptr;

Runtime &zest::rt::get() {
  if (!runtime)
    fatal("the runtime is used before zest_init");
  return *runtime;
}

double zest::rt::nowUs() {
  auto start = runtime ? runtime->start : Clock::now();
  return std::chrono::duration<double, std::micro>(Clock::now() - start)
      .count();
}

double zest::rt::timeoutSeconds() {
  return runtime ? runtime->timeoutSeconds : 300;
}

[[noreturn]] void zest::rt::fatal(const std::string &message, int code) {
  // Before the backend exists (it failed to start) the rank is unknown.
  if (runtime && runtime->backend)
    std::fprintf(stderr, "zest: rank %d: error: %s\n", runtime->backend->rank(),
                 message.c_str());
  else
    std::fprintf(stderr, "zest: error: %s\n", message.c_str());
  std::fflush(stderr);
  if (runtime && runtime->backend)
    runtime->backend->abort(code);
  std::exit(code);
}

extern "C" {

int zest_init(int *argc, char ***argv) {
  if (runtime)
    return 0;
  runtime = new Runtime();
  if (const char *timeout = std::getenv("ZEST_TIMEOUT_S"))
    runtime->timeoutSeconds = std::atof(timeout);
  runtime->link = parseLink("ZEST_LINK");
  runtime->replicaLink = parseLink("ZEST_REPLICA_LINK");
  const char *progress = std::getenv("ZEST_PROGRESS");
  bool thread = progress && std::string(progress) == "thread";
  const char *kind = std::getenv("ZEST_BACKEND");
  if (kind && *kind && std::string(kind) != "cpu") {
    if (!createCudaBackend) {
      std::fprintf(stderr,
                   "error: ZEST_BACKEND=%s needs the CUDA runtime "
                   "library, which this executable was not linked "
                   "with; unset it for the CPU backend\n",
                   kind);
      std::exit(2);
    }
    runtime->backend = createCudaBackend(kind, argc, argv);
  } else {
    runtime->backend = createMpiBackend(argc, argv, thread);
  }
  if (thread && runtime->backend->supportsProgressThread()) {
    // Tests pending requests every 50 us while the main thread computes.
    runtime->progressThread = std::thread([] {
      while (!runtime->stopProgress.load()) {
        zest_progress();
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    });
  } else if (thread) {
    std::fprintf(stderr,
                 "zest: rank %d: warning: MPI lacks "
                 "MPI_THREAD_SERIALIZED; ZEST_PROGRESS=thread ignored\n",
                 runtime->backend->rank());
  }
  return 0;
}

void zest_finalize(void) {
  if (!runtime)
    return;
  if (runtime->progressThread.joinable()) {
    runtime->stopProgress = true;
    runtime->progressThread.join();
  }
  if (!runtime->requests.empty())
    fatal(std::to_string(runtime->requests.size()) +
          " collectives were started but never waited on");
  finishEntryGraphs();
  runtime->pool.releaseUnused(*runtime->backend);
  for (auto &[host, copy] : runtime->constants)
    runtime->backend->freePinned(copy.first);
  runtime->backend->finalize();
  delete runtime;
  runtime = nullptr;
}

void zest_step_end(void) { get().backend->endStep(); }

void zest_fatal(int code, const char *format, ...) {
  char buffer[2048];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  fatal(buffer, code ? code : 1);
}

namespace {
/// zest_set_data_context's samples.
struct DataContext {
  const char *source = nullptr;
  int64_t first = 0, count = 0;
} dataContext;
} // namespace

void zest_set_data_context(const char *source, int64_t first, int64_t count) {
  dataContext = {source, first, count};
}

void zest_check_failed(const char *message) {
  char where[1024] = "";
  if (dataContext.source)
    std::snprintf(
        where, sizeof(where), ", in samples %lld to %lld of %s",
        static_cast<long long>(dataContext.first),
        static_cast<long long>(dataContext.first + dataContext.count - 1),
        dataContext.source);
  zest_fatal(1,
             "the step's check failed: %s%s (an index input outside its "
             "table: a token id past the embedding, a class past the "
             "logits?)",
             message, where);
}

int zest_rank(void) { return get().backend->rank(); }
int zest_world_size(void) { return get().backend->worldSize(); }
void zest_set_timeout(double seconds) { get().timeoutSeconds = seconds; }

int64_t zest_dtype_size(zest_dtype_t dtype) {
  if (int64_t bytes = zest_dtype_bytes(dtype))
    return bytes;
  fatal("unknown dtype " + std::to_string(int(dtype)));
}

void zest_set_mesh(int replicas, int shards) {
  Runtime &rt = get();
  std::lock_guard<std::mutex> lock(rt.comm);
  if (!rt.requests.empty())
    fatal("zest_set_mesh while " + std::to_string(rt.requests.size()) +
          " collectives are in flight");
  rt.backend->setMesh(replicas, shards);
}

void zest_set_expert_groups(int size) {
  Runtime &rt = get();
  std::lock_guard<std::mutex> lock(rt.comm);
  if (!rt.requests.empty())
    fatal("zest_set_expert_groups while " + std::to_string(rt.requests.size()) +
          " collectives are in flight");
  rt.backend->setExpertGroups(size);
}

int zest_group_rank(zest_group_t group) {
  return get().backend->groupRank(group);
}

int zest_group_size(zest_group_t group) {
  return get().backend->groupSize(group);
}

int zest_buffers_on_device(void) { return get().backend->buffersOnDevice(); }

void *zest_buffer_alloc(int64_t bytes) {
  // 64-byte aligned like the pool's buffers; at least one byte.
  int64_t size = std::max<int64_t>(64, (bytes + 63) / 64 * 64);
  Runtime &rt = get();
  void *ptr = rt.backend->allocateMemory(size_t(size), 64);
  rt.buffers[ptr] = bytes;
  rt.pool.counters.buffer_bytes += bytes;
  return ptr;
}

void zest_buffer_free(void *ptr) {
  if (!ptr)
    return;
  Runtime &rt = get();
  if (auto it = rt.buffers.find(ptr); it != rt.buffers.end()) {
    rt.pool.counters.buffer_bytes -= it->second;
    rt.buffers.erase(it);
  }
  rt.backend->freeMemory(ptr);
}

void zest_copy_to_device(void *device, const void *host, int64_t bytes) {
  if (bytes > 0)
    get().backend->copyToDevice(device, host, size_t(bytes));
}

void zest_upload_constant(void *device, const void *host, int64_t bytes) {
  if (bytes <= 0)
    return;
  Runtime &rt = get();
  if (!rt.backend->buffersOnDevice()) {
    rt.backend->copyToDevice(device, host, size_t(bytes));
    return;
  }
  // A copy from pageable memory would wait for the device's queued work
  // (the staging buffer is reused), once per constant and step.
  auto [it, first] = rt.constants.try_emplace(host, nullptr, bytes);
  if (first) {
    it->second.first = rt.backend->allocatePinned(size_t(bytes));
    std::memcpy(it->second.first, host, size_t(bytes));
  } else if (it->second.second < bytes) {
    fatal("zest_upload_constant: the constant at " +
          std::to_string(reinterpret_cast<uintptr_t>(host)) + " grew from " +
          std::to_string(it->second.second) + " to " + std::to_string(bytes) +
          " bytes; a constant never changes");
  }
  rt.backend->copyToDeviceAsync(device, it->second.first, size_t(bytes));
}

void zest_copy_to_host(void *host, const void *device, int64_t bytes) {
  if (bytes > 0)
    get().backend->copyToHost(host, device, size_t(bytes));
}

void *zest_pinned_alloc(int64_t bytes) {
  Runtime &rt = get();
  void *ptr = rt.backend->allocatePinned(
      size_t(std::max<int64_t>(64, (bytes + 63) / 64 * 64)));
  rt.pinned[ptr] = bytes;
  rt.pool.counters.pinned_bytes += bytes;
  return ptr;
}

void zest_pinned_free(void *ptr) {
  Runtime &rt = get();
  auto it = rt.pinned.find(ptr);
  if (it == rt.pinned.end())
    return;
  rt.pool.counters.pinned_bytes -= it->second;
  rt.pinned.erase(it);
  rt.backend->freePinned(ptr);
}

void zest_copy_to_device_async(void *device, const void *host, int64_t bytes) {
  // A null host buffer is an argument the step never reads (an accumulator
  // without accumulation): nothing to copy.
  if (bytes > 0 && host)
    get().backend->copyToDeviceAsync(device, host, size_t(bytes));
}

void zest_copy_to_host_start(void *host, const void *device, int64_t bytes) {
  if (bytes > 0)
    get().backend->copyToHostStart(host, device, size_t(bytes));
}

void zest_copy_wait(const void *host) { get().backend->copyWait(host); }

double zest_now_us(void) { return nowUs(); }

} // extern "C"
