//===- MemoryBudget.cpp - A schedule that fits a memory budget ------------===//
//
// Prefetching and keeping units gathered both buy overlap or less traffic
// with memory; recomputing activations and offloading to the host buy
// memory with time. Under a budget, each candidate schedule is compiled up
// to its memory plan, whose peak is exact, so the choice never overshoots,
// and replayed on the cost model, so the fastest schedule that fits wins:
// the budget is decided at compile time instead of by profiling
// (DeepCompile) or by hand-tuned bucket sizes (FSDP, DeepSpeed).
//
// Compilations are what the search costs (seconds each at production
// size), so it compiles few: counts of units are searched by interpolating
// the plan's bytes (close to linear in the count of a stack's units), two
// counts at a time, concurrently; a search stops where it can no longer
// beat the fastest schedule found.
//
//===----------------------------------------------------------------------===//

#include "ScheduleCandidates.h"

#include "zest/Dialect/Zest/IR/ZestOps.h"
#include "zest/Dialect/Zest/Transforms/Transforms.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <deque>

using namespace mlir;
using namespace mlir::zest;

namespace {

/// Up to this many candidate units are kept greedily one by one (one
/// compilation each); beyond, by a search over the order's prefixes.
constexpr size_t kGreedyUnits = 16;

/// At most this many schedules that did not fit are compiled with
/// recomputation (tradeRecomputation).
constexpr size_t kTradedSchedules = 4;

/// What recomputing every unit saved and cost on a schedule, where compiled.
struct RecomputeCost {
  int64_t savedBytes = 0;
  double costUs = 0;
};

/// The modes a trade of recomputation compiles, in this order.
constexpr CheckpointMode kRecomputeModes[] = {CheckpointMode::Selective,
                                              CheckpointMode::Full};

/// A count of units (a prefix of some order) and its schedule's figures,
/// `compiled` or predicted.
struct Probe {
  size_t count = 0;
  Candidate candidate;
  bool compiled = true;
};

/// Of units recomputing their forward (a prefix of the forward's order) under
/// one offload mode, in one checkpointing mode: the schedule with none and
/// the one with all of them.
struct Track {
  std::optional<OffloadMode> offload;
  CheckpointMode mode;
  Candidate none;
  Probe all;
};

/// What makes a schedule fit: offload and recomputation, and its figures.
struct Fit {
  Candidate candidate;
  std::optional<OffloadMode> offload;
  std::vector<std::string> offloadUnits;
  std::vector<std::string> checkpoint;
  CheckpointMode checkpointMode = CheckpointMode::Full;
};

std::vector<std::string> getPrefix(ArrayRef<std::string> units, size_t n) {
  return std::vector<std::string>(units.begin(), units.begin() + n);
}

/// The first `full` of `units` recomputing in full, the `selective` after
/// them selectively (`unit:selective`, as zest-checkpoint-activations reads
/// it under mode full).
std::vector<std::string> getMixedUnits(ArrayRef<std::string> units, size_t full,
                                       size_t selective) {
  std::vector<std::string> mixed = getPrefix(units, full);
  for (size_t i = full; i < full + selective; ++i)
    mixed.push_back(
        (units[i] + ":" + stringifyCheckpointMode(CheckpointMode::Selective))
            .str());
  return mixed;
}

/// The search for the fastest schedule under a budget.
class ScheduleSearch {
public:
  ScheduleSearch(ModuleOp module, const CompileOptions &options,
                 const MachineModel &machine)
      : module(module), options(options), candidates(module, options, machine),
        budget(options.lower.memoryBudget),
        baseKeep(options.front.keepUnits.begin(),
                 options.front.keepUnits.end()) {}

  FailureOr<std::optional<Schedule>> run();

private:
  /// The schedule at `depth` keeping `keep`, under the levers chosen so far.
  Schedule withLevers(unsigned depth, std::vector<std::string> keep) const {
    return Schedule{depth,          std::move(keep), {},          checkpoint,
                    checkpointMode, offload,         offloadUnits};
  }
  SmallVector<FailureOr<Candidate>> compile(ArrayRef<Schedule> schedules);
  FailureOr<Candidate> compileOne(const Schedule &schedule) {
    return compile(schedule).front();
  }
  bool fits(const FailureOr<Candidate> &candidate) const {
    return succeeded(candidate) && candidate->heldBytes <= budget;
  }
  std::optional<Probe> nearestAccepted(
      Probe reject, Probe accept, function_ref<Schedule(size_t)> scheduleAt,
      std::optional<double> boundUs,
      function_ref<bool(const Candidate &, const Candidate &)> accepted = {});
  /// Whether the search may make units recompute their forward: not where
  /// the user chose the checkpointing (`none` included).
  bool mayRecompute() const {
    return !options.checkpointingChosen &&
           options.front.activationCheckpointing == CheckpointMode::None;
  }
  std::vector<std::string> getRecomputableUnits(const Candidate &lean) const;
  SmallVector<std::optional<OffloadMode>> getOffloadModes() const;
  FailureOr<Candidate> fitLeanest(const Candidate &lean);
  std::optional<Candidate> searchTrack(const Track &track);
  void searchFrom(MutableArrayRef<Track> tracks, size_t count,
                  SmallVectorImpl<Track> &unfit);
  std::optional<Candidate> fewestOffloaded(const Candidate &lean,
                                           const Candidate &all);
  void mixModes();
  void consider(const std::optional<Candidate> &fit);
  /// The step time of the fastest fit found, which a search must beat.
  std::optional<double> getBound() const {
    return fastest ? std::optional<double>(fastest->candidate.stepUs)
                   : std::nullopt;
  }
  void noteLeanest(const Fit &fit);
  LogicalResult reportInfeasible(const Candidate &lean);
  std::string describeRecomputation() const;
  void orderUnitsToKeep(const Candidate &lean);
  void chooseKeptUnits(unsigned depth, const Candidate &base,
                       const FailureOr<Candidate> &everything);
  void considerChoice(unsigned depth, const std::vector<std::string> &keep,
                      const Candidate &candidate);
  void deepenSingleUnits(const Candidate &lean, unsigned maxDepth);
  Schedule withRecomputation(const Schedule &base, size_t n,
                             CheckpointMode mode) const;
  SmallVector<CheckpointMode, 2>
  getModesWorthTrying(const Candidate &without,
                      ArrayRef<std::optional<RecomputeCost>> measured) const;
  void tradeRecomputation(const Candidate &lean);
  bool pays(const FailureOr<Candidate> &candidate) const;
  /// Whether a schedule taking `stepUs` is at least 1% faster than the best.
  bool faster(double stepUs) const {
    return stepUs < 0.99 * bestCandidate.stepUs;
  }
  void printChoice() const;

