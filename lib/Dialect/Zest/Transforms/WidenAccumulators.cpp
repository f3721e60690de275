//===- WidenAccumulators.cpp - 16-bit sums accumulate in f32 --------------===//
//
// torch-mlir writes a sum of a bf16 (or f16) tensor, a bias's gradient under
// autocast, as a reduction whose accumulator is bf16: every addition rounds
// to 8 bits of mantissa, and over 4096 rows the sum is off by about 5%.
// PyTorch accumulates such sums in f32 and rounds once; so does Zest after
// this pass. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/ElementwiseFusion.h"
#include "zest/Dialect/Zest/Transforms/Passes.h"
#include "zest/Dialect/Zest/Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::zest {
#define GEN_PASS_DEF_WIDENACCUMULATORSPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

namespace {

/// The addition `op` (a reduction into one 16-bit float tensor) yields if
/// it is a sum: `out + x` or `x + out` with `out` read nowhere else.
arith::AddFOp getNarrowSum(linalg::GenericOp op) {
  if (!op.hasPureTensorSemantics() || op.getNumReductionLoops() == 0 ||
      op.getNumDpsInits() != 1)
    return nullptr;
  auto type =
      dyn_cast<FloatType>(getElementTypeOrSelf(op.getDpsInits()[0].getType()));
  if (!type || !(type.isBF16() || type.isF16()))
    return nullptr;
  BlockArgument out = op.getMatchingBlockArgument(op.getDpsInitOperand(0));
  auto add = op.getBody()
                 ->getTerminator()
                 ->getOperand(0)
                 .getDefiningOp<arith::AddFOp>();
  if (!add || add->getBlock() != op.getBody() || !out.hasOneUse() ||
      (add.getLhs() != out && add.getRhs() != out))
    return nullptr;
  return add;
}

/// `init` in f32: a fill of a constant stays a fill (of the widened
/// constant), anything else is widened element by element.
Value widenInit(OpBuilder &builder, Location loc, Value init,
                RankedTensorType wide) {
  auto fill = init.getDefiningOp<linalg::FillOp>();
  FloatAttr value;
  if (fill && matchPattern(fill.getInputs()[0], m_Constant(&value))) {
    Value constant = arith::ConstantOp::create(
        builder, loc,
        builder.getFloatAttr(wide.getElementType(), value.getValueAsDouble()));
    Value empty = tensor::EmptyOp::create(builder, loc, wide.getShape(),
                                          wide.getElementType());
    return linalg::FillOp::create(builder, loc, constant, empty).getResult(0);
  }
  return convertElements(builder, loc, init, wide.getElementType());
}

/// A 16-bit sum as an f32 sum of the widened terms, rounded once at the end,
/// after a reshape that is the sum's only user, so that the rounding meets
/// the widening a gradient's consumer usually applies next and fuses with it
/// (zest-fuse-elementwise).
struct WidenSum : public OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    arith::AddFOp add = getNarrowSum(op);
    if (!add)
      return rewriter.notifyMatchFailure(op, "no 16-bit sum");
    Location loc = op.getLoc();
    auto narrow = cast<RankedTensorType>(op.getResult(0).getType());
    auto wide = narrow.clone(rewriter.getF32Type());
    Value init = widenInit(rewriter, loc, op.getDpsInits()[0], wide);
    BlockArgument out = op.getMatchingBlockArgument(op.getDpsInitOperand(0));
    Value term = add.getLhs() == out ? add.getRhs() : add.getLhs();
    auto widened = linalg::GenericOp::create(
        rewriter, loc, wide, op.getDpsInputs(), init, op.getIndexingMapsArray(),
        op.getIteratorTypesArray(),
        [&](OpBuilder &nested, Location loc, ValueRange args) {
          IRMapping mapping;
          mapping.map(op.getBody()->getArguments(), args);
          for (Operation &bodyOp : op.getBody()->without_terminator())
            if (&bodyOp != add.getOperation())
              nested.clone(bodyOp, mapping);
          Value x = arith::ExtFOp::create(nested, loc, wide.getElementType(),
                                          mapping.lookup(term));
          Value sum = arith::AddFOp::create(nested, loc, args.back(), x,
                                            add.getFastmathAttr());
          linalg::YieldOp::create(nested, loc, sum);
        });
    // The rounding goes after a reshape that is the sum's only user.
    Value result = widened.getResult(0);
    Operation *replaced = op;
    Operation *user = op->hasOneUse() ? *op->user_begin() : nullptr;
    if (isa_and_nonnull<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(user)) {
      rewriter.setInsertionPoint(user);
      Operation *reshape = rewriter.clone(*user);
      reshape->setOperand(0, result);
      reshape->getResult(0).setType(
          cast<RankedTensorType>(user->getResult(0).getType())
              .clone(wide.getElementType()));
      result = reshape->getResult(0);
      replaced = user;
    }
    rewriter.replaceOp(replaced, convertElements(rewriter, loc, result,
                                                 narrow.getElementType()));
    if (replaced != op)
      rewriter.eraseOp(op);
    return success();
  }
};

struct WidenAccumulatorsPass
    : public zest::impl::WidenAccumulatorsPassBase<WidenAccumulatorsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<WidenSum>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     getStraightLineRewriteConfig())))
      signalPassFailure();
  }
};

} // namespace
