//===- Trace.cpp - The Chrome trace of a rank
//------------------------------===//
//
// Spans (compute, collectives, waits) and pool counter samples, written as
// Chrome trace JSON by zest_trace_write.
//
//===----------------------------------------------------------------------===//

#include "RuntimeState.h"

#include <cstdio>

using namespace zest::rt;

void zest::rt::traceCounters() {
  Runtime &rt = *runtime;
  if (!rt.tracing)
    return;
  double now = nowUs();
  rt.trace.push_back(
      {"pool bytes", "memory", now, double(rt.pool.counters.pool_bytes), true});
  rt.trace.push_back({"gathered bytes", "memory", now,
                      double(rt.pool.counters.gathered_bytes), true});
}

static void jsonString(FILE *file, const std::string &text) {
  std::fputc('"', file);
  for (char c : text) {
    if (c == '"' || c == '\\')
      std::fputc('\\', file);
    if (static_cast<unsigned char>(c) >= 0x20)
      std::fputc(c, file);
  }
  std::fputc('"', file);
}

extern "C" {

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
    if (event.counter) {
      std::fprintf(file,
                   ",\"ph\":\"C\",\"ts\":%.3f,\"pid\":%d,\"args\":{\"bytes\":"
                   "%.0f}}",
                   event.startUs, rank, event.endUs);
      continue;
    }
    std::fprintf(file,
                 ",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d",
                 event.startUs, event.endUs - event.startUs, rank,
                 event.category == "comm" ? 1 : 0);
    if (event.link)
      std::fprintf(file, ",\"args\":{\"queued_us\":%.3f,\"link_us\":%.3f}",
                   event.link->queuedUs, event.link->linkUs);
    std::fprintf(file, "}");
  }
  std::fprintf(file, "\n],\"displayTimeUnit\":\"ms\"}\n");
  return std::fclose(file) == 0 ? 0 : 1;
}

} // extern "C"