  ModuleOp module;
  const CompileOptions &options;
  CandidateCompiler candidates;
  int64_t budget;
  std::vector<std::string> baseKeep;
  /// Units recomputing their forward, in the forward's order (empty where
  /// the user chose the checkpointing).
  std::vector<std::string> recomputable;
  /// Units worth keeping, in the order they are tried.
  SmallVector<std::pair<std::string, Candidate::UnitGathers>> order;
  /// The levers of every candidate from here on: units recomputing their
  /// forward (none unless the leanest schedule without does not fit), and
  /// what they recompute; offload (none: as the user chose) and of which
  /// units (empty: all).
  std::vector<std::string> checkpoint;
  CheckpointMode checkpointMode = CheckpointMode::Full;
  std::optional<OffloadMode> offload;
  std::vector<std::string> offloadUnits;
  Fit current(const Candidate &candidate) const {
    return {candidate, offload, offloadUnits, checkpoint, checkpointMode};
  }
  void restore(const Fit &fit) {
    offload = fit.offload;
    offloadUnits = fit.offloadUnits;
    checkpoint = fit.checkpoint;
    checkpointMode = fit.checkpointMode;
  }
  /// The leanest schedule seen (for the error when nothing fits), and the
  /// fastest that fits.
  std::optional<Fit> leanest, fastest;
  /// Where the leanest schedule did not fit: it, and it with what made it
  /// fit (offload, checkpointing), for the report of what they save and
  /// cost.
  std::optional<std::pair<Candidate, Candidate>> levers;
  /// The schedules without recomputation that did not fit, and their
  /// figures: what recomputing some units' forwards could buy
  /// (tradeRecomputation).
  std::vector<std::pair<Schedule, Candidate>> blocked;
  /// Where recomputation bought it: that schedule without and with it, for
  /// the report.
  std::optional<std::pair<Candidate, Candidate>> traded;
  /// The best schedule so far and its figures.
  std::optional<Schedule> best;
  Candidate bestCandidate;
};

} // namespace

/// Compiles `schedules`, remembering those that recompute nothing and do
/// not fit.
SmallVector<FailureOr<Candidate>>
ScheduleSearch::compile(ArrayRef<Schedule> schedules) {
  SmallVector<FailureOr<Candidate>> results = candidates.compile(schedules);
  for (auto [schedule, result] : llvm::zip(schedules, results))
    if (succeeded(result) && result->heldBytes > budget &&
        schedule.checkpointUnits.empty())
      blocked.push_back({schedule, *result});
  return results;
}

/// The fraction of the way from `from` to `to` where `value` lies, if it
/// lies strictly between them.
static std::optional<double> getCrossing(double from, double to, double value) {
  if ((from - value) * (to - value) >= 0)
    return std::nullopt;
  return (value - from) / (to - from);
}

/// Steps from `reject` toward `accept`, `span` apart, to compile in one
/// round, the largest first: where the held bytes, interpolated linearly
/// between the two ends, cross the budget (the middle where they do not
/// straddle it), and its neighbour toward `reject`, or, where the step
/// time interpolated the same way reaches `boundUs` before that, the step
/// where it does: a count slower than the bound that does not fit ends the
/// search.
static SmallVector<size_t> getProbeSteps(const Candidate &reject,
                                         const Candidate &accept, size_t span,
                                         int64_t budget,
                                         std::optional<double> boundUs) {
  auto stepAt = [&](double fraction) {
    return std::clamp<size_t>(static_cast<size_t>(std::ceil(fraction * span)),
                              1, span - 1);
  };
  std::optional<double> fits = getCrossing(reject.heldBytes, accept.heldBytes,
                                           static_cast<double>(budget) + 0.5);
  size_t step = stepAt(fits.value_or(0.5));
  std::optional<double> slow;
  if (boundUs)
    slow = getCrossing(reject.stepUs, accept.stepUs, *boundUs);
  SmallVector<size_t> steps = {step};
  if (slow && stepAt(*slow) < step)
    steps.push_back(stepAt(*slow));
  else if (step > 1)
    steps.push_back(step - 1);
  else if (span > 2)
    steps.insert(steps.begin(), std::max<size_t>(span / 2, 2));
  return steps;
}

