//===- MemoryBudget.cpp - A schedule that fits a memory budget ------------===//
//
// Prefetching and keeping units gathered both buy overlap or less traffic
// with memory. Under a budget, each candidate schedule is compiled up to its
// memory plan, whose peak is exact, so the choice never overshoots, and
// replayed on the cost model, so the fastest schedule that fits wins: the
// budget is decided at compile time instead of by profiling (DeepCompile)
// or by hand-tuned bucket sizes (FSDP, DeepSpeed).
//
//===----------------------------------------------------------------------===//

#include "zest/Conversion/ModelDescriptor.h"
#include "zest/Dialect/Zest/IR/ZestOps.h"
#include "zest/Dialect/Zest/Transforms/CostModel.h"
#include "zest/Dialect/Zest/Transforms/MemoryPlan.h"
#include "zest/Driver/Compiler.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::zest;

namespace {

/// Up to this many candidate units are kept greedily one by one (one
/// compilation each); beyond, by bisection over the order (a logarithmic
/// number).
constexpr size_t kGreedyUnits = 16;

/// One evaluated schedule.
struct Candidate {
  /// Predicted bytes per rank the budget holds (the pool's footprint, and on a
  /// GPU the arguments on the device), and time of the slowest entry point.
  int64_t heldBytes = 0;
  double stepUs = 0;
  /// Per sharded unit: gathers after the first in the busiest function
  /// (what keeping it saves), bytes of its gathered buffer, and the program
  /// position of its first gather.
  struct UnitGathers {
    int64_t regathers = 0, bytes = 0, firstGather = 0;
  };
  llvm::StringMap<UnitGathers> units;
  /// Gathers of the function that gathers most: deeper prefetch than this
  /// minus one changes nothing.
  int64_t gathers = 0;
};

/// Gathers per unit after the front pipeline (collectives not yet lowered),
/// and the most any function issues.
llvm::StringMap<Candidate::UnitGathers> countGathers(ModuleOp module,
                                                     int64_t &mostGathers) {
  llvm::StringMap<Candidate::UnitGathers> units;
  for (UnitOp unit : module.getOps<UnitOp>())
    if (unit.isSharded())
      units[unit.getSymName()].bytes =
          getStaticBufferBytes(unit.getFlatType()).value_or(0);
  for (auto func : module.getOps<func::FuncOp>()) {
    llvm::StringMap<int64_t> counts;
    int64_t position = 0;
    func.walk([&](Operation *op) {
      ++position;
      FlatSymbolRefAttr ref;
      if (auto gather = dyn_cast<AllGatherOp>(op))
        ref = gather.getUnitAttr();
      else if (auto start = dyn_cast<AllGatherStartOp>(op))
        ref = start.getUnitAttr();
      else
        return;
      // A bucket gathers each of its units (the layout held here: iterating
      // a member of the temporary would read freed memory).
      std::optional<CollectiveLayout> layout = lookupCollectiveLayout(op, ref);
      for (UnitOp unit : layout->units)
        if (counts[unit.getSymName()]++ == 0)
          units[unit.getSymName()].firstGather = position;
    });
    int64_t total = 0;
    for (auto &[name, count] : counts) {
      units[name].regathers = std::max(units[name].regathers, count - 1);
      total += count;
    }
    mostGathers = std::max(mostGathers, total);
  }
  return units;
}

/// Compiles a copy of `module` under `options` with `schedule` up to its
/// memory plan. Fails if the copy does not compile or its plan is not
/// exact; diagnostics are dropped (the real compilation reports them).
FailureOr<Candidate> evaluate(ModuleOp module, const CompileOptions &options,
                              const Schedule &schedule,
                              const MachineModel &machine) {
  OwningOpRef<ModuleOp> copy(module.clone());
  MLIRContext *ctx = module.getContext();
  ScopedDiagnosticHandler quiet(ctx, [](Diagnostic &) { return success(); });
  FrontPipelineOptions front;
  front.copyOptionValuesFrom(options.front);
  applySchedule(front, schedule);
  // Candidates write no manifest (their pipelines stop before the report).
  front.manifest = "";
  PassManager frontPm(ctx);
  buildFrontPipeline(frontPm, front);
  if (failed(frontPm.run(*copy)))
    return failure();
  Candidate candidate;
  candidate.units = countGathers(*copy, candidate.gathers);
  PassManager lower(ctx);
  buildDescribePipeline(lower, options.lower);
  buildBufferizationPipeline(lower, options.lower);
  if (failed(lower.run(*copy)))
    return failure();
  // On a GPU the budget holds the arguments on the device too.
  bool deviceArguments = isDeviceTarget(options.lower.target);
  for (auto func : copy->getOps<func::FuncOp>()) {
    if (!isEntryPoint(func))
      continue;
    std::optional<MemoryPlan> plan =
        planFunctionMemory(func, getArenaAlignment(options.lower.target));
    if (!plan)
      return failure();
    candidate.heldBytes =
        std::max(candidate.heldBytes,
                 getBudgetedBytes(func, plan->getFootprint(), deviceArguments));
  }
  DeviceMesh mesh = getModuleMesh(*copy);
  for (auto func : copy->getOps<func::FuncOp>())
    if (isEntryPoint(func))
      candidate.stepUs = std::max(candidate.stepUs,
                                  estimateStepCost(func, machine, mesh).stepUs);
  return candidate;
}

/// The search for the fastest schedule under a budget.
class ScheduleSearch {
public:
  ScheduleSearch(ModuleOp module, const CompileOptions &options,
                 const MachineModel &machine)
      : module(module), options(options), machine(machine),
        budget(options.lower.memoryBudget),
        baseKeep(options.front.keepUnits.begin(),
                 options.front.keepUnits.end()) {}

