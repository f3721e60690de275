//===- EntryGraphs.cpp - Entry points captured and replayed as graphs -----===//
//
// zest_call_entry: a compiled entry point's host code enqueues thousands of
// kernels, products and collectives per call; on a GPU the step then costs
// what the host takes to enqueue them. The pool's fixed placement gives the
// work the same addresses at every call, and the driver refills arguments
// in place, so the work of one call can be captured once (a CUDA graph) and
// launched at the next ones with one call.
//
// The first call runs as is: it loads kernels, plans products and fills
// the pool and its free lists, so the second one, captured, allocates
// nothing. A call that waited on the host for the device cannot be replayed
// (the wait would not happen), so such an entry is never captured. The
// host's own effects of a captured call (counters of collectives and bytes,
// collectives started) are added at every launch. A pool that grows its
// arena (a later entry's first call) moves the memory a graph addresses:
// the graph is captured again.
//
//===----------------------------------------------------------------------===//

#include "RuntimeState.h"

#include <cstdio>
#include <map>
#include <string>

using namespace zest::rt;

namespace {

/// The host's own effects of one call, which a replay repeats: the
/// collectives and bytes counted, the collectives started (the hang
/// diagnosis). The pool's levels and peaks a replay leaves as they are.
struct Traffic {
  int64_t bytesSent = 0, collectives = 0, exchangeBytes = 0, started = 0;

  /// What the runtime has counted so far.
  static Traffic now(const Runtime &rt) {
    return {rt.pool.counters.bytes_sent, rt.pool.counters.collectives,
            rt.pool.counters.exchange_bytes, rt.started};
  }
  Traffic operator-(const Traffic &before) const {
    return {bytesSent - before.bytesSent, collectives - before.collectives,
            exchangeBytes - before.exchangeBytes, started - before.started};
  }
  void addTo(Runtime &rt) const {
    rt.pool.counters.bytes_sent += bytesSent;
    rt.pool.counters.collectives += collectives;
    rt.pool.counters.exchange_bytes += exchangeBytes;
    rt.started += started;
    rt.backend->host().arrive(rt.started);
  }
};

struct EntryGraph {
  std::string name;
  int64_t calls = 0, launches = 0, captures = 0;
  /// Why the entry runs without a graph, once known.
  std::optional<std::string> uncaptured;
  std::unique_ptr<Backend::CapturedWork> work;
  /// The arena the captured work addresses.
  const void *arena = nullptr;
  /// What one call adds on the host.
  Traffic added;
};

struct EntryGraphs {
  bool enabled = false;
  std::map<int64_t, EntryGraph> entries;
};

EntryGraphs &graphs() {
  static auto *state = new EntryGraphs;
  return *state;
}

/// Rank 0 says something about graphs, on stderr.
void note(const std::string &text) {
  if (get().backend->rank() == 0)
    std::fprintf(stderr, "zest: rank 0: CUDA graphs: %s\n", text.c_str());
}

void launch(EntryGraph &entry) {
  entry.work->launch();
  ++entry.launches;
  entry.added.addTo(get());
}

/// Runs the entry's first call as is, noting whether the host waited for
/// the device.
void runUncaptured(EntryGraph &entry, zest_entry_fn_t fn, void **args) {
  Backend &backend = *get().backend;
  backend.takeHostWait();
  fn(args);
  if (std::optional<std::string> wait = backend.takeHostWait()) {
    entry.uncaptured = "the host waits for the device in it (" + *wait + ")";
    note("'" + entry.name + "' runs without a graph: " + *entry.uncaptured);
  }
}

void capture(EntryGraph &entry, zest_entry_fn_t fn, void **args) {
  Runtime &rt = get();
  Traffic before = Traffic::now(rt);
  rt.backend->takeHostWait();
  rt.backend->beginCapture();
  fn(args);
  entry.work = rt.backend->endCapture();
  if (std::optional<std::string> wait = rt.backend->takeHostWait())
    fatal("entry point '" + entry.name +
          "' waited on the host for the "
          "device (" +
          *wait +
          ") while it was captured as a CUDA graph, "
          "though its first call did not: recompile with --cuda-graphs=false");
  entry.arena = rt.pool.arenaBase();
  entry.added = Traffic::now(rt) - before;
  ++entry.captures;
  // The captured call's host effects happened; its device work runs now.
  entry.work->launch();
}

} // namespace

void zest::rt::finishEntryGraphs() {
  EntryGraphs &state = graphs();
  for (auto &[key, entry] : state.entries) {
    if (entry.calls > 1 && !entry.uncaptured)
      note("'" + entry.name + "': " + std::to_string(entry.calls) +
           " calls: 1 run as is, " + std::to_string(entry.captures) +
           " captured, " + std::to_string(entry.launches) + " replayed");
    entry.work.reset(); // before the backend's context goes
  }
  state.entries.clear();
}

extern "C" {

void zest_set_cuda_graphs(int enabled) {
  EntryGraphs &state = graphs();
  state.enabled = enabled != 0;
  if (!state.enabled)
    return;
  if (std::optional<std::string> why = get().backend->whyNoCapture()) {
    state.enabled = false;
    note("off: " + *why);
  }
}

void zest_call_entry(int64_t key, const char *name, zest_entry_fn_t fn,
                     void **args) {
  EntryGraphs &state = graphs();
  if (!state.enabled) {
    fn(args);
    return;
  }
  auto [it, first] = state.entries.try_emplace(key);
  EntryGraph &entry = it->second;
  if (first)
    entry.name = name;
  if (entry.work && entry.arena != get().pool.arenaBase())
    entry.work.reset(); // the pool moved: capture again
  if (entry.uncaptured)
    fn(args);
  else if (entry.calls++ == 0)
    runUncaptured(entry, fn, args);
  else if (!entry.work)
    capture(entry, fn, args);
  else
    launch(entry);
}

} // extern "C"