/// Between the unit counts of `reject` (not accepted) and `accept`
/// (accepted), the accepted count nearest `reject`, compiling two counts a
/// round concurrently (getProbeSteps): plans are close to linear in the
/// count of a stack's recomputed, offloaded or kept units, so one or two
/// rounds usually end it. `accepted(candidate, than)` judges a candidate
/// where `than` is the accepted end (by default: it fits the budget). With
/// `boundUs` (the fastest schedule
/// found elsewhere; more units are slower), a rejected count at least that
/// slow ends the search without an answer. A predicted `accept` is
/// returned as it is (not compiled).
std::optional<Probe> ScheduleSearch::nearestAccepted(
    Probe reject, Probe accept, function_ref<Schedule(size_t)> scheduleAt,
    std::optional<double> boundUs,
    function_ref<bool(const Candidate &, const Candidate &)> accepted) {
  auto distance = [&] {
    return accept.count > reject.count ? accept.count - reject.count
                                       : reject.count - accept.count;
  };
  while (distance() > 1) {
    SmallVector<size_t> steps = getProbeSteps(
        reject.candidate, accept.candidate, distance(), budget, boundUs);
    bool up = accept.count > reject.count;
    auto countAt = [&](size_t s) {
      return up ? reject.count + s : reject.count - s;
    };
    SmallVector<Schedule> schedules;
    for (size_t s : steps)
      schedules.push_back(scheduleAt(countAt(s)));
    SmallVector<FailureOr<Candidate>> results = compile(schedules);
    for (auto [s, result] : llvm::zip(steps, results)) {
      if (succeeded(result) && (accepted ? accepted(*result, accept.candidate)
                                         : result->heldBytes <= budget)) {
        accept = {countAt(s), *result};
        continue;
      }
      if (succeeded(result) && boundUs && result->stepUs >= *boundUs)
        return std::nullopt;
      // Past a rejected count, nearer `reject`, nothing is looked at.
      reject = {countAt(s), succeeded(result) ? *result : reject.candidate};
      break;
    }
  }
  return accept;
}

/// The sharded units but the root, in the order the forward gathers them
/// (the earliest first, whose activations live longest); none where the
/// user chose the checkpointing.
std::vector<std::string>
ScheduleSearch::getRecomputableUnits(const Candidate &lean) const {
  if (!mayRecompute())
    return {};
  SmallVector<std::pair<int64_t, std::string>> gathered;
  for (auto &[name, gathers] : lean.units)
    if (name != "root")
      gathered.push_back({gathers.firstGather, name.str()});
  llvm::sort(gathered);
  std::vector<std::string> units;
  for (auto &[position, name] : gathered)
    units.push_back(name);
  return units;
}

/// On a GPU with an optimizer, unless the user chose the offload (`none`
/// included): the optimizer's state, or the parameters too, may go to the
/// host.
SmallVector<std::optional<OffloadMode>>
ScheduleSearch::getOffloadModes() const {
  if (isDeviceTarget(options.lower.target) && options.front.hasOptimizer() &&
      !options.offloadChosen && options.front.offload == OffloadMode::None)
    return {OffloadMode::Optimizer, OffloadMode::Params};
  return {};
}

void ScheduleSearch::noteLeanest(const Fit &fit) {
  if (!leanest || fit.candidate.heldBytes < leanest->candidate.heldBytes)
    leanest = fit;
}

/// Remembers a fit under the current levers if it is the fastest.
void ScheduleSearch::consider(const std::optional<Candidate> &fit) {
  if (fit && (!fastest || fit->stepUs < fastest->candidate.stepUs))
    fastest = current(*fit);
}

/// The fewest units of the track recomputing their forward for its
/// schedule to fit, and that schedule; none where even all of them do not
/// fit, or where no count can beat the fastest fit found (each unit more
/// recomputes more). Leaves the levers set to what it found.
std::optional<Candidate> ScheduleSearch::searchTrack(const Track &track) {
  offload = track.offload;
  offloadUnits.clear();
  checkpointMode = track.mode;
  auto scheduleAt = [&](size_t n) {
    checkpoint = getPrefix(recomputable, n);
    return withLevers(0, baseKeep);
  };
  std::optional<Probe> answer =
      nearestAccepted({0, track.none}, track.all, scheduleAt, getBound());
  if (!answer)
    return std::nullopt;
  checkpoint = getPrefix(recomputable, answer->count);
  if (!answer->compiled) {
    FailureOr<Candidate> all = compileOne(withLevers(0, baseKeep));
    if (succeeded(all))
      noteLeanest(current(*all));
    if (!fits(all))
      return std::nullopt;
    answer->candidate = *all;
  }
  return answer->candidate;
}

/// Offloading every unit (`all`) fits and `lean` (none) does not: the
/// fewest units that still fit, the largest first (each saves its shard and
/// state on the device, and costs their transfers); sets `offloadUnits`
/// (empty where all are needed) and returns their figures.
std::optional<Candidate> ScheduleSearch::fewestOffloaded(const Candidate &lean,
                                                         const Candidate &all) {
  SmallVector<std::pair<int64_t, std::string>> bySize;
  for (auto &[name, gathers] : all.units)
    bySize.push_back({-gathers.bytes, name.str()});
  llvm::sort(bySize);
  auto largest = [&](size_t n) {
    offloadUnits.clear();
    if (n < bySize.size()) // none listed: all
      for (size_t i = 0; i < n; ++i)
        offloadUnits.push_back(bySize[i].second);
    return withLevers(0, baseKeep);
  };
  std::optional<Probe> answer =
      nearestAccepted({0, lean}, {bySize.size(), all}, largest, getBound());
  if (answer)
    largest(answer->count);
  return answer ? std::optional<Candidate>(answer->candidate) : std::nullopt;
}

