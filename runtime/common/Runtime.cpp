//===- Runtime.cpp - Zest runtime core: requests, pool, counters, trace ---===//

#include "Backend.h"
#include "zest_runtime.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

using namespace zest::rt;

namespace {

using Clock = std::chrono::steady_clock;

struct Request {
  std::unique_ptr<PendingOp> op;
  const char *kind;
  std::string tag;
  int64_t bytes;
  double startUs;
  /// With a modeled link: when the transfer would be complete (0: none),
  /// and when the link started on it.
  double modeledEndUs;
  double linkBeginUs;
};

struct TraceEvent {
  std::string name, category;
  double startUs, endUs;
  bool counter; // a pool counter sample: endUs holds the value
};

/// Size-bucketed free lists: allocations are rounded up to 64 bytes and a
/// freed buffer is handed to the next allocation of the same size, so the
/// steady state of a training loop allocates nothing from the system.
class Pool {
public:
  /// Takes new memory from `source` (the backend's kind of memory).
  void *allocate(int64_t bytes, Backend &source) {
    size_t size = roundUp(bytes);
    void *ptr = nullptr;
    auto &free = freeLists[size];
    if (!free.empty()) {
      ptr = free.back();
      free.pop_back();
    } else {
      ptr = source.allocateMemory(size, kAlignment);
      if (!ptr)
        fatal("out of memory allocating " + std::to_string(size) +
              " bytes (pool holds " + std::to_string(counters.pool_bytes) +
              " bytes)");
    }
    sizes[ptr] = {size, bytes};
    counters.pool_bytes += size;
    counters.pool_peak_bytes =
        std::max(counters.pool_peak_bytes, counters.pool_bytes);
    return ptr;
  }

  void release(void *ptr) {
    if (!ptr)
      return;
    auto it = sizes.find(ptr);
    if (it == sizes.end())
      fatal("zest_pool_free of a pointer the pool did not allocate");
    auto [size, requested] = it->second;
    sizes.erase(it);
    counters.pool_bytes -= size;
    if (gathered.erase(ptr))
      counters.gathered_bytes -= requested;
    freeLists[size].push_back(ptr);
  }

  void markGathered(void *ptr) {
    auto it = sizes.find(ptr);
    if (it == sizes.end() || !gathered.insert(ptr).second)
      return;
    // Gathered bytes count the buffers themselves, not the pool rounding.
    counters.gathered_bytes += it->second.second;
    counters.gathered_peak_bytes =
        std::max(counters.gathered_peak_bytes, counters.gathered_bytes);
  }

  zest_counters_t counters = {};

private:
  static constexpr size_t kAlignment = 64;
  static size_t roundUp(int64_t bytes) {
    size_t size = bytes > 0 ? static_cast<size_t>(bytes) : 1;
    return (size + kAlignment - 1) / kAlignment * kAlignment;
  }
  std::map<size_t, std::vector<void *>> freeLists;
  /// Bucket size and requested bytes of every live allocation.
  std::unordered_map<void *, std::pair<size_t, int64_t>> sizes;
  std::unordered_set<void *> gathered;
};

struct Runtime {
  std::unique_ptr<Backend> backend;
  Clock::time_point start = Clock::now();
  double timeoutSeconds = 300;
  std::unordered_map<zest_request_t, Request> requests;
  /// requests.size(), readable without the lock: zest_progress returns at
  /// once when nothing is in flight.
  std::atomic<size_t> inFlight{0};
  zest_request_t nextRequest = 1;
  Pool pool;
  bool tracing = false;
  std::vector<TraceEvent> trace;
  std::mutex mutex; // guards the pool: allocations may come from any thread
  // Every backend call and the request table are guarded by `comm`, so a
  // progress thread can test requests while the main thread computes (MPI
  // then only needs MPI_THREAD_SERIALIZED).
  std::mutex comm;
  std::thread progressThread;
  std::atomic<bool> stopProgress{false};
  /// A modeled link (bytes per microsecond, latency); transfers on it are
  /// serialized, each done no earlier than its modeled duration after it
  /// could start.
  struct ModeledLink {
    double bytesPerUs = 0, latencyUs = 0, busyUntilUs = 0;
  };
  /// ZEST_LINK: within a replica group, and everywhere without a replica
  /// link. ZEST_REPLICA_LINK: between replica groups (hybrid sharding's
  /// all-reduces across replicas, and collectives over all ranks when there
  /// are several groups), a separate link with its own queue.
  ModeledLink link, replicaLink;