  FailureOr<std::optional<Schedule>> run();

private:
  FailureOr<Candidate> tryCandidate(unsigned depth,
                                    std::vector<std::string> keep) {
    Schedule schedule{depth,          std::move(keep), {},          checkpoint,
                      checkpointMode, offload,         offloadUnits};
    return compileCandidate(schedule);
  }
  /// One candidate compiled up to its plan, counted.
  FailureOr<Candidate> compileCandidate(const Schedule &schedule) {
    ++compiled;
    return evaluate(module, options, schedule, machine);
  }
  LogicalResult reportInfeasible(const Candidate &lean);
  FailureOr<Candidate> fitLeanest(const Candidate &lean);
  std::optional<Candidate> checkpointToFit(const Candidate &lean);
  Candidate fewestOffloaded(const Candidate &all);
  size_t shortestFittingPrefix(size_t count, Candidate &fitting,
                               function_ref<void(size_t)> apply);
  void noteLeanest(const Candidate &candidate);
  std::optional<Candidate> fewestCheckpointed(ArrayRef<std::string> units,
                                              CheckpointMode mode,
                                              std::optional<Candidate> &all);
  void orderUnitsToKeep(const Candidate &lean);
  void chooseKeptUnits(unsigned depth, const FailureOr<Candidate> &base);
  std::vector<std::string> keepByBisection(unsigned depth, Candidate &current);
  void considerChoice(unsigned depth, const std::vector<std::string> &keep,
                      const Candidate &candidate);
  void deepenSingleUnits(const Candidate &lean, unsigned maxDepth);
  void printChoice() const;

  ModuleOp module;
  const CompileOptions &options;
  const MachineModel &machine;
  int64_t budget;
  std::vector<std::string> baseKeep;
  /// Units worth keeping, in the order they are tried.
  SmallVector<std::pair<std::string, Candidate::UnitGathers>> order;
  /// Units recomputing their forward in every candidate (none unless the
  /// leanest schedule without does not fit), and what they recompute.
  std::vector<std::string> checkpoint;
  CheckpointMode checkpointMode = CheckpointMode::Full;
  /// Offload in every candidate (none: as the user chose), where nothing
  /// fits without on a GPU, and of which units (empty: all).
  std::optional<OffloadMode> offload;
  std::vector<std::string> offloadUnits;
  /// What makes the leanest schedule fit (or the leanest there is): its
  /// figures, offload and checkpointing.
  struct Fit {
    Candidate candidate;
    std::optional<OffloadMode> offload;
    std::vector<std::string> offloadUnits;
    std::vector<std::string> checkpoint;
    CheckpointMode checkpointMode;
  };
  Fit current(const Candidate &candidate) const {
    return {candidate, offload, offloadUnits, checkpoint, checkpointMode};
  }
  void restore(const Fit &fit) {
    offload = fit.offload;
    offloadUnits = fit.offloadUnits;
    checkpoint = fit.checkpoint;
    checkpointMode = fit.checkpointMode;
  }
  std::optional<Fit> leanest;
  /// Where the leanest schedule did not fit: it, and it with what made it
  /// fit (offload, checkpointing), for the report of what they save and
  /// cost.
  std::optional<std::pair<Candidate, Candidate>> levers;
  /// The best schedule so far and its figures.
  std::optional<Schedule> best;
  Candidate bestCandidate;
  /// Schedules compiled so far (the search's cost).
  unsigned compiled = 0;
};

} // namespace