/// The fastest fit recomputes its first units' whole forward (full): fewer
/// of them in full, with units after them recomputing their cheap ops
/// (selective), may fit too and recompute less. Finds the fewest full units
/// for which every later unit recomputing selectively fits, then the
/// fewest selective units after them, and keeps that schedule where it is
/// faster. Leaves the levers where the search stopped: the caller restores
/// the fastest fit.
void ScheduleSearch::mixModes() {
  if (!fastest || fastest->checkpointMode != CheckpointMode::Full ||
      fastest->checkpoint.empty())
    return;
  restore(*fastest);
  size_t fullCount = checkpoint.size(), total = recomputable.size();
  size_t full = 0;
  auto fullAt = [&](size_t count) {
    checkpoint = getMixedUnits(recomputable, count, total - count);
    return withLevers(0, baseKeep);
  };
  auto selectiveAt = [&](size_t count) {
    checkpoint = getMixedUnits(recomputable, full, count);
    return withLevers(0, baseKeep);
  };
  // No unit in full: every one selective, which the selective track has
  // weighed where it fits.
  FailureOr<Candidate> allSelective = compileOne(fullAt(0));
  if (failed(allSelective) || fits(allSelective))
    return;
  // Fewer full units are not monotonic in time, so no bound here.
  std::optional<Probe> fewestFull =
      nearestAccepted({0, *allSelective}, {fullCount, fastest->candidate},
                      fullAt, std::nullopt);
  if (!fewestFull || fewestFull->count >= fullCount)
    return;
  full = fewestFull->count;
  FailureOr<Candidate> fullOnly = compileOne(selectiveAt(0));
  if (failed(fullOnly) || fits(fullOnly)) // fewer full units than fit
    return;
  std::optional<Probe> answer =
      nearestAccepted({0, *fullOnly}, {total - full, fewestFull->candidate},
                      selectiveAt, getBound());
  if (!answer)
    return;
  checkpoint = getMixedUnits(recomputable, full, answer->count);
  consider(answer->candidate);
}

/// Compiles each of `tracks` with the first `count` units recomputing, as
/// its all-units end: notes it for the leanest schedule, searches the
/// track where it fits, and adds it to `unfit` where it does not.
void ScheduleSearch::searchFrom(MutableArrayRef<Track> tracks, size_t count,
                                SmallVectorImpl<Track> &unfit) {
  std::vector<std::string> units = getPrefix(recomputable, count);
  SmallVector<Schedule> schedules;
  for (const Track &track : tracks)
    schedules.push_back(
        Schedule{0, baseKeep, {}, units, track.mode, track.offload});
  SmallVector<FailureOr<Candidate>> exact = compile(schedules);
  for (auto [track, result] : llvm::zip(tracks, exact)) {
    if (failed(result))
      continue;
    noteLeanest(Fit{*result, track.offload, {}, units, track.mode});
    track.all = {count, *result};
    if (result->heldBytes <= budget)
      consider(searchTrack(track));
    else
      unfit.push_back(track);
  }
}

