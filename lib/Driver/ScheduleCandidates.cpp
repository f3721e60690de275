//===- ScheduleCandidates.cpp - Schedules compiled to their plans ---------===//
//
// A candidate's peak is exact because it is the plan of the program the
// schedule compiles to; what the search can save is how often the model is
// compiled, so sharding runs once and candidates compile concurrently.
//
//===----------------------------------------------------------------------===//

#include "ScheduleCandidates.h"

#include "zest/Conversion/ModelDescriptor.h"
#include "zest/Dialect/Zest/IR/ZestOps.h"
#include "zest/Dialect/Zest/Transforms/MemoryPlan.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Threading.h"

#include <mutex>

using namespace mlir;
using namespace mlir::zest;

/// Gathers per unit after the front pipeline (collectives not yet lowered),
/// and the most any function issues.
static llvm::StringMap<Candidate::UnitGathers>
countGathers(ModuleOp module, int64_t &mostGathers) {
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

/// The held bytes and step time of the slowest entry point of `module`,
/// bufferized; failure where a plan is not exact.
static LogicalResult measurePlans(ModuleOp module,
                                  const CompileOptions &options,
                                  const MachineModel &machine,
                                  Candidate &candidate) {
  // On a GPU the budget holds the arguments on the device too.
  bool deviceArguments = isDeviceTarget(options.lower.target);
  DeviceMesh mesh = getModuleMesh(module);
  for (auto func : module.getOps<func::FuncOp>()) {
    if (!isEntryPoint(func))
      continue;
    std::optional<MemoryPlan> plan =
        planFunctionMemory(func, getArenaAlignment(options.lower.target));
    if (!plan)
      return failure();
    candidate.heldBytes =
        std::max(candidate.heldBytes,
                 getBudgetedBytes(func, plan->getFootprint(), deviceArguments));
    candidate.stepUs = std::max(candidate.stepUs,
                                estimateStepCost(func, machine, mesh).stepUs);
  }
  return success();
}

CandidateCompiler::CandidateCompiler(ModuleOp module,
                                     const CompileOptions &options,
                                     const MachineModel &machine)
    : module(module), options(options), machine(machine) {}

LogicalResult CandidateCompiler::shard() {
  MLIRContext *ctx = module.getContext();
  ScopedDiagnosticHandler quiet(ctx, [](Diagnostic &) { return success(); });
  sharded = module.clone();
  FrontPipelineOptions front;
  front.copyOptionValuesFrom(options.front);
  // Candidates write no manifest (the real compilation does).
  front.manifest = "";
  PassManager pm(ctx);
  buildShardPipeline(pm, front);
  return pm.run(*sharded);
}

FailureOr<Candidate> CandidateCompiler::evaluate(const Schedule &schedule) {
  OwningOpRef<ModuleOp> copy;
  {
    // Cloning a region may point a copy's operands at the original's values
    // before remapping them, which edits the original's use lists.
    std::lock_guard<std::mutex> lock(cloning);
    copy = sharded->clone();
  }
  MLIRContext *ctx = module.getContext();
  FrontPipelineOptions front;
  front.copyOptionValuesFrom(options.front);
  applySchedule(front, schedule);
  // The real compilation verifies the chosen schedule's passes; verifying a
  // production-size module after every pass of every candidate would cost
  // a fifth of the search.
  PassManager frontPm(ctx);
  frontPm.enableVerifier(false);
  buildSchedulePipeline(frontPm, front);
  if (failed(frontPm.run(*copy)))
    return failure();
  Candidate candidate;
  candidate.units = countGathers(*copy, candidate.gathers);
  for (UnitOp unit : copy->getOps<UnitOp>())
    if (unit->hasAttr(ZestDialect::kCheckpointAttrName))
      candidate.recomputed.insert(unit.getSymName());
  PassManager lower(ctx);
  lower.enableVerifier(false);
  buildDescribePipeline(lower, options.lower);
  buildBufferizationPipeline(lower, options.lower);
  if (failed(lower.run(*copy)) ||
      failed(measurePlans(*copy, options, machine, candidate)))
    return failure();
  return candidate;
}

SmallVector<FailureOr<Candidate>>
CandidateCompiler::compile(ArrayRef<Schedule> schedules) {
  compiled += schedules.size();
  SmallVector<FailureOr<Candidate>> candidates(schedules.size(), failure());
  MLIRContext *ctx = module.getContext();
  ScopedDiagnosticHandler quiet(ctx, [](Diagnostic &) { return success(); });
  // Each candidate is an independent copy; the context is shared, as by a
  // pass manager's parallel nested pipelines.
  parallelFor(ctx, 0, schedules.size(),
              [&](size_t i) { candidates[i] = evaluate(schedules[i]); });
  return candidates;
}