LogicalResult ScheduleSearch::reportInfeasible(const Candidate &lean) {
  ShardingStrategy strategy = options.front.strategy;
  return emitError(getModelDiagnosticLoc(module))
         << "--memory-budget=" << budget << " bytes is infeasible: the "
         << "leanest schedule (no prefetch, "
         << (strategy == ShardingStrategy::ShardGradOp ? "every unit kept"
             : strategy == ShardingStrategy::NoShard   ? "every unit replicated"
                                                     : "every unit re-gathered")
         << (checkpoint.empty()
                 ? ""
                 : (", every unit but the root recomputing its forward (" +
                    stringifyCheckpointMode(checkpointMode) + ")")
                       .str())
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

/// With `mode`, the fewest units of `units` (a prefix: the earliest in
/// forward first, whose activations live longest) that recompute their
/// forward for the leanest schedule to fit, found by bisection, and that
/// schedule; none if even all of them do not fit. `all` is the schedule
/// with all of them recomputing (none if it does not compile). Leaves
/// `checkpoint` and `checkpointMode` set to what it found.
std::optional<Candidate>
ScheduleSearch::fewestCheckpointed(ArrayRef<std::string> units,
                                   CheckpointMode mode,
                                   std::optional<Candidate> &all) {
  checkpointMode = mode;
  checkpoint.assign(units.begin(), units.end());
  FailureOr<Candidate> everyUnit = tryCandidate(0, baseKeep);
  all = succeeded(everyUnit) ? std::optional<Candidate>(*everyUnit)
                             : std::nullopt;
  if (!all || all->heldBytes > budget)
    return std::nullopt;
  Candidate fitting = *all;
  size_t fewest = shortestFittingPrefix(units.size(), fitting, [&](size_t n) {
    checkpoint.assign(units.begin(), units.begin() + n);
  });
  checkpoint.assign(units.begin(), units.begin() + fewest);
  return fitting;
}

/// The fewest `n` in [1, count] for which the candidate after `apply(n)`
/// fits, by bisection (`count` fits, with `fitting`'s figures, which are
/// replaced by those of the answer).
size_t ScheduleSearch::shortestFittingPrefix(size_t count, Candidate &fitting,
                                             function_ref<void(size_t)> apply) {
  size_t low = 0, high = count; // `high` fits, `low` does not
  while (low + 1 < high) {
    size_t mid = (low + high) / 2;
    apply(mid);
    FailureOr<Candidate> candidate = tryCandidate(0, baseKeep);
    if (succeeded(candidate) && candidate->heldBytes <= budget) {
      high = mid;
      fitting = *candidate;
    } else {
      low = mid;
    }
  }
  return high;
}

/// The leanest schedule `lean` does not fit: units recompute their forward,
/// the fewest that make it fit with selective checkpointing and with full,
/// and of the two the faster on the cost model (selective recomputes less
/// but does not always free less, so it may need more units). None where
/// neither fits or the user chose the checkpointing.
std::optional<Candidate>
ScheduleSearch::checkpointToFit(const Candidate &lean) {
  // The sharded units (the input has none yet: the lean candidate's), in
  // the order the forward gathers them.
  SmallVector<std::pair<int64_t, std::string>> gathered;
  for (auto &[name, gathers] : lean.units)
    if (name != "root")
      gathered.push_back({gathers.firstGather, name.str()});
  llvm::sort(gathered);
  std::vector<std::string> units;
  for (auto &[position, name] : gathered)
    units.push_back(name);
  if (options.front.activationCheckpointing != CheckpointMode::None ||
      units.empty())
    return std::nullopt;
  std::optional<Candidate> all;
  std::optional<Candidate> full =
      fewestCheckpointed(units, CheckpointMode::Full, all);
  std::vector<std::string> fullUnits = checkpoint;
  if (all) {
    checkpoint = units;
    noteLeanest(*all);
  }
  std::optional<Candidate> selective =
      fewestCheckpointed(units, CheckpointMode::Selective, all);
  if (all) {
    std::vector<std::string> fewest = checkpoint;
    checkpoint = units;
    noteLeanest(*all);
    checkpoint = fewest;
  }
  if (selective && (!full || selective->stepUs <= full->stepUs))
    return selective;
  checkpoint = fullUnits;
  checkpointMode = CheckpointMode::Full;
  return full;
}

/// Offloading every unit (`all`) fits: the fewest units that still fit,
/// the largest first (each saves its shard and state on the device, and
/// costs their transfers), found by bisection over how many; sets
/// `offloadUnits` (empty where all are needed) and returns their figures.
Candidate ScheduleSearch::fewestOffloaded(const Candidate &all) {
  SmallVector<std::pair<int64_t, std::string>> bySize;
  for (auto &[name, gathers] : all.units)
    bySize.push_back({-gathers.bytes, name.str()});
  llvm::sort(bySize);
  auto largest = [&](size_t n) {
    offloadUnits.clear();
    for (size_t i = 0; i < n; ++i)
      offloadUnits.push_back(bySize[i].second);
  };
  Candidate fitting = all;
  size_t fewest = shortestFittingPrefix(bySize.size(), fitting, largest);
  largest(fewest < bySize.size() ? fewest : 0); // none listed: all
  return fitting;
}

/// Remembers `candidate`, under the current offload and checkpointing, if it
/// is the leanest seen (for the error when nothing fits).
void ScheduleSearch::noteLeanest(const Candidate &candidate) {
  if (!leanest || candidate.heldBytes < leanest->candidate.heldBytes)
    leanest = current(candidate);
}

/// The leanest schedule `lean` does not fit. On a GPU with an optimizer
/// (unless the user chose the offload) offloading the optimizer, or the
/// parameters too, is weighed with checkpointing: for each, what fits
/// (checkpointing the fewest units if needed), and of those the fastest on
/// the cost model, which counts the host copies and the host's update.
/// Reports the budget infeasible, naming the leanest schedule there is,
/// where nothing fits.
FailureOr<Candidate> ScheduleSearch::fitLeanest(const Candidate &lean) {
  SmallVector<std::optional<OffloadMode>> modes = {std::nullopt};
  if (isDeviceTarget(options.lower.target) && options.front.hasOptimizer() &&
      options.front.offload == OffloadMode::None)
    modes = {std::nullopt, OffloadMode::Optimizer, OffloadMode::Params};
  leanest = current(lean);
  std::optional<Fit> fastest;
  for (std::optional<OffloadMode> mode : modes) {
    offload = mode;
    offloadUnits.clear();
    checkpoint.clear();
    FailureOr<Candidate> base = mode ? tryCandidate(0, baseKeep) : lean;
    if (failed(base))
      continue;
    noteLeanest(*base);
    std::optional<Candidate> fit;
    if (base->heldBytes <= budget)
      fit = mode ? fewestOffloaded(*base) : *base;
    else
      fit = checkpointToFit(*base);
    if (fit && (!fastest || fit->stepUs < fastest->candidate.stepUs))
      fastest = current(*fit);
  }
  if (!fastest) {
    restore(*leanest);
    (void)reportInfeasible(leanest->candidate);
    return failure();
  }
  restore(*fastest);
  levers = {lean, fastest->candidate};
  return fastest->candidate;
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
    best = Schedule{depth,          keep,    {},          checkpoint,
                    checkpointMode, offload, offloadUnits};
    bestCandidate = candidate;
  }
}