/// The leanest schedule `lean` does not fit. Offload (where
/// getOffloadModes allows it) and recomputation (the fewest units, selective
/// or full) are weighed: for each offload mode, what fits, and of those the
/// fastest on the cost model, which counts the host copies and the host's
/// update. Recomputing every unit saves about the same bytes and costs
/// about the same time under each offload mode, so those schedules are
/// compiled without offload only and predicted for the others; a
/// prediction that does not fit is compiled only where nothing else fits.
/// Reports the budget infeasible, naming the leanest schedule there is,
/// where nothing fits.
FailureOr<Candidate> ScheduleSearch::fitLeanest(const Candidate &lean) {
  recomputable = getRecomputableUnits(lean);
  SmallVector<std::optional<OffloadMode>> modes = getOffloadModes();
  SmallVector<CheckpointMode> recomputations;
  if (!recomputable.empty())
    recomputations = {CheckpointMode::Selective, CheckpointMode::Full};
  SmallVector<Schedule> first;
  for (std::optional<OffloadMode> mode : modes)
    first.push_back(Schedule{0, baseKeep, {}, {}, CheckpointMode::Full, mode});
  for (CheckpointMode mode : recomputations)
    first.push_back(Schedule{0, baseKeep, {}, recomputable, mode});
  SmallVector<FailureOr<Candidate>> results = compile(first);
  leanest = Fit{lean};
  // Each offload mode without recomputation, the fastest first (its time
  // bounds every schedule of the mode).
  SmallVector<std::pair<std::optional<OffloadMode>, Candidate>> bases = {
      {std::nullopt, lean}};
  for (auto [mode, base] : llvm::zip(modes, results))
    if (succeeded(base)) {
      bases.push_back({mode, *base});
      noteLeanest(Fit{*base, mode});
    }
  llvm::stable_sort(bases, [](const auto &a, const auto &b) {
    return a.second.stepUs < b.second.stepUs;
  });
  llvm::DenseMap<unsigned, Candidate> recomputed;
  llvm::StringSet<> done;
  for (auto [mode, all] :
       llvm::zip(recomputations, ArrayRef(results).drop_front(modes.size())))
    if (succeeded(all)) {
      recomputed[static_cast<unsigned>(mode)] = *all;
      done.insert(all->recomputed.begin(), all->recomputed.end());
    }
  // Counts of recomputing units count only those that can: a unit whose
  // backward follows its forward has nothing to recompute.
  llvm::erase_if(recomputable,
                 [&](const std::string &unit) { return !done.contains(unit); });
  if (recomputable.empty())
    recomputed.clear();
  for (CheckpointMode mode : recomputations)
    if (auto it = recomputed.find(static_cast<unsigned>(mode));
        it != recomputed.end())
      noteLeanest(Fit{it->second, std::nullopt, {}, recomputable, mode});
  SmallVector<Track> deferred, unfit;
  for (auto &[mode, base] : bases) {
    if (fastest && base.stepUs >= fastest->candidate.stepUs)
      continue;
    if (base.heldBytes <= budget) {
      offload = mode;
      checkpoint.clear();
      consider(fewestOffloaded(lean, base));
      continue;
    }
    for (CheckpointMode recomputation : recomputations) {
      auto it = recomputed.find(static_cast<unsigned>(recomputation));
      if (it == recomputed.end())
        continue;
      const Candidate &all = it->second;
      Track track{mode, recomputation, base, {recomputable.size(), all}};
      if (mode) { // predicted from the schedules without offload
        track.all.compiled = false;
        track.all.candidate.heldBytes =
            base.heldBytes - (lean.heldBytes - all.heldBytes);
        track.all.candidate.stepUs = base.stepUs + (all.stepUs - lean.stepUs);
        if (track.all.candidate.heldBytes > budget) {
          deferred.push_back(track);
          continue;
        }
      } else if (all.heldBytes > budget) {
        unfit.push_back(track);
        continue;
      }
      consider(searchTrack(track));
    }
  }
  // Nothing fit. Predictions are not exact: the tracks predicted not to
  // fit are compiled (for the smallest feasible budget too). Recomputing
  // every unit is not always the leanest either: the last unit's
  // recomputation and its backward at once can peak above what recomputing
  // it saves, so each track is tried once more without it.
  if (!fastest && !deferred.empty())
    searchFrom(deferred, recomputable.size(), unfit);
  if (!fastest && recomputable.size() >= 2) {
    SmallVector<Track> leaner;
    searchFrom(unfit, recomputable.size() - 1, leaner);
  }
  if (!fastest) {
    restore(*leanest);
    (void)reportInfeasible(leanest->candidate);
    return failure();
  }
  if (llvm::is_contained(recomputations, CheckpointMode::Selective))
    mixModes();
  restore(*fastest);
  levers = {lean, fastest->candidate};
  return fastest->candidate;
}

/// ", every unit but the root recomputing its forward (mode)", or which
/// units do where not all that can, for the error naming the leanest
/// schedule.
std::string ScheduleSearch::describeRecomputation() const {
  if (checkpoint.empty())
    return "";
  StringRef mode = stringifyCheckpointMode(checkpointMode);
  if (checkpoint.size() < recomputable.size()) {
    std::string units =
        checkpoint.size() <= 3
            ? llvm::join(checkpoint, ", ")
            : (checkpoint.front() + " ... " + checkpoint.back() + " (" +
               Twine(checkpoint.size()) + " units)")
                  .str();
    return (", " + units + " recomputing their forward (" + mode + ")").str();
  }
  return (", every unit but the root recomputing its forward (" + mode + ")")
      .str();
}

LogicalResult ScheduleSearch::reportInfeasible(const Candidate &lean) {
  ShardingStrategy strategy = options.front.strategy;
  return emitError(getModelDiagnosticLoc(module))
         << "--memory-budget=" << budget << " bytes is infeasible: the "
         << "leanest schedule (no prefetch, "
         << (strategy == ShardingStrategy::ShardGradOp ? "every unit kept"
             : strategy == ShardingStrategy::NoShard   ? "every unit replicated"
                                                     : "every unit re-gathered")
         << describeRecomputation()
         << (offload && *offload != OffloadMode::None
                 ? (", offload " + stringifyOffloadMode(*offload)).str()
                 : "")
         << ") peaks at " << lean.heldBytes
         << (isDeviceTarget(options.lower.target)
                 ? " bytes per rank (pool and arguments on the device); "
                 : " pool bytes per rank; ")
         << "the smallest feasible budget is --memory-budget="
         << lean.heldBytes;
}

/// Units worth keeping, most re-gathered bytes saved first; among equals the
/// one gathered last in forward, whose kept buffer lives the shortest.
void ScheduleSearch::orderUnitsToKeep(const Candidate &lean) {
  for (auto &[name, gathers] : lean.units)
    if (gathers.regathers > 0 && !llvm::is_contained(baseKeep, name.str()))
      order.push_back({name.str(), gathers});
  llvm::sort(order, [](const auto &a, const auto &b) {
    int64_t savedA = a.second.regathers * a.second.bytes;
    int64_t savedB = b.second.regathers * b.second.bytes;
    if (savedA != savedB)
      return savedA > savedB;
    return a.second.firstGather > b.second.firstGather;
  });
}

/// The fastest (then the leanest) schedule wins.
void ScheduleSearch::considerChoice(unsigned depth,
                                    const std::vector<std::string> &keep,
                                    const Candidate &candidate) {
  if (!best || candidate.stepUs < bestCandidate.stepUs ||
      (candidate.stepUs == bestCandidate.stepUs &&
       candidate.heldBytes < bestCandidate.heldBytes)) {
    best = withLevers(depth, keep);
    bestCandidate = candidate;
  }
}

