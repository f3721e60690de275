//===- CloneSharedFills.cpp - One fill per op that writes it --------------===//
//
// A fill shared by several destinations bufferizes into one filled buffer
// copied into each; a fill per destination writes each in place. Likewise a
// splat constant a loop writes into would be copied from a global.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/Passes.h"
#include "zest/Dialect/Zest/Transforms/Transforms.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"

namespace mlir::zest {
#define GEN_PASS_DEF_CLONESHAREDFILLSPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

Value mlir::zest::createFillOfSplat(OpBuilder &builder, Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  SplatElementsAttr splat;
  if (!type || !type.hasStaticShape() ||
      !matchPattern(value, m_Constant(&splat)))
    return {};
  Location loc = value.getLoc();
  Value scalar = arith::ConstantOp::create(
      builder, loc, cast<TypedAttr>(splat.getSplatValue<Attribute>()));
  Value empty = tensor::EmptyOp::create(builder, loc, type.getShape(),
                                        type.getElementType());
  return linalg::FillOp::create(builder, loc, scalar, empty).getResult(0);
}

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

/// Starts each of `loop`'s iteration arguments that begins as a splat
/// constant from a fill of an empty tensor instead.
static void fillSplatLoopInits(scf::ForOp loop) {
  OpBuilder builder(loop);
  for (OpOperand &init : loop.getInitArgsMutable()) {
    Value constant = init.get();
    Value fill = createFillOfSplat(builder, constant);
    if (!fill)
      continue;
    init.set(fill);
    if (constant.use_empty())
      constant.getDefiningOp()->erase();
  }
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
    SmallVector<scf::ForOp> loops;
    getOperation().walk([&](scf::ForOp loop) { loops.push_back(loop); });
    for (scf::ForOp loop : loops)
      fillSplatLoopInits(loop);
  }
};

} // namespace
