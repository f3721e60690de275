//===- KernelTimes.cpp - GPU time per kernel, product and collective ------===//

#include "KernelTimes.h"

#include "Device.h"
#include "KernelProfile.h"

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
  std::map<std::string, Total> totals;     // also interns the names
  std::map<std::string, cuda::Work> works; // noted by products
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

void cuda::noteWork(const std::string &name, const Work &work) {
  KernelTimes &t = times();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.works.try_emplace(name, work);
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
  std::vector<ProfileRow> rows;
  for (const auto &[name, total] : t.totals) {
    if (!total.launches)
      continue;
    auto work = t.works.find(name);
    cuda::ProfileRow row{name, total.ms, total.launches, std::nullopt};
    if (work != t.works.end())
      row.work = work->second;
    rows.push_back(row);
  }
  printKernelProfile(rank, std::move(rows), timed);
  for (cudaEvent_t event : t.spare)
    cudaEventDestroy(event);
  t.spare.clear();
}
