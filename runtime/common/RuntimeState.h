//===- RuntimeState.h - The runtime core's state, shared by its parts -*- C++
//-*-//
//
// One Runtime per process, created by zest_init: the backend, the request
// table and modeled links (Requests.cpp), the pool (Pool.cpp) and the trace
// (Trace.cpp). Internal to runtime/common.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_COMMON_RUNTIMESTATE_H
#define ZEST_RUNTIME_COMMON_RUNTIMESTATE_H

#include "Backend.h"
#include "Pool.h"
#include "zest_runtime.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace zest::rt {

using Clock = std::chrono::steady_clock;

/// A collective in flight.
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
  /// Its place among the collectives this rank started (1-based).
  int64_t sequence;
};

/// A transfer on a modeled link: how long it queued behind earlier
/// transfers, and how long the link itself took. A span's own duration also
/// holds real delays (a peer descheduled); these do not.
struct LinkTimes {
  double queuedUs, linkUs;
};

/// A span or a counter sample of the trace.
struct TraceEvent {
  std::string name, category;
  double startUs, endUs;
  bool counter; // a pool counter sample: endUs holds the value
  std::optional<LinkTimes> link = std::nullopt; // a modeled transfer's
};

/// A modeled link (bytes per microsecond, latency); transfers on it are
/// serialized, each done no earlier than its modeled duration after it
/// could start.
struct ModeledLink {
  double bytesPerUs = 0, latencyUs = 0, busyUntilUs = 0;
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
  /// Collectives this rank has started, never reset (the arrival board).
  int64_t started = 0;
  Pool pool;
  /// Sizes of zest_buffer_alloc's and zest_pinned_alloc's buffers, live
  /// now (counted in pool.counters).
  std::unordered_map<void *, int64_t> buffers, pinned;
  /// zest_upload_constant's page-locked copies of the program's constants,
  /// by their host address, and their sizes (freed by zest_finalize).
  std::unordered_map<const void *, std::pair<void *, int64_t>> constants;
  bool tracing = false;
  std::vector<TraceEvent> trace;
  std::mutex mutex; // guards the pool: allocations may come from any thread
  // Every backend call and the request table are guarded by `comm`, so a
  // progress thread can test requests while the main thread computes (MPI
  // then only needs MPI_THREAD_SERIALIZED).
  std::mutex comm;
  std::thread progressThread;
  std::atomic<bool> stopProgress{false};
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

/// The runtime zest_init made; null before it and after zest_finalize.
extern Runtime *runtime;

/// The runtime; a fatal error before zest_init.
Runtime &get();

/// Microseconds since zest_init.
double nowUs();

/// The modeled link the environment variable `name` describes
/// (<GB/s>,<latency us>); none if it is unset or empty.
ModeledLink parseLink(const char *name);

/// Records the pool's counters in the trace, when tracing.
void traceCounters();

/// Destroys the entry points' captured graphs, after rank 0 says how often
/// each was replayed (zest_finalize, before the backend finalizes).
void finishEntryGraphs();

/// Starts the backend's exchange() as a request (counted, traced, timed out
/// like a collective) on the backend's memory, or on host memory through
/// its host backend; `kind` names it in traces and errors.
zest_request_t startExchange(const std::vector<Backend::Transfer> &sends,
                             const std::vector<Backend::Transfer> &recvs,
                             zest_group_t group, const char *kind, bool onHost);

} // namespace zest::rt

#endif // ZEST_RUNTIME_COMMON_RUNTIMESTATE_H
