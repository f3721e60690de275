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

#include "zest/Dialect/Zest/IR/ZestOps.h"
#include "zest/Dialect/Zest/Transforms/CostModel.h"
#include "zest/Dialect/Zest/Transforms/MemoryPlan.h"
#include "zest/Driver/Compiler.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/ScopeExit.h"
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
  /// Predicted peak pool bytes per rank, and time of the slowest entry
  /// point.
  int64_t peakPool = 0;
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
      // A bucket gathers each of its units.
      for (UnitOp unit : lookupCollectiveLayout(op, ref)->units)
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

/// Compiles a copy of `module` under `options`' schedule up to its memory
/// plan. Fails if the copy does not compile or its plan is not exact;
/// diagnostics are dropped (the real compilation reports them).
FailureOr<Candidate> evaluate(ModuleOp module, const CompileOptions &options,
                              const MachineModel &machine) {
  OwningOpRef<ModuleOp> copy(module.clone());
  MLIRContext *ctx = module.getContext();
  ScopedDiagnosticHandler quiet(ctx, [](Diagnostic &) { return success(); });
  PassManager front(ctx);
  buildFrontPipeline(front, options);
  if (failed(front.run(*copy)))
    return failure();
  Candidate candidate;
  candidate.units = countGathers(*copy, candidate.gathers);
  for (auto func : copy->getOps<func::FuncOp>())
    stripRoleAttributes(func, options.outlineRegions);
  PassManager lower(ctx);
  buildBufferizationPipeline(lower, options);
  if (failed(lower.run(*copy)))
    return failure();
  std::optional<MemoryPlan> plan = planModuleMemory(*copy);
  if (!plan)
    return failure();
  candidate.peakPool = plan->peakPool;
  DeviceMesh mesh = getModuleMesh(*copy);
  for (auto func : copy->getOps<func::FuncOp>())
    if (!func.isExternal() && func.isPublic())
      candidate.stepUs = std::max(candidate.stepUs,
                                  estimateStepCost(func, machine, mesh).stepUs);
  return candidate;
}

} // namespace

