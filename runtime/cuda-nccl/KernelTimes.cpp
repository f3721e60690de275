//===- KernelTimes.cpp - GPU time per kernel, product and collective ------===//

#include "KernelTimes.h"

#include "Device.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

using namespace zest::rt;

namespace {

/// One timed piece of work: its name and the events around it.
struct Record {
  const std::string *name;
  cudaEvent_t start, stop;
};

/// A name's sum over the timed steps.
struct Total {
  double ms = 0;
  long launches = 0;
};

struct KernelTimes {
  std::mutex mutex;
  std::map<std::string, Total> totals; // also interns the names
  std::vector<Record> records;
  std::vector<cudaEvent_t> spare;
  long steps = 0; // ended, the first included

  cudaEvent_t takeEvent() {
    if (!spare.empty()) {
      cudaEvent_t event = spare.back();
      spare.pop_back();
      return event;
    }
    cudaEvent_t event;
    cuda::checkCuda(cudaEventCreate(&event), "ZEST_KERNEL_TIMES: an event");
    return event;
  }

  /// Waits for the records' work, sums them (after the first step) and
  /// keeps their events for reuse.
  void collect() {
    for (const Record &record : records) {
      cuda::checkCuda(cudaEventSynchronize(record.stop),
                      "ZEST_KERNEL_TIMES: waiting for " + *record.name);
      if (steps > 1) {
        float ms = 0;
        cuda::checkCuda(cudaEventElapsedTime(&ms, record.start, record.stop),
                        "ZEST_KERNEL_TIMES: timing " + *record.name);
        Total &total = totals[*record.name];
        total.ms += ms;
        ++total.launches;
      }
      spare.push_back(record.start);
      spare.push_back(record.stop);
    }
    records.clear();
  }
};

KernelTimes &times() {
  static KernelTimes instance;
  return instance;
}

} // namespace

bool cuda::kernelTimesEnabled() {
  static const bool enabled = [] {
    const char *value = std::getenv("ZEST_KERNEL_TIMES");
    return value && *value && std::strcmp(value, "0") != 0;
  }();
  return enabled;
}

cuda::TimedScope::TimedScope(const char *name, cudaStream_t stream)
    : stream(stream) {
  if (kernelTimesEnabled())
    start(name);
}

void cuda::TimedScope::start(const std::string &name) {
  KernelTimes &t = times();
  std::lock_guard<std::mutex> lock(t.mutex);
  const std::string *interned = &t.totals.try_emplace(name).first->first;
  Record entry{interned, t.takeEvent(), t.takeEvent()};
  checkCuda(cudaEventRecord(entry.start, stream), "ZEST_KERNEL_TIMES");
  record = int(t.records.size());
  t.records.push_back(entry);
}

cuda::TimedScope::~TimedScope() {
  if (record < 0)
    return;
  KernelTimes &t = times();
  std::lock_guard<std::mutex> lock(t.mutex);
  checkCuda(cudaEventRecord(t.records[record].stop, stream),
            "ZEST_KERNEL_TIMES");
}

void cuda::endKernelTimesStep() {
  if (!kernelTimesEnabled())
    return;
  KernelTimes &t = times();
  std::lock_guard<std::mutex> lock(t.mutex);
  ++t.steps;
  t.collect();
}

void cuda::reportKernelTimes(int rank) {
  if (!kernelTimesEnabled())
    return;
  KernelTimes &t = times();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.collect();
  long timed = t.steps - 1;
  if (timed < 1 || rank != 0)
    return;
  std::vector<std::pair<std::string, Total>> rows;
  double all = 0;
  long launches = 0;
  for (const auto &[name, total] : t.totals)
    if (total.launches) {
      rows.push_back({name, total});
      all += total.ms;
      launches += total.launches;
    }
  std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
    return a.second.ms > b.second.ms;
  });
  std::fprintf(stderr,
               "zest: rank %d: kernel times over %ld steps after the first "
               "(ZEST_KERNEL_TIMES): %.3f ms of GPU work per step in %.0f "
               "launches (their sum: the streams overlap)\n",
               rank, timed, all / timed, double(launches) / timed);
  std::fprintf(stderr, "zest: rank %d: %10s %10s %6s  %s\n", rank, "ms/step",
               "launches", "share", "name");
  // The largest, then the rest in one line.
  constexpr size_t kShown = 40;
  Total rest;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto &[name, total] = rows[i];
    if (i < kShown) {
      std::fprintf(stderr, "zest: rank %d: %10.3f %10.1f %5.1f%%  %s\n", rank,
                   total.ms / timed, double(total.launches) / timed,
                   100 * total.ms / all, name.c_str());
      continue;
    }
    rest.ms += total.ms;
    rest.launches += total.launches;
  }
  if (rows.size() > kShown)
    std::fprintf(stderr, "zest: rank %d: %10.3f %10.1f %5.1f%%  (%zu more)\n",
                 rank, rest.ms / timed, double(rest.launches) / timed,
                 100 * rest.ms / all, rows.size() - kShown);
  for (cudaEvent_t event : t.spare)
    cudaEventDestroy(event);
  t.spare.clear();
}
