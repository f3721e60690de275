//===- KernelProfile.cpp - ZEST_KERNEL_TIMES' table -----------------------===//

#include "KernelProfile.h"

#include "zest_runtime_emulated.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

using namespace zest::rt;
using namespace zest::rt::cuda;

extern "C" {
/// zestc's table (Compiler.cpp, getKernelProfileTable): absent from
/// programs that are not compiled models.
[[gnu::weak]] extern const char zest_model_kernel_profile[];
/// Defined by the emulated device only.
[[gnu::weak]] int zest_emulated_device(void);
}

namespace {

/// The cost model's machine (rates per microsecond).
struct Machine {
  std::string name;
  double vector = 0, gemm = 0, halfGemm = 0, memory = 0, overheadUs = 0;
  double peakMemory = 0, peakVector = 0, peakGemm = 0, peakHalfGemm = 0;
};

/// A compiled kernel's work and the cost model's prediction, per launch.
struct KernelEntry {
  Work work;
  double predictedUs = 0;
};

struct Table {
  std::optional<Machine> machine;
  std::map<std::string, KernelEntry> kernels;
};

Table readTable() {
  Table table;
  if (!zest_model_kernel_profile)
    return table;
  std::istringstream lines(zest_model_kernel_profile);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream in(line);
    std::string record;
    in >> record;
    if (record == "machine") {
      Machine m;
      in >> m.name >> m.vector >> m.gemm >> m.halfGemm >> m.memory >>
          m.overheadUs >> m.peakMemory >> m.peakVector >> m.peakGemm >>
          m.peakHalfGemm;
      table.machine = m;
    } else if (record == "kernel") {
      std::string name;
      double read = 0, written = 0;
      KernelEntry entry;
      in >> name >> read >> written >> entry.work.flops >> entry.predictedUs;
      entry.work.bytes = read + written;
      table.kernels[name] = entry;
    }
  }
  return table;
}

/// The outlined kernel a launch's name stands for: "zest_kernel_3_map_f32"
/// for "zest_kernel_3_map_f32_kernel (3 blocks x 256 threads)".
std::string getKernelKey(const std::string &name) {
  std::string key = name.substr(0, name.find(" ("));
  const std::string suffix = "_kernel"; // gpu-kernel-outlining's
  if (key.size() > suffix.size() &&
      key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0)
    key.resize(key.size() - suffix.size());
  return key;
}

/// A row with what its work gives: the prediction and the peak's bound,
/// per run, in microseconds.
struct Judged {
  ProfileRow row;
  std::optional<double> predictedUs, boundUs;
};

/// The prediction of a product, as the cost model's getKernelCallUs makes
/// it: the launch, then the operations at the tensor cores' rate.
double predictProductUs(const Work &work, const Machine &m) {
  double rate = work.halfPrecision && m.halfGemm > 0 ? m.halfGemm : m.gemm;
  return m.overheadUs + work.flops / rate;
}

/// The least time the hardware needs for `work`: its bytes at the memory's
/// peak or its operations at the units' peak.
double getBoundUs(const Work &work, const Machine &m) {
  auto peak = [](double peakRate, double rate) {
    return peakRate > 0 ? peakRate : rate;
  };
  double rate = !work.tensorCores
                    ? peak(m.peakVector, m.vector)
                    : (work.halfPrecision ? peak(m.peakHalfGemm, m.halfGemm)
                                          : peak(m.peakGemm, m.gemm));
  return std::max(work.bytes / peak(m.peakMemory, m.memory), work.flops / rate);
}

Judged judge(ProfileRow row, const Table &table) {
  Judged judged{std::move(row), std::nullopt, std::nullopt};
  if (!table.machine)
    return judged;
  auto kernel = table.kernels.find(getKernelKey(judged.row.name));
  if (kernel != table.kernels.end()) {
    judged.row.work = kernel->second.work;
    judged.predictedUs = kernel->second.predictedUs;
  } else if (judged.row.work && judged.row.work->tensorCores) {
    judged.predictedUs = predictProductUs(*judged.row.work, *table.machine);
  }
  if (judged.row.work)
    judged.boundUs = getBoundUs(*judged.row.work, *table.machine);
  return judged;
}

/// "12.345" or "-" (unknown).
std::string format(std::optional<double> value, const char *spec) {
  if (!value)
    return "-";
  char text[32];
  std::snprintf(text, sizeof(text), spec, *value);
  return text;
}