LogicalResult mlir::zest::chooseSchedule(ModuleOp module,
                                         CompileOptions &options) {
  int64_t budget = options.memoryBudget;
  if (budget <= 0)
    return success();
  // Candidates write no manifest (their pipelines stop before the report).
  std::string manifest = options.shard.manifest;
  options.shard.manifest = "";
  auto restore =
      llvm::make_scope_exit([&] { options.shard.manifest = manifest; });

  // The machine the candidates are timed on: the report's, else this one.
  std::string error;
  std::optional<MachineModel> machine =
      getMachineModel(options.machine.empty() ? "cpu" : options.machine,
                      options.link, options.replicaLink, error);
  if (!machine)
    return emitError(module.getLoc()) << error;

  unsigned maxDepth = options.prefetch;
  std::vector<std::string> baseKeep = options.keepUnits;
  auto tryCandidate =
      [&](unsigned depth,
          std::vector<std::string> keep) -> FailureOr<Candidate> {
    options.prefetch = depth;
    options.keepUnits = std::move(keep);
    return evaluate(module, options, *machine);
  };

  // The leanest schedule: no prefetch, only the units the user keeps.
  FailureOr<Candidate> lean = tryCandidate(0, baseKeep);
  if (failed(lean)) {
    // The model does not compile, or its plan is not exact: the real
    // compilation reports why (zest-plan-memory refuses a budget it cannot
    // check), with the schedule as given.
    options.prefetch = 0;
    options.keepUnits = baseKeep;
    return success();
  }
  if (lean->peakPool > budget)
    return emitError(module.getLoc())
           << "--memory-budget=" << budget << " bytes is infeasible: the "
           << "leanest schedule (no prefetch, "
           << (options.shard.strategy == "shard-grad-op" ? "every unit kept"
               : options.shard.strategy == "no-shard"
                   ? "every unit replicated"
                   : "every unit re-gathered")
           << ") peaks at " << lean->peakPool << " pool bytes per rank; "
           << "the smallest feasible budget is --memory-budget="
           << lean->peakPool;

  // Beyond one less than the step's gathers, every depth is the same
  // schedule.
  maxDepth =
      std::min<int64_t>(maxDepth, std::max<int64_t>(lean->gathers - 1, 0));

  // Units worth keeping, most re-gathered bytes saved first; among equals
  // the one gathered last in forward, whose kept buffer lives the shortest.
  SmallVector<std::pair<std::string, Candidate::UnitGathers>> order;
  for (auto &[name, gathers] : lean->units)
    if (gathers.regathers > 0 && !llvm::is_contained(baseKeep, name.str()))
      order.push_back({name.str(), gathers});
  llvm::sort(order, [](const auto &a, const auto &b) {
    int64_t savedA = a.second.regathers * a.second.bytes;
    int64_t savedB = b.second.regathers * b.second.bytes;
    if (savedA != savedB)
      return savedA > savedB;
    return a.second.firstGather > b.second.firstGather;
  });

  // At each depth that fits, keep greedily what fits and does not slow the
  // step; the fastest (then the leanest) of these schedules wins.
  struct Choice {
    unsigned depth;
    std::vector<std::string> keep;
    Candidate candidate;
  };
  std::optional<Choice> best;
  auto consider = [&](unsigned depth, const std::vector<std::string> &keep,
                      const Candidate &candidate) {
    if (!best || candidate.stepUs < best->candidate.stepUs ||
        (candidate.stepUs == best->candidate.stepUs &&
         candidate.peakPool < best->candidate.peakPool))
      best = Choice{depth, keep, candidate};
  };
  std::vector<std::string> all = baseKeep;
  for (auto &[name, gathers] : order)
    all.push_back(name);
  for (unsigned depth = 0; depth <= maxDepth; ++depth) {
    FailureOr<Candidate> base =
        depth == 0 ? lean : tryCandidate(depth, baseKeep);
    if (failed(base) || base->peakPool > budget)
      break; // deeper prefetch holds more
    std::vector<std::string> keep = baseKeep;
    Candidate current = *base;
    auto fits = [&](const FailureOr<Candidate> &kept) {
      return succeeded(kept) && kept->peakPool <= budget &&
             kept->stepUs <= current.stepUs;
    };
    FailureOr<Candidate> everything =
        order.empty() ? base : tryCandidate(depth, all);
    if (fits(everything)) {
      consider(depth, all, *everything);
      continue;
    }
    if (order.size() <= kGreedyUnits) {
      for (auto &[name, gathers] : order) {
        std::vector<std::string> more = keep;
        more.push_back(name);
        FailureOr<Candidate> kept = tryCandidate(depth, more);
        if (fits(kept)) {
          keep = std::move(more);
          current = *kept;
        }
      }
    } else {
      // Many units (a deep stack of equal blocks): the longest prefix of
      // the order that fits, by bisection.
      size_t low = 0, high = order.size(); // a prefix of `high` does not fit
      while (low + 1 < high) {
        size_t mid = (low + high) / 2;
        std::vector<std::string> prefix = baseKeep;
        for (size_t i = 0; i < mid; ++i)
          prefix.push_back(order[i].first);
        FailureOr<Candidate> kept = tryCandidate(depth, prefix);
        if (fits(kept)) {
          low = mid;
          keep = std::move(prefix);
          current = *kept;
        } else {
          high = mid;
        }
      }
    }
    consider(depth, keep, current);
  }
  options.prefetch = best->depth;
  options.keepUnits = best->keep;

  // Per-unit depths (DeepCompile's adaptive prefetch): below the deepest
  // allowed, raise one unit's depth at a time, the largest gathers first,
  // keeping each raise that fits and makes the step faster by 1% or more.
  std::vector<std::string> deeper;
  if (best->depth < maxDepth) {
    SmallVector<std::pair<std::string, Candidate::UnitGathers>> byBytes;
    for (auto &[name, gathers] : lean->units)
      byBytes.push_back({name.str(), gathers});
    llvm::sort(byBytes, [](const auto &a, const auto &b) {
      if (a.second.bytes != b.second.bytes)
        return a.second.bytes > b.second.bytes;
      return a.second.firstGather < b.second.firstGather;
    });
    if (byBytes.size() > kGreedyUnits)
      byBytes.resize(kGreedyUnits);
    for (auto &[name, gathers] : byBytes) {
      std::vector<std::string> more = deeper;
      more.push_back(name + ":" + std::to_string(best->depth + 1));
      options.unitPrefetch = more;
      FailureOr<Candidate> raised = evaluate(module, options, *machine);
      // At least 1% faster: the model's noise does not pick schedules.
      if (succeeded(raised) && raised->peakPool <= budget &&
          raised->stepUs < 0.99 * best->candidate.stepUs) {
        deeper = std::move(more);
        best->candidate = *raised;
      }
    }
  }
  options.unitPrefetch = deeper;
  if (options.reportText) {
    llvm::outs() << "schedule under --memory-budget=" << budget << ": prefetch "
                 << best->depth;
    if (!deeper.empty())
      llvm::outs() << " (deeper: " << llvm::join(deeper, ", ") << ")";
    llvm::outs() << ", kept units:";
    for (const std::string &unit : best->keep)
      llvm::outs() << " " << unit;
    if (best->keep.empty())
      llvm::outs() << " none";
    llvm::outs() << llvm::formatv(" (predicted {0:f3} ms per call)\n",
                                  best->candidate.stepUs / 1e3);
  }
  return success();
}