/// At `depth`, whose schedule without kept units is `base` (which fits) and
/// with every unit worth keeping kept is `everything`: keeps what fits and
/// does not slow the step, unit by unit in order for a few units, else the
/// longest prefix of the order that does.
void ScheduleSearch::chooseKeptUnits(unsigned depth, const Candidate &base,
                                     const FailureOr<Candidate> &everything) {
  auto keepPrefix = [&](size_t n) {
    std::vector<std::string> keep = baseKeep;
    for (size_t i = 0; i < n; ++i)
      keep.push_back(order[i].first);
    return keep;
  };
  auto notSlower = [&](const Candidate &candidate, const Candidate &than) {
    return candidate.heldBytes <= budget && candidate.stepUs <= than.stepUs;
  };
  if (succeeded(everything) && notSlower(*everything, base))
    return considerChoice(depth, keepPrefix(order.size()), *everything);
  if (order.size() > kGreedyUnits) {
    Probe all{order.size(), succeeded(everything) ? *everything : base};
    std::optional<Probe> kept = nearestAccepted(
        all, {0, base},
        [&](size_t n) { return withLevers(depth, keepPrefix(n)); },
        std::nullopt, notSlower);
    return considerChoice(depth, keepPrefix(kept->count), kept->candidate);
  }
  std::vector<std::string> keep = baseKeep;
  Candidate current = base;
  for (auto &[name, gathers] : order) {
    std::vector<std::string> more = keep;
    more.push_back(name);
    FailureOr<Candidate> kept = compileOne(withLevers(depth, more));
    if (succeeded(kept) && notSlower(*kept, current)) {
      keep = std::move(more);
      current = *kept;
    }
  }
  considerChoice(depth, keep, current);
}

/// Whether a raised schedule fits and is at least 1% faster than the best
/// (the model's noise does not pick schedules).
bool ScheduleSearch::pays(const FailureOr<Candidate> &candidate) const {
  return fits(candidate) && faster(candidate->stepUs);
}

/// The next units to raise from the front of `untried`: one, or two of
/// different sizes, skipping sizes whose raise did not pay.
static SmallVector<size_t>
takeRaises(std::deque<size_t> &untried,
           ArrayRef<std::pair<std::string, Candidate::UnitGathers>> byBytes,
           const llvm::DenseSet<int64_t> &unpaidSizes) {
  SmallVector<size_t> taken;
  while (!untried.empty() && taken.size() < 2) {
    int64_t bytes = byBytes[untried.front()].second.bytes;
    if (unpaidSizes.contains(bytes)) {
      untried.pop_front();
      continue;
    }
    if (!taken.empty() && byBytes[taken.front()].second.bytes == bytes)
      break;
    taken.push_back(untried.front());
    untried.pop_front();
  }
  return taken;
}

/// Per-unit depths (DeepCompile's adaptive prefetch): below the deepest
/// allowed, raises one unit's depth at a time, the largest gathers first,
/// keeping each raise that fits and makes the step faster by 1% or more.
/// Units of a stack gather the same bytes: once raising one of them does
/// not pay, the others of that size are not tried (32 decoder layers cost
/// one compilation, not 16). Two raises of different sizes are compiled at
/// once; where both pay, the faster is kept and the other tried again on
/// top of it.
void ScheduleSearch::deepenSingleUnits(const Candidate &lean,
                                       unsigned maxDepth) {
  if (best->prefetch >= maxDepth)
    return;
  SmallVector<std::pair<std::string, Candidate::UnitGathers>> byBytes;
  for (auto &[name, gathers] : lean.units)
    byBytes.push_back({name.str(), gathers});
  llvm::sort(byBytes, [](const auto &a, const auto &b) {
    if (a.second.bytes != b.second.bytes)
      return a.second.bytes > b.second.bytes;
    return a.second.firstGather < b.second.firstGather;
  });
  if (byBytes.size() > kGreedyUnits)
    byBytes.resize(kGreedyUnits);
  std::string deeper = ":" + std::to_string(best->prefetch + 1);
  llvm::DenseSet<int64_t> unpaidSizes;
  // Units not tried yet, the next first.
  std::deque<size_t> untried;
  for (size_t i = 0; i < byBytes.size(); ++i)
    untried.push_back(i);
  while (!untried.empty()) {
    SmallVector<size_t> tried = takeRaises(untried, byBytes, unpaidSizes);
    SmallVector<Schedule> raised;
    for (size_t i : tried) {
      raised.push_back(*best);
      raised.back().unitPrefetch.push_back(byBytes[i].first + deeper);
    }
    SmallVector<FailureOr<Candidate>> results = compile(raised);
    std::optional<size_t> quickest;
    for (auto [k, i] : llvm::enumerate(tried)) {
      if (!pays(results[k]))
        unpaidSizes.insert(byBytes[i].second.bytes);
      else if (!quickest || results[k]->stepUs < results[*quickest]->stepUs)
        quickest = k;
    }
    if (!quickest)
      continue;
    for (auto [k, i] : llvm::enumerate(tried))
      if (k != *quickest && pays(results[k]))
        untried.push_front(i);
    best = raised[*quickest];
    bestCandidate = *results[*quickest];
  }
}