/// Many units (a deep stack of equal blocks): the longest prefix of the
/// order that fits and does not slow the step, by bisection.
std::vector<std::string> ScheduleSearch::keepByBisection(unsigned depth,
                                                         Candidate &current) {
  std::vector<std::string> keep = baseKeep;
  size_t low = 0, high = order.size(); // a prefix of `high` does not fit
  while (low + 1 < high) {
    size_t mid = (low + high) / 2;
    std::vector<std::string> prefix = baseKeep;
    for (size_t i = 0; i < mid; ++i)
      prefix.push_back(order[i].first);
    FailureOr<Candidate> kept = tryCandidate(depth, prefix);
    if (succeeded(kept) && kept->heldBytes <= budget &&
        kept->stepUs <= current.stepUs) {
      low = mid;
      keep = std::move(prefix);
      current = *kept;
    } else {
      high = mid;
    }
  }
  return keep;
}

/// At `depth`, whose schedule without kept units is `base` (which fits),
/// keeps greedily what fits and does not slow the step.
void ScheduleSearch::chooseKeptUnits(unsigned depth,
                                     const FailureOr<Candidate> &base) {
  std::vector<std::string> keep = baseKeep;
  Candidate current = *base;
  auto fits = [&](const FailureOr<Candidate> &kept) {
    return succeeded(kept) && kept->heldBytes <= budget &&
           kept->stepUs <= current.stepUs;
  };
  std::vector<std::string> all = baseKeep;
  for (auto &[name, gathers] : order)
    all.push_back(name);
  FailureOr<Candidate> everything =
      order.empty() ? base : tryCandidate(depth, all);
  if (fits(everything))
    return considerChoice(depth, all, *everything);
  if (order.size() > kGreedyUnits) {
    keep = keepByBisection(depth, current);
    return considerChoice(depth, keep, current);
  }
  for (auto &[name, gathers] : order) {
    std::vector<std::string> more = keep;
    more.push_back(name);
    FailureOr<Candidate> kept = tryCandidate(depth, more);
    if (fits(kept)) {
      keep = std::move(more);
      current = *kept;
    }
  }
  considerChoice(depth, keep, current);
}