/// The columns of one row; `lost`: its time lost per step, if measured.
void printRow(int rank, const Judged &j, double perStep, double allMs,
              bool measured, std::optional<double> lost) {
  double runs = j.row.launches * perStep;
  auto known = [](bool ok, double value) {
    return ok ? std::optional<double>(value) : std::nullopt;
  };
  const std::optional<Work> &work = j.row.work;
  std::optional<double> predictedMs =
      known(j.predictedUs.has_value(), j.predictedUs.value_or(0) * runs / 1e3);
  std::optional<double> ofPeak =
      known(measured && j.boundUs && j.row.ms > 0,
            100 * j.boundUs.value_or(0) * j.row.launches / (1e3 * j.row.ms));
  std::fprintf(
      stderr, "zest: rank %d: %10s %9.1f %6s %10s %10s %10s %7s %10s  %s\n",
      rank, format(known(measured, j.row.ms * perStep), "%.3f").c_str(), runs,
      format(known(measured, 100 * j.row.ms / allMs), "%.1f%%").c_str(),
      format(known(bool(work), work ? work->bytes / 1e3 : 0), "%.1f").c_str(),
      format(known(bool(work), work ? work->flops / 1e6 : 0), "%.3f").c_str(),
      format(predictedMs, "%.3f").c_str(), format(ofPeak, "%.1f%%").c_str(),
      format(lost, "%.3f").c_str(), j.row.name.c_str());
}

void printHeader(int rank, long steps, double perStep, double allMs,
                 double launches, double predictedMs, bool measured,
                 const std::string &machine) {
  if (measured)
    std::fprintf(stderr,
                 "zest: rank %d: kernel times over %ld steps after the first "
                 "(ZEST_KERNEL_TIMES): %.3f ms of GPU work per step in %.0f "
                 "launches (their sum: the streams overlap); predictions "
                 "and peaks of %s, sorted by the time lost against the "
                 "peak\n",
                 rank, steps, allMs * perStep, launches * perStep,
                 machine.c_str());
  else
    std::fprintf(stderr,
                 "zest: rank %d: kernel profile over %ld steps after the "
                 "first (ZEST_KERNEL_TIMES; the emulated device's times are "
                 "the host's, so predictions only): %.0f launches per step, "
                 "%.3f ms predicted on %s, sorted by it\n",
                 rank, steps, launches * perStep, predictedMs, machine.c_str());
  std::fprintf(stderr,
               "zest: rank %d: %10s %9s %6s %10s %10s %10s %7s %10s  %s\n",
               rank, "ms/step", "launches", "share", "KB/run", "MFLOP/run",
               "pred ms", "of peak", "lost ms", "name");
}

} // namespace

void cuda::printKernelProfile(int rank, std::vector<ProfileRow> rows,
                              long steps) {
  bool measured = !zest_emulated_device;
  Table table = readTable();
  double perStep = 1.0 / steps, allMs = 0, launches = 0, predictedMs = 0;
  std::vector<Judged> judged;
  for (ProfileRow &row : rows) {
    allMs += row.ms;
    launches += row.launches;
    judged.push_back(judge(std::move(row), table));
    predictedMs += judged.back().predictedUs.value_or(0) *
                   judged.back().row.launches * perStep / 1e3;
  }
  // Measured: the time lost per step against the peak (all of it where the
  // work is unknown). Emulated: the cost model's prediction per step.
  auto key = [&](const Judged &j) {
    double runs = j.row.launches * perStep;
    if (!measured)
      return j.predictedUs.value_or(0) * runs / 1e3;
    return j.row.ms * perStep - j.boundUs.value_or(0) * runs / 1e3;
  };
  std::stable_sort(
      judged.begin(), judged.end(),
      [&](const Judged &a, const Judged &b) { return key(a) > key(b); });
  printHeader(rank, steps, perStep, allMs, launches, predictedMs, measured,
              table.machine ? table.machine->name : "none");
  // The largest 40, the rest in one line; on the emulated device, then the
  // names without a prediction (collectives, copies), each.
  constexpr size_t kShown = 40;
  size_t shown = 0, more = 0;
  for (const Judged &j : judged) {
    bool listed = measured || j.predictedUs;
    if (listed && shown++ >= kShown) {
      ++more;
      continue;
    }
    if (listed)
      printRow(rank, j, perStep, allMs, measured,
               measured && j.boundUs ? std::optional<double>(key(j))
                                     : std::nullopt);
  }
  if (more)
    std::fprintf(stderr, "zest: rank %d: (%zu more)\n", rank, more);
  if (!measured)
    for (const Judged &j : judged)
      if (!j.predictedUs)
        printRow(rank, j, perStep, allMs, measured, std::nullopt);
}