  /// The link a collective over `group` crosses; null if not modeled.
  ModeledLink *getLink(zest_group_t group) {
    bool crossesGroups = zest_group_spans_replicas(
        group, backend->groupSize(ZEST_GROUP_REPLICA));
    ModeledLink *chosen =
        crossesGroups && replicaLink.bytesPerUs > 0 ? &replicaLink : &link;
    return chosen->bytesPerUs > 0 ? chosen : nullptr;
  }
};

Runtime *runtime = nullptr;

Runtime &get() {
  if (!runtime)
    fatal("the runtime is used before zest_init");
  return *runtime;
}

double nowUs() {
  auto start = runtime ? runtime->start : Clock::now();
  return std::chrono::duration<double, std::micro>(Clock::now() - start)
      .count();
}

std::string describe(const Request &request) {
  std::string text = request.kind;
  if (!request.tag.empty())
    text += " of '" + request.tag + "'";
  return text + " (" + std::to_string(request.bytes) + " bytes)";
}

/// Starts a backend operation under the communication lock and records it.
template <typename Start>
zest_request_t enqueue(Start start, const char *kind, const char *tag,
                       int64_t bytes, int64_t bytesSent, zest_group_t group) {
  Runtime &rt = get();
  std::lock_guard<std::mutex> lock(rt.comm);
  std::unique_ptr<PendingOp> op = start(*rt.backend);
  zest_request_t id = rt.nextRequest++;
  double now = nowUs();
  double modeledEndUs = 0, linkBeginUs = now;
  if (Runtime::ModeledLink *link = rt.getLink(group)) {
    linkBeginUs = std::max(now, link->busyUntilUs);
    modeledEndUs = linkBeginUs + link->latencyUs + bytesSent / link->bytesPerUs;
    link->busyUntilUs = modeledEndUs;
  }
  rt.requests[id] = {std::move(op), kind,         tag ? tag : "", bytes,
                     now,           modeledEndUs, linkBeginUs};
  rt.inFlight.store(rt.requests.size(), std::memory_order_relaxed);
  rt.pool.counters.bytes_sent += bytesSent;
  rt.pool.counters.collectives += 1;
  return id;
}

void traceCounters() {
  Runtime &rt = *runtime;
  if (!rt.tracing)
    return;
  double now = nowUs();
  rt.trace.push_back(
      {"pool bytes", "memory", now, double(rt.pool.counters.pool_bytes), true});
  rt.trace.push_back({"gathered bytes", "memory", now,
                      double(rt.pool.counters.gathered_bytes), true});
}

void jsonString(FILE *file, const std::string &text) {
  std::fputc('"', file);
  for (char c : text) {
    if (c == '"' || c == '\\')
      std::fputc('\\', file);
    if (static_cast<unsigned char>(c) >= 0x20)
      std::fputc(c, file);
  }
  std::fputc('"', file);
}

} // namespace

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

/// The modeled link the environment variable `name` describes
/// (<GB/s>,<latency us>); none if it is unset or empty.
static Runtime::ModeledLink parseLink(const char *name) {
  Runtime::ModeledLink link;
  const char *text = std::getenv(name);
  if (!text || !*text)
    return link;
  double gbPerS = 0, latencyUs = -1;
  char extra = 0;
  if (std::sscanf(text, "%lf,%lf%c", &gbPerS, &latencyUs, &extra) != 2 ||
      !(gbPerS > 0) || !(latencyUs >= 0))
    fatal(std::string(name) + "='" + text +
          "' is not <GB/s>,<latency us> (e.g. " + name + "=2,10)");
  link.bytesPerUs = gbPerS * 1e3;
  link.latencyUs = latencyUs;
  return link;
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
  runtime->backend->finalize();
  delete runtime;
  runtime = nullptr;
}

