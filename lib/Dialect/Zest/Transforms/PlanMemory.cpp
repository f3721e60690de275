//===- PlanMemory.cpp - Static peak memory of each entry point ------------===//
//
// Replays the allocations and frees of each step in program order, as the
// runtime's pool counts them. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/Passes.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"

namespace mlir::zest {
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

namespace {

/// The pool hands out 64-byte buckets (runtime/common/Runtime.cpp).
constexpr int64_t kPoolBucket = 64;

/// What the pool will hold at the peaks of one function.
struct MemoryPlan {
  int64_t peakPool = 0, peakGathered = 0;
  Operation *peakPoolAt = nullptr, *peakGatheredAt = nullptr;
};

/// The allocation a pointer or view derives from, through views and the
/// address arithmetic of a runtime call's pointer (aligned pointer + offset,
/// cast to i64, then to a pointer); null if none.
memref::AllocOp getAllocation(Value value) {
  while (Operation *def = value.getDefiningOp()) {
    if (auto alloc = dyn_cast<memref::AllocOp>(def))
      return alloc;
    if (auto view = dyn_cast<ViewLikeOpInterface>(def))
      value = view.getViewSource();
    else if (auto pointer =
                 dyn_cast<memref::ExtractAlignedPointerAsIndexOp>(def))
      value = pointer.getSource();
    else if (isa<LLVM::IntToPtrOp, arith::IndexCastOp, arith::AddIOp>(def))
      value = def->getOperand(0); // the address, not the offset
    else
      return {};
  }
  return {};
}

/// Bytes of a static allocation's elements, or nothing.
std::optional<int64_t> getBufferBytes(memref::AllocOp alloc) {
  MemRefType type = alloc.getType();
  if (!type.hasStaticShape() || !type.getElementType().isIntOrFloat())
    return std::nullopt;
  int64_t bits = type.getElementType().getIntOrFloatBitWidth();
  return type.getNumElements() * ((bits + 7) / 8);
}

/// Bytes the pool hands out for `alloc`: finalize-memref-to-llvm asks for
/// the buffer plus its alignment (to align it by hand), and the pool rounds
/// requests up to whole buckets.
std::optional<int64_t> getPoolBytes(memref::AllocOp alloc) {
  std::optional<int64_t> bytes = getBufferBytes(alloc);
  if (!bytes)
    return std::nullopt;
  int64_t requested =
      std::max<int64_t>(1, *bytes + alloc.getAlignment().value_or(0));
  return (requested + kPoolBucket - 1) / kPoolBucket * kPoolBucket;
}

/// The pool as a replay goes: live buffers, running sums and peaks.
struct Replay {
  int64_t pool = 0, gathered = 0;
  DenseMap<Operation *, int64_t> live;    // allocation -> pool bytes
  DenseMap<Operation *, int64_t> gathers; // allocation -> gathered bytes
  MemoryPlan plan;

  void raise(Operation *at) {
    if (pool > plan.peakPool) {
      plan.peakPool = pool;
      plan.peakPoolAt = at;
    }
    if (gathered > plan.peakGathered) {
      plan.peakGathered = gathered;
      plan.peakGatheredAt = at;
    }
  }
};

/// Replays `block` in program order; fails if it cannot be replayed exactly
/// (a dynamic allocation, a free of something it did not allocate, a nested
/// region that does not free what it allocates).
LogicalResult replay(Block &block, Replay &state) {
  for (Operation &op : block) {
    if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
      std::optional<int64_t> bytes = getPoolBytes(alloc);
      if (!bytes)
        return failure();
      state.live[alloc] = *bytes;
      state.pool += *bytes;
      state.raise(alloc);
    } else if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
      memref::AllocOp alloc = getAllocation(dealloc.getMemref());
      if (!alloc || !state.live.contains(alloc))
        return failure();
      state.pool -= state.live.lookup(alloc);
      state.live.erase(alloc);
      state.gathered -= state.gathers.lookup(alloc);
      state.gathers.erase(alloc);
    } else if (auto call = dyn_cast<func::CallOp>(op)) {
      if (call.getCallee() != "zest_pool_mark_gathered")
        continue;
      memref::AllocOp alloc = getAllocation(call.getOperand(0));
      if (!alloc || state.gathers.contains(alloc))
        continue;
      int64_t bytes = getBufferBytes(alloc).value_or(0);
      state.gathers[alloc] = bytes;
      state.gathered += bytes;
      state.raise(call);
    } else if (op.getNumRegions() > 0) {
      // Branches and loop bodies that free what they allocate: the peak is
      // the highest any of them reaches from here, and the pool is back
      // where it was after them.
      for (Region &region : op.getRegions()) {
        if (region.empty())
          continue;
        if (!region.hasOneBlock())
          return failure();
        Replay inner = state;
        if (failed(replay(region.front(), inner)) || inner.pool != state.pool ||
            inner.gathered != state.gathered)
          return failure();
        state.plan = inner.plan;
      }
    }
  }
  return success();
}