/// `base` (which recomputes nothing) with the first `n` units of
/// `recomputable` recomputing their forward in `mode`.
Schedule ScheduleSearch::withRecomputation(const Schedule &base, size_t n,
                                           CheckpointMode mode) const {
  Schedule schedule = base;
  schedule.checkpointUnits = getPrefix(recomputable, n);
  schedule.checkpointMode = mode;
  return schedule;
}

/// Of selective and full (in that order), the modes worth compiling
/// `without` (a schedule that did not fit) with: where nothing was measured
/// yet, both; else those whose measured cost leaves it faster than the best
/// and whose saving, twice over, could make it fit (savings differ between
/// schedules, as the peak moves; the cost moves less).
SmallVector<CheckpointMode, 2> ScheduleSearch::getModesWorthTrying(
    const Candidate &without,
    ArrayRef<std::optional<RecomputeCost>> measured) const {
  SmallVector<CheckpointMode, 2> modes;
  for (auto [mode, cost] : llvm::zip(kRecomputeModes, measured))
    if (!cost || (without.heldBytes - 2 * cost->savedBytes <= budget &&
                  faster(without.stepUs + cost->costUs)))
      modes.push_back(mode);
  return modes;
}

/// The leanest schedule fits without recomputation, but faster ones (a
/// deeper prefetch, kept units) did not: recomputing the forward of a few
/// units (those gathered first, whose activations live longest) may free
/// the room for one of them at less cost than it saves, as FSDP users
/// checkpoint to afford a deeper prefetch or no resharding. The fastest of
/// them is compiled with every unit recomputing, selectively and in full;
/// the largest saving and its cost seen so far predict the same for the
/// next ones, compiled in order of step time where that may fit and pay.
/// The first that fits and pays wins with the fewest units that make it
/// fit (a count that does not fit and is already no faster than the best
/// ends that search).
void ScheduleSearch::tradeRecomputation(const Candidate &lean) {
  std::vector<std::string> units = getRecomputableUnits(lean);
  llvm::erase_if(
      blocked, [&](const auto &entry) { return !faster(entry.second.stepUs); });
  if (units.empty() || blocked.empty())
    return;
  llvm::stable_sort(blocked, [](const auto &a, const auto &b) {
    return a.second.stepUs < b.second.stepUs;
  });
  std::optional<RecomputeCost> measured[2]; // per mode of kRecomputeModes
  size_t tries = 0;
  for (const auto &[base, without] : blocked) {
    SmallVector<CheckpointMode, 2> tried =
        getModesWorthTrying(without, measured);
    if (tried.empty())
      continue;
    if (tries++ == kTradedSchedules)
      return;
    recomputable = units;
    SmallVector<Schedule, 2> everyUnit;
    for (CheckpointMode mode : tried)
      everyUnit.push_back(withRecomputation(base, units.size(), mode));
    SmallVector<FailureOr<Candidate>> all = compile(everyUnit);
    std::optional<size_t> fastestFit;
    for (auto [k, result] : llvm::enumerate(all)) {
      std::optional<RecomputeCost> &cost =
          measured[tried[k] == CheckpointMode::Full];
      int64_t saved =
          succeeded(result) ? without.heldBytes - result->heldBytes : 0;
      if (succeeded(result) && (!cost || saved > cost->savedBytes))
        cost = RecomputeCost{saved, result->stepUs - without.stepUs};
      if (pays(result) &&
          (!fastestFit || result->stepUs < all[*fastestFit]->stepUs))
        fastestFit = k;
    }
    if (!fastestFit)
      continue;
    CheckpointMode mode = tried[*fastestFit];
    const Candidate &every = *all[*fastestFit];
    // Counts of units count only those with something to recompute.
    llvm::erase_if(recomputable, [&](const std::string &unit) {
      return !every.recomputed.contains(unit);
    });
    std::optional<Probe> fewest = nearestAccepted(
        {0, without}, {recomputable.size(), every},
        [&](size_t n) { return withRecomputation(base, n, mode); },
        bestCandidate.stepUs);
    if (!fewest || !pays(fewest->candidate))
      continue;
    traded = {without, fewest->candidate};
    best = withRecomputation(base, fewest->count, mode);
    bestCandidate = fewest->candidate;
    return;
  }
}

/// " (mode): a b", or " (full): a (selective): b c" for modes mixed per
/// unit (`unit:selective` entries).
static std::string describeCheckpointUnits(ArrayRef<std::string> units,
                                           CheckpointMode mode) {
  std::string text;
  std::optional<StringRef> current;
  for (StringRef entry : units) {
    auto [unit, suffix] = splitAcUnitsEntry(entry);
    StringRef unitMode =
        suffix.empty() ? stringifyCheckpointMode(mode) : suffix;
    if (current != unitMode)
      text += (" (" + unitMode + "):").str();
    current = unitMode;
    text += (" " + unit).str();
  }
  return text;
}

