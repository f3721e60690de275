//===- Requests.cpp - Collectives in flight and the modeled link ----------===//
//
// Every collective is started on the backend under the communication lock
// and recorded with its bytes; zest_wait tests it until done (or the
// timeout), and, with a modeled link (ZEST_LINK, ZEST_REPLICA_LINK), until
// its modeled transfer would be complete.
//
//===----------------------------------------------------------------------===//

#include "RuntimeState.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

using namespace zest::rt;

namespace {

std::string describe(const Request &request) {
  std::string text = request.kind;
  if (!request.tag.empty())
    text += " of '" + request.tag + "'";
  return text + " (" + std::to_string(request.bytes) + " bytes)";
}

/// Who keeps `request` waiting: the ranks that have not started it yet, if
/// the backend can tell.
std::string describeStragglers(const Request &request) {
  std::optional<std::vector<int>> behind =
      get().backend->host().ranksBehind(request.sequence);
  if (!behind)
    return "another rank may have died or issued different collectives";
  if (behind->empty())
    return "every rank has started it (collective #" +
           std::to_string(request.sequence) +
           "): the ranks may have issued different collectives";
  std::string ranks;
  for (int rank : *behind)
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(rank);
  return "rank" + std::string(behind->size() > 1 ? "s " : " ") + ranks + " ha" +
         (behind->size() > 1 ? "ve" : "s") + " not started it (collective #" +
         std::to_string(request.sequence) + " of this rank): stalled or dead";
}

/// Starts a backend operation under the communication lock and records it.
template <typename Start>
zest_request_t enqueue(Start start, const char *kind, const char *tag,
                       int64_t bytes, int64_t bytesSent, zest_group_t group,
                       bool exchange = false) {
  Runtime &rt = get();
  std::lock_guard<std::mutex> lock(rt.comm);
  std::unique_ptr<PendingOp> op = start(*rt.backend);
  zest_request_t id = rt.nextRequest++;
  double now = nowUs();
  double modeledEndUs = 0, linkBeginUs = now;
  if (ModeledLink *link = rt.getLink(group)) {
    linkBeginUs = std::max(now, link->busyUntilUs);
    modeledEndUs = linkBeginUs + link->latencyUs + bytesSent / link->bytesPerUs;
    link->busyUntilUs = modeledEndUs;
  }
  rt.backend->host().arrive(++rt.started);
  rt.requests[id] = {std::move(op), kind,         tag ? tag : "", bytes,
                     now,           modeledEndUs, linkBeginUs,    rt.started};
  rt.inFlight.store(rt.requests.size(), std::memory_order_relaxed);
  (exchange ? rt.pool.counters.exchange_bytes : rt.pool.counters.bytes_sent) +=
      bytesSent;
  rt.pool.counters.collectives += 1;
  return id;
}

} // namespace

ModeledLink zest::rt::parseLink(const char *name) {
  ModeledLink link;
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

zest_request_t
zest::rt::startExchange(const std::vector<Backend::Transfer> &sends,
                        const std::vector<Backend::Transfer> &recvs,
                        zest_group_t group, const char *kind, bool onHost) {
  int64_t bytesSent = 0, bytes = 0;
  for (const Backend::Transfer &send : sends)
    bytesSent += send.bytes;
  for (const Backend::Transfer &recv : recvs)
    bytes += recv.bytes;
  return enqueue(
      [&](Backend &b) {
        return (onHost ? b.host() : b).exchange(sends, recvs, group);
      },
      kind, nullptr, bytes + bytesSent, bytesSent, group, /*exchange=*/true);
}

extern "C" {

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
            std::to_string(int(rt.timeoutSeconds)) + " s (ZEST_TIMEOUT_S); " +
            describeStragglers(request));
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
    TraceEvent transfer{describe(request), "comm", request.linkBeginUs,
                        std::max(transferredUs, request.modeledEndUs), false};
    if (request.modeledEndUs > 0)
      transfer.link = LinkTimes{request.linkBeginUs - request.startUs,
                                request.modeledEndUs - request.linkBeginUs};
    rt.trace.push_back(std::move(transfer));
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

void zest_host_all_reduce(const void *send, void *recv, int64_t count,
                          zest_dtype_t dtype, zest_reduction_t op) {
  int64_t bytes = count * zest_dtype_size(dtype);
  int ranks = get().backend->worldSize();
  zest_wait(enqueue(
      [&](Backend &b) {
        return b.host().allReduce(send, recv, count, dtype, op,
                                  ZEST_GROUP_WORLD);
      },
      "host_all_reduce", nullptr, bytes, ringBytesSent(true, bytes, ranks),
      ZEST_GROUP_WORLD));
}

void zest_host_all_gather(const void *send, void *recv, int64_t count,
                          zest_dtype_t dtype) {
  int64_t bytes = count * zest_dtype_size(dtype);
  int ranks = get().backend->worldSize();
  zest_wait(enqueue(
      [&](Backend &b) {
        return b.host().allGather(send, recv, count, dtype, ZEST_GROUP_WORLD);
      },
      "host_all_gather", nullptr, bytes * ranks,
      ringBytesSent(false, bytes, ranks), ZEST_GROUP_WORLD));
}

void zest_barrier(void) {
  zest_wait(enqueue([](Backend &b) { return b.barrier(); }, "barrier", nullptr,
                    0, 0, ZEST_GROUP_WORLD));
}

} // extern "C"
