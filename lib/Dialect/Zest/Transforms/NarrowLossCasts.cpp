//===- NarrowLossCasts.cpp - The loss on the logits' own type -------------===//
//
// Under autocast the head's product yields 16-bit logits that the loss
// widens to f32 (and its gradient is rounded back): the cross-entropy reads
// the 16-bit logits and writes a 16-bit gradient instead, the same values,
// without the f32 [tokens, vocabulary] arrays. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/IR/ZestOps.h"
#include "zest/Dialect/Zest/Transforms/ElementwiseFusion.h"
#include "zest/Dialect/Zest/Transforms/Passes.h"
#include "zest/Dialect/Zest/Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::zest {
#define GEN_PASS_DEF_NARROWLOSSCASTSPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

namespace {

/// The pointwise conversion generic (extf or truncf) defining `value`, or
/// null.
template <typename CastOp> linalg::GenericOp getConversion(Value value) {
  auto generic = value.getDefiningOp<linalg::GenericOp>();
  return generic && isa_and_nonnull<CastOp>(getElementConversion(generic))
             ? generic
             : linalg::GenericOp();
}

/// Where `logits` come from 16-bit values: a pointwise extf of them, or a
/// collapse_shape of one.
struct WidenedLogits {
  Value narrow;                     // the extf's input
  tensor::CollapseShapeOp collapse; // null without one

  /// Matches `logits`; `narrow` is null if they are not widened.
  explicit WidenedLogits(Value logits) {
    collapse = logits.getDefiningOp<tensor::CollapseShapeOp>();
    linalg::GenericOp widen =
        getConversion<arith::ExtFOp>(collapse ? collapse.getSrc() : logits);
    if (widen && isa<RankedTensorType>(widen.getDpsInputs()[0].getType()))
      narrow = widen.getDpsInputs()[0];
  }

  /// The 16-bit logits, collapsed as the f32 ones were.
  Value build(PatternRewriter &rewriter) {
    if (!collapse)
      return narrow;
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointAfter(collapse);
    return tensor::CollapseShapeOp::create(rewriter, collapse.getLoc(), narrow,
                                           collapse.getReassociationIndices());
  }
};

/// The forward reads the 16-bit logits (it computes in f32 either way).
struct NarrowForward : public OpRewritePattern<CrossEntropyOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(CrossEntropyOp loss,
                                PatternRewriter &rewriter) const override {
    if (!loss.hasPureTensorSemantics())
      return failure();
    WidenedLogits widened(loss.getLogits());
    if (!widened.narrow)
      return rewriter.notifyMatchFailure(loss, "logits not widened");
    Value narrow = widened.build(rewriter);
    rewriter.modifyOpInPlace(loss,
                             [&] { loss.getLogitsMutable().set(narrow); });
    return success();
  }
};

/// A backward whose gradient is only rounded to the logits' 16-bit type
/// (through an expand_shape or not) writes that type itself: the kernels
/// round to nearest even as truncf does, from the same f32 values.
struct NarrowBackward : public OpRewritePattern<CrossEntropyBackwardOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(CrossEntropyBackwardOp backward,
                                PatternRewriter &rewriter) const override {
    if (!backward.hasPureTensorSemantics() || !backward->hasOneUse())
      return failure();
    Operation *user = *backward->getUsers().begin();
    auto expand = dyn_cast<tensor::ExpandShapeOp>(user);
    if (expand && !expand->hasOneUse())
      return failure();
    Operation *roundUser = expand ? *expand->getUsers().begin() : user;
    linalg::GenericOp round = getConversion<arith::TruncFOp>(
        roundUser->getNumResults() == 1 ? roundUser->getResult(0) : Value());
    WidenedLogits widened(backward.getLogits());
    auto roundType = round ? dyn_cast<RankedTensorType>(round.getType(0))
                           : RankedTensorType();
    if (!widened.narrow || !roundType ||
        getElementTypeOrSelf(widened.narrow) != roundType.getElementType())
      return rewriter.notifyMatchFailure(backward, "gradient not rounded to "
                                                   "the logits' narrow type");
    Value narrow = widened.build(rewriter);
    rewriter.setInsertionPoint(backward);
    Location loc = backward.getLoc();
    auto narrowType = cast<RankedTensorType>(narrow.getType());
    Value empty = tensor::EmptyOp::create(rewriter, loc, narrowType.getShape(),
                                          narrowType.getElementType());
    OperationState state(loc, backward->getName());
    SmallVector<Value> operands(backward->getOperands());
    operands[backward.getLogitsMutable().getOperandNumber()] = narrow;
    operands[backward.getGradLogitsMutable().getOperandNumber()] = empty;
    state.addOperands(operands);
    state.addTypes(narrowType);
    state.propertiesAttr = backward->getPropertiesAsAttribute();
    Value grad = rewriter.create(state)->getResult(0);
    if (expand)
      grad = tensor::ExpandShapeOp::create(rewriter, loc, roundType, grad,
                                           expand.getReassociationIndices());
    rewriter.replaceOp(round, grad);
    return success();
  }
};

struct NarrowLossCastsPass
    : public zest::impl::NarrowLossCastsPassBase<NarrowLossCastsPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    RewritePatternSet patterns(ctx);
    patterns.add<NarrowForward, NarrowBackward>(ctx);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     zest::getStraightLineRewriteConfig())))
      return signalPassFailure();
  }
};

} // namespace