void zest_fatal(int code, const char *format, ...) {
  char buffer[2048];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  fatal(buffer, code ? code : 1);
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

int zest_group_rank(zest_group_t group) {
  return get().backend->groupRank(group);
}

int zest_group_size(zest_group_t group) {
  return get().backend->groupSize(group);
}

/// Bytes one rank sends in a ring collective over `ranks` ranks: a gather or
/// reduce-scatter moves `ranks - 1` shards of `bytes`, an all-reduce
/// 2 (ranks - 1) / ranks of its buffer.
static int64_t ringBytesSent(bool allReduce, int64_t bytes, int64_t ranks) {
  return allReduce ? 2 * bytes * (ranks - 1) / ranks : bytes * (ranks - 1);
}

zest_request_t zest_all_gather_start(const void *send, void *recv,
                                     int64_t count, zest_dtype_t dtype,
                                     zest_group_t group, const char *tag) {
  Runtime &rt = get();
  int64_t bytes = count * zest_dtype_size(dtype);
  int ranks = rt.backend->groupSize(group);
  return enqueue(
      [&](Backend &b) { return b.allGather(send, recv, count, dtype, group); },
      "all_gather", tag, bytes * ranks, ringBytesSent(false, bytes, ranks),
      group);
}

zest_request_t zest_reduce_scatter_start(const void *send, void *recv,
                                         int64_t count, zest_dtype_t dtype,
                                         zest_reduction_t op,
                                         zest_group_t group, const char *tag) {
  Runtime &rt = get();
  int64_t bytes = count * zest_dtype_size(dtype);
  int ranks = rt.backend->groupSize(group);
  return enqueue(
      [&](Backend &b) {
        return b.reduceScatter(send, recv, count, dtype, op, group);
      },
      "reduce_scatter", tag, bytes * ranks, ringBytesSent(false, bytes, ranks),
      group);
}

zest_request_t zest_all_reduce_start(const void *send, void *recv,
                                     int64_t count, zest_dtype_t dtype,
                                     zest_reduction_t op, zest_group_t group,
                                     const char *tag) {
  Runtime &rt = get();
  int64_t bytes = count * zest_dtype_size(dtype);
  int ranks = rt.backend->groupSize(group);
  return enqueue(
      [&](Backend &b) {
        return b.allReduce(send, recv, count, dtype, op, group);
      },
      "all_reduce", tag, bytes, ringBytesSent(true, bytes, ranks), group);
}

void zest_wait(zest_request_t id) {
  Runtime &rt = get();
  double enteredUs = nowUs();
  std::unique_lock<std::mutex> lock(rt.comm);
  auto it = rt.requests.find(id);
  if (it == rt.requests.end())
    fatal("zest_wait on unknown or already completed request " +
          std::to_string(id));
  Request &request = it->second;
  auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(rt.timeoutSeconds));
  unsigned spins = 0;
  while (!request.op->test()) {
    if (++spins < 1000)
      continue;
    if (Clock::now() > deadline)
      fatal(describe(request) + " did not complete within " +
            std::to_string(int(rt.timeoutSeconds)) +
            " s (ZEST_TIMEOUT_S); another rank may have died or issued "
            "different collectives");
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    lock.lock();
  }
  double transferredUs = nowUs();
  // A modeled transfer still in flight: sleep (no CPU) until it is done.
  double remainingUs = request.modeledEndUs - transferredUs;
  if (remainingUs > 0) {
    lock.unlock();
    std::this_thread::sleep_for(
        std::chrono::duration<double, std::micro>(remainingUs));
    lock.lock();
  }
  double endUs = nowUs();
  rt.pool.counters.wait_us += static_cast<int64_t>(endUs - enteredUs);
  if (rt.tracing) {
    // The communication track shows the transfer (on the modeled link: from
    // when the link took it to when it was done); the compute track shows
    // the time this rank was blocked waiting for it.
    rt.trace.push_back({describe(request), "comm", request.linkBeginUs,
                        std::max(transferredUs, request.modeledEndUs), false});
    if (endUs - enteredUs >= 1)
      rt.trace.push_back(
          {"wait for " + describe(request), "wait", enteredUs, endUs, false});
  }
  rt.requests.erase(it);
  rt.inFlight.store(rt.requests.size(), std::memory_order_relaxed);
}

void zest_progress(void) {
  if (!runtime || runtime->inFlight.load(std::memory_order_relaxed) == 0)
    return;
  Runtime &rt = *runtime;
  std::lock_guard<std::mutex> lock(rt.comm);
  for (auto &[id, request] : rt.requests)
    request.op->test();
}

void zest_broadcast(void *buffer, int64_t count, zest_dtype_t dtype, int root) {
  Runtime &rt = get();
  int64_t bytes = count * zest_dtype_size(dtype);
  zest_wait(enqueue(
      [&](Backend &b) { return b.broadcast(buffer, count, dtype, root); },
      "broadcast", nullptr, bytes, rt.backend->rank() == root ? bytes : 0,
      ZEST_GROUP_WORLD));
}