/// Replays `func`'s body; nothing if it cannot be replayed exactly.
std::optional<MemoryPlan> planFunction(func::FuncOp func) {
  Replay state;
  if (!func.getBody().hasOneBlock() ||
      failed(replay(func.getBody().front(), state)))
    return std::nullopt;
  return state.plan;
}

std::string describe(Operation *op) {
  if (!op)
    return "";
  std::string text;
  llvm::raw_string_ostream os(text);
  os << op->getName() << " at " << op->getLoc();
  return text;
}

struct PlanMemoryPass : public zest::impl::PlanMemoryPassBase<PlanMemoryPass> {
  using Base::Base;

  static void printPlan(StringRef name, const std::optional<MemoryPlan> &plan) {
    llvm::raw_ostream &os = llvm::outs();
    os << "memory plan: " << name << ": ";
    if (!plan) {
      os << "not predicted (allocations the plan cannot replay exactly)\n";
      return;
    }
    os << "peak pool bytes per rank " << plan->peakPool;
    if (plan->peakPoolAt)
      os << " (" << describe(plan->peakPoolAt) << ")";
    os << ", peak gathered parameter bytes per rank " << plan->peakGathered;
    if (plan->peakGatheredAt)
      os << " (" << describe(plan->peakGatheredAt) << ")";
    os << "\n";
  }

  void runOnOperation() override {
    markAllAnalysesPreserved();
    if (reportJson.empty() && !reportText)
      return;
    ModuleOp module = getOperation();
    llvm::json::Array functions;
    int64_t topPool = 0, topGathered = 0;
    bool allExact = true;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal() || func.isPrivate())
        continue;
      std::optional<MemoryPlan> plan = planFunction(func);
      if (reportText)
        printPlan(func.getSymName(), plan);
      llvm::json::Object entry{{"name", func.getSymName()}};
      if (plan) {
        entry["predicted_peak_pool_bytes"] = plan->peakPool;
        entry["predicted_peak_gathered_bytes"] = plan->peakGathered;
        entry["peak_pool_at"] = describe(plan->peakPoolAt);
        entry["peak_gathered_at"] = describe(plan->peakGatheredAt);
        topPool = std::max(topPool, plan->peakPool);
        topGathered = std::max(topGathered, plan->peakGathered);
      } else {
        entry["predicted_peak_pool_bytes"] = nullptr;
        entry["predicted_peak_gathered_bytes"] = nullptr;
        allExact = false;
      }
      functions.push_back(std::move(entry));
    }
    if (reportJson.empty())
      return;
    llvm::json::Object report{{"functions", std::move(functions)}};
    if (allExact) {
      report["predicted_peak_pool_bytes"] = topPool;
      report["predicted_peak_gathered_bytes"] = topGathered;
    } else {
      report["predicted_peak_pool_bytes"] = nullptr;
      report["predicted_peak_gathered_bytes"] = nullptr;
    }
    std::string error;
    std::unique_ptr<llvm::ToolOutputFile> file =
        openOutputFile(reportJson, &error);
    if (!file) {
      emitError(module.getLoc())
          << "cannot write report '" << reportJson << "': " << error;
      return signalPassFailure();
    }
    file->os() << llvm::formatv("{0:2}", llvm::json::Value(std::move(report)))
               << "\n";
    file->keep();
  }
};
} // namespace
