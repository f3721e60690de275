//===- CloneSharedFills.cpp - One fill per op that writes it --------------===//
//
// A fill shared by several destinations bufferizes into one filled buffer
// copied into each; a fill per destination writes each in place.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"

namespace mlir::zest {
#define GEN_PASS_DEF_CLONESHAREDFILLSPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

namespace {

/// The uses of `fill`'s result as the destination of a linalg op.
static SmallVector<OpOperand *> getDestinationUses(linalg::FillOp fill) {
  SmallVector<OpOperand *> uses;
  for (OpOperand &use : fill->getResult(0).getUses()) {
    auto user = dyn_cast<linalg::LinalgOp>(use.getOwner());
    if (user && user.isDpsInit(&use))
      uses.push_back(&use);
  }
  return uses;
}

/// Gives each destination use of `fill` a clone of it, right before the
/// user; erases `fill` if nothing else reads it.
static void cloneForEachDestination(linalg::FillOp fill) {
  SmallVector<OpOperand *> uses = getDestinationUses(fill);
  if (uses.empty() || fill->getResult(0).hasOneUse())
    return;
  OpBuilder builder(fill);
  for (OpOperand *use : uses) {
    builder.setInsertionPoint(use->getOwner());
    use->set(builder.clone(*fill)->getResult(0));
  }
  if (fill->use_empty())
    fill->erase();
}

struct CloneSharedFillsPass
    : public zest::impl::CloneSharedFillsPassBase<CloneSharedFillsPass> {
  void runOnOperation() override {
    SmallVector<linalg::FillOp> fills;
    getOperation().walk([&](linalg::FillOp fill) {
      if (fill.hasPureTensorSemantics())
        fills.push_back(fill);
    });
    for (linalg::FillOp fill : fills)
      cloneForEachDestination(fill);
  }
};

} // namespace