/// Per-unit depths (DeepCompile's adaptive prefetch): below the deepest
/// allowed, raises one unit's depth at a time, the largest gathers first,
/// keeping each raise that fits and makes the step faster by 1% or more.
/// Units of a stack gather the same bytes: once raising one of them does
/// not pay, the others of that size are not tried (32 decoder layers cost
/// one compilation, not 16).
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
  llvm::DenseSet<int64_t> unpaidSizes;
  for (auto &[name, gathers] : byBytes) {
    if (unpaidSizes.contains(gathers.bytes))
      continue;
    Schedule raised = *best;
    raised.unitPrefetch.push_back(name + ":" +
                                  std::to_string(best->prefetch + 1));
    FailureOr<Candidate> candidate = compileCandidate(raised);
    // At least 1% faster: the model's noise does not pick schedules.
    if (succeeded(candidate) && candidate->heldBytes <= budget &&
        candidate->stepUs < 0.99 * bestCandidate.stepUs) {
      best = std::move(raised);
      bestCandidate = *candidate;
    } else {
      unpaidSizes.insert(gathers.bytes);
    }
  }
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
    llvm::outs() << ", recomputed units ("
                 << stringifyCheckpointMode(best->checkpointMode)
                 << "): " << llvm::join(best->checkpointUnits, " ");
  llvm::outs() << llvm::formatv(
      " (predicted {0:f3} ms per call; {1} schedules compiled)\n",
      bestCandidate.stepUs / 1e3, compiled);
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
}

FailureOr<std::optional<Schedule>> ScheduleSearch::run() {
  // The leanest schedule: no prefetch, only the units the user keeps.
  FailureOr<Candidate> lean = tryCandidate(0, baseKeep);
  // The model does not compile, or its plan is not exact: the real
  // compilation reports why (zest-plan-memory refuses a budget it cannot
  // check), with the leanest schedule.
  if (failed(lean))
    return std::optional<Schedule>(Schedule{0, baseKeep, {}, {}});
  if (lean->heldBytes > budget) {
    lean = fitLeanest(*lean);
    if (failed(lean))
      return failure();
  }
  // Beyond one less than the step's gathers, every depth is the same
  // schedule.
  unsigned maxDepth = std::min<int64_t>(
      options.front.prefetch, std::max<int64_t>(lean->gathers - 1, 0));
  orderUnitsToKeep(*lean);
  for (unsigned depth = 0; depth <= maxDepth; ++depth) {
    FailureOr<Candidate> base =
        depth == 0 ? lean : tryCandidate(depth, baseKeep);
    if (failed(base) || base->heldBytes > budget)
      break; // deeper prefetch holds more
    chooseKeptUnits(depth, base);
  }
  deepenSingleUnits(*lean, maxDepth);
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
