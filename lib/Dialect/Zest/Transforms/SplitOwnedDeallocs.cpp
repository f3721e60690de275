//===- SplitOwnedDeallocs.cpp - Free owned allocations without analysis ---===//
//
// Ownership-based deallocation puts every allocation of a block into one
// `bufferization.dealloc` at its end; buffer-deallocation-simplification
// then compares each pair of its memrefs for aliasing, quadratic in the size
// of a training step (9.5 of 30 s for 96 blocks). Distinct `memref.alloc`
// results never alias, so an allocation owned unconditionally becomes a
// plain `memref.dealloc` here, and the simplification sees what is left.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::zest {
#define GEN_PASS_DEF_SPLITOWNEDDEALLOCSPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;

/// The allocation or entry-block argument `value` is a view of, or null
/// when it cannot be told (a region argument, a call result, ...).
static Value getRoot(Value value) {
  while (Operation *producer = value.getDefiningOp()) {
    if (isa<memref::AllocOp>(producer))
      return value;
    auto view = dyn_cast<ViewLikeOpInterface>(producer);
    if (!view)
      return nullptr;
    value = view.getViewSource();
  }
  auto arg = cast<BlockArgument>(value);
  return arg.getOwner()->isEntryBlock() &&
                 isa<FunctionOpInterface>(arg.getOwner()->getParentOp())
             ? value
             : nullptr;
}

/// Splits the unconditionally owned allocations out of `dealloc`.
static void splitOwned(bufferization::DeallocOp dealloc) {
  // With retained values the op also computes their ownership: leave it.
  if (!dealloc.getRetained().empty())
    return;
  llvm::SmallPtrSet<Value, 16> otherRoots;
  llvm::SetVector<Value> owned;
  for (auto [memref, condition] :
       llvm::zip(dealloc.getMemrefs(), dealloc.getConditions())) {
    if (memref.getDefiningOp<memref::AllocOp>() &&
        matchPattern(condition, m_One())) {
      owned.insert(memref);
      continue;
    }
    Value root = getRoot(memref);
    if (!root)
      return; // might alias anything
    otherRoots.insert(root);
  }
  // An allocation another entry is a view of stays: the op frees it once.
  SmallVector<Value> split;
  for (Value memref : owned)
    if (!otherRoots.contains(memref))
      split.push_back(memref);
  if (split.empty())
    return;
  OpBuilder builder(dealloc);
  SmallVector<Value> memrefs, conditions;
  for (auto [memref, condition] :
       llvm::zip(dealloc.getMemrefs(), dealloc.getConditions()))
    if (!llvm::is_contained(split, memref)) {
      memrefs.push_back(memref);
      conditions.push_back(condition);
    }
  for (Value memref : split)
    memref::DeallocOp::create(builder, dealloc.getLoc(), memref);
  if (!memrefs.empty())
    bufferization::DeallocOp::create(builder, dealloc.getLoc(), memrefs,
                                     conditions, ValueRange{});
  dealloc.erase();
}

namespace {
struct SplitOwnedDeallocsPass
    : public zest::impl::SplitOwnedDeallocsPassBase<SplitOwnedDeallocsPass> {
  void runOnOperation() override {
    SmallVector<bufferization::DeallocOp> deallocs;
    getOperation().walk(
        [&](bufferization::DeallocOp op) { deallocs.push_back(op); });
    for (bufferization::DeallocOp dealloc : deallocs)
      splitOwned(dealloc);
  }
};
} // namespace