void ScheduleSearch::printChoice() const {
  llvm::outs() << "schedule under --memory-budget=" << budget << ": prefetch "
               << best->prefetch;
  if (!best->unitPrefetch.empty())
    llvm::outs() << " (deeper: " << llvm::join(best->unitPrefetch, ", ") << ")";
  llvm::outs() << ", kept units:";
  for (const std::string &unit : best->keepUnits)
    llvm::outs() << " " << unit;
  if (best->keepUnits.empty())
    llvm::outs() << " none";
  if (best->offload && *best->offload != OffloadMode::None) {
    llvm::outs() << ", offload " << stringifyOffloadMode(*best->offload);
    if (!best->offloadUnits.empty())
      llvm::outs() << " (units: " << llvm::join(best->offloadUnits, " ") << ")";
  }
  if (!best->checkpointUnits.empty())
    llvm::outs() << ", recomputed units"
                 << describeCheckpointUnits(best->checkpointUnits,
                                            best->checkpointMode);
  llvm::outs() << llvm::formatv(
      " (predicted {0:f3} ms per call; {1} schedules compiled)\n",
      bestCandidate.stepUs / 1e3, candidates.getCompiled());
  if (levers) {
    const auto &[without, with] = *levers;
    llvm::outs() << llvm::formatv(
        "  offload and recomputation save {0} bytes per rank and cost {1:f3} "
        "ms per call: the leanest schedule peaks at {2} bytes and takes "
        "{3:f3} ms without them, {4} bytes and {5:f3} ms with them\n",
        without.heldBytes - with.heldBytes,
        (with.stepUs - without.stepUs) / 1e3, without.heldBytes,
        without.stepUs / 1e3, with.heldBytes, with.stepUs / 1e3);
  }
  if (traded) {
    const auto &[without, with] = *traded;
    llvm::outs() << llvm::formatv(
        "  recomputation makes room for a faster schedule: without it that "
        "schedule peaks at {0} bytes and takes {1:f3} ms, with it {2} bytes "
        "and {3:f3} ms\n",
        without.heldBytes, without.stepUs / 1e3, with.heldBytes,
        with.stepUs / 1e3);
  }
}

FailureOr<std::optional<Schedule>> ScheduleSearch::run() {
  // The model does not shard or compile, or its plan is not exact: the real
  // compilation reports why (zest-plan-memory refuses a budget it cannot
  // check), with the leanest schedule.
  Schedule leanSchedule{0, baseKeep, {}, {}};
  if (failed(candidates.shard()))
    return std::optional<Schedule>(leanSchedule);
  // The leanest schedule: no prefetch, only the units the user keeps.
  FailureOr<Candidate> lean = compileOne(leanSchedule);
  if (failed(lean))
    return std::optional<Schedule>(leanSchedule);
  bool leanFits = lean->heldBytes <= budget;
  if (!leanFits) {
    lean = fitLeanest(*lean);
    if (failed(lean))
      return failure();
  }
  // Beyond one less than the step's gathers, every depth is the same
  // schedule.
  unsigned maxDepth = std::min<int64_t>(
      options.front.prefetch, std::max<int64_t>(lean->gathers - 1, 0));
  orderUnitsToKeep(*lean);
  std::vector<std::string> keepAll = baseKeep;
  for (auto &[name, gathers] : order)
    keepAll.push_back(name);
  // At once: every unit kept at depth 0, and each deeper depth's schedule;
  // where recomputation may be traded for them (tradeRecomputation), every
  // unit kept at the deepest depth too, the fastest schedule there is.
  SmallVector<Schedule> first;
  if (!order.empty())
    first.push_back(withLevers(0, keepAll));
  for (unsigned depth = 1; depth <= maxDepth; ++depth)
    first.push_back(withLevers(depth, baseKeep));
  bool roomy = leanFits && mayRecompute() && !order.empty() && maxDepth > 0;
  if (roomy)
    first.push_back(withLevers(maxDepth, keepAll));
  SmallVector<FailureOr<Candidate>> results = compile(first);
  ArrayRef<FailureOr<Candidate>> bases =
      ArrayRef(results).drop_front(order.empty() ? 0 : 1).take_front(maxDepth);
  for (unsigned depth = 0; depth <= maxDepth; ++depth) {
    FailureOr<Candidate> base = depth == 0 ? lean : bases[depth - 1];
    if (!fits(base))
      break; // deeper prefetch holds more
    // Every unit worth keeping kept, compiled above where it could be.
    auto everyUnitKept = [&]() -> FailureOr<Candidate> {
      if (order.empty())
        return *base;
      if (depth == 0)
        return results.front();
      if (roomy && depth == maxDepth)
        return results.back();
      return compileOne(withLevers(depth, keepAll));
    };
    chooseKeptUnits(depth, *base, everyUnitKept());
  }
  deepenSingleUnits(*lean, maxDepth);
  if (leanFits)
    tradeRecomputation(*lean);
  if (options.lower.reportText)
    printChoice();
  return best;
}

void mlir::zest::applySchedule(FrontPipelineOptions &front,
                               const Schedule &schedule) {
  front.prefetch = schedule.prefetch;
  front.keepUnits = schedule.keepUnits;
  front.unitPrefetch = schedule.unitPrefetch;
  if (!schedule.checkpointUnits.empty()) {
    front.activationCheckpointing = schedule.checkpointMode;
    front.acUnits = schedule.checkpointUnits;
  }
  if (schedule.offload) {
    front.offload = *schedule.offload;
    front.offloadUnits = schedule.offloadUnits;
  }
}

FailureOr<std::optional<Schedule>>
mlir::zest::chooseSchedule(ModuleOp module, const CompileOptions &options) {
  if (options.lower.memoryBudget <= 0)
    return std::optional<Schedule>();
  // The machine the candidates are timed on: the report's, else this one.
  std::string error;
  std::optional<MachineModel> machine = getMachineModel(
      options.lower.machine.empty() ? "cpu" : options.lower.machine.getValue(),
      options.lower.link, options.lower.replicaLink, error);
  if (!machine)
    return emitError(getModelDiagnosticLoc(module)) << error;
  return ScheduleSearch(module, options, *machine).run();
}