void zest_barrier(void) {
  zest_wait(enqueue([](Backend &b) { return b.barrier(); }, "barrier", nullptr,
                    0, 0, ZEST_GROUP_WORLD));
}

void *zest_pool_alloc(int64_t bytes) {
  Runtime &rt = get();
  std::lock_guard<std::mutex> lock(rt.mutex);
  void *ptr = rt.pool.allocate(bytes, *rt.backend);
  traceCounters();
  return ptr;
}

int zest_buffers_on_device(void) { return get().backend->buffersOnDevice(); }

void *zest_buffer_alloc(int64_t bytes) {
  // 64-byte aligned like the pool's buffers; at least one byte.
  return get().backend->allocateMemory(
      size_t(std::max<int64_t>(64, (bytes + 63) / 64 * 64)), 64);
}

void zest_copy_to_device(void *device, const void *host, int64_t bytes) {
  if (bytes > 0)
    get().backend->copyToDevice(device, host, size_t(bytes));
}

void zest_copy_to_host(void *host, const void *device, int64_t bytes) {
  if (bytes > 0)
    get().backend->copyToHost(host, device, size_t(bytes));
}

void zest_pool_free(void *ptr) {
  Runtime &rt = get();
  std::lock_guard<std::mutex> lock(rt.mutex);
  rt.pool.release(ptr);
  traceCounters();
}

void zest_pool_mark_gathered(void *ptr) {
  Runtime &rt = get();
  std::lock_guard<std::mutex> lock(rt.mutex);
  rt.pool.markGathered(ptr);
  traceCounters();
}

void zest_get_counters(zest_counters_t *counters) {
  *counters = get().pool.counters;
}

void zest_reset_counters(void) {
  zest_counters_t &c = get().pool.counters;
  c.pool_peak_bytes = c.pool_bytes;
  c.gathered_peak_bytes = c.gathered_bytes;
  c.bytes_sent = 0;
  c.collectives = 0;
  c.wait_us = 0;
}

double zest_now_us(void) { return nowUs(); }

void zest_trace_enable(int enabled) { get().tracing = enabled != 0; }

void zest_trace_span(const char *name, const char *category, double startUs,
                     double endUs) {
  Runtime &rt = get();
  if (rt.tracing)
    rt.trace.push_back({name, category, startUs, endUs, false});
}

int zest_trace_write(const char *path) {
  Runtime &rt = get();
  FILE *file = std::fopen(path, "w");
  if (!file)
    return 1;
  int rank = rt.backend->rank();
  std::fprintf(file, "{\"traceEvents\":[\n");
  std::fprintf(file,
               "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,"
               "\"args\":{\"name\":\"rank %d\"}}",
               rank, rank);
  for (const TraceEvent &event : rt.trace) {
    std::fprintf(file, ",\n{\"name\":");
    jsonString(file, event.name);
    std::fprintf(file, ",\"cat\":");
    jsonString(file, event.category);
    if (event.counter)
      std::fprintf(file,
                   ",\"ph\":\"C\",\"ts\":%.3f,\"pid\":%d,\"args\":{\"bytes\":"
                   "%.0f}}",
                   event.startUs, rank, event.endUs);
    else
      std::fprintf(file,
                   ",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,"
                   "\"tid\":%d}",
                   event.startUs, event.endUs - event.startUs, rank,
                   event.category == "comm" ? 1 : 0);
  }
  std::fprintf(file, "\n],\"displayTimeUnit\":\"ms\"}\n");
  return std::fclose(file) == 0 ? 0 : 1;
}

//===----------------------------------------------------------------------===//
// Allocation entry points of compiled code: finalize-memref-to-llvm with
// use-generic-functions calls these instead of malloc/free, so every buffer
// of a compiled step lives in the pool.
//===----------------------------------------------------------------------===//

void *_mlir_memref_to_llvm_alloc(size_t size) {
  return zest_pool_alloc(static_cast<int64_t>(size));
}

void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t size) {
  if (alignment > 64)
    fatal("alignment " + std::to_string(alignment) + " is not supported");
  return zest_pool_alloc(static_cast<int64_t>(size));
}

void _mlir_memref_to_llvm_free(void *ptr) { zest_pool_free(ptr); }

} // extern "C"
