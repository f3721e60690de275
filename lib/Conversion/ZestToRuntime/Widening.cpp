//===- Widening.cpp - Mixed precision: round, move, widen where used ------===//
//
// Under mixed precision a collective's f32 buffer travels rounded to bf16 or
// f16, and what arrives is widened where it is used: these patterns move the
// widening of a gathered buffer into each parameter's view and fuse it into
// elementwise consumers, so gathered parameters stay in the wire type.
//
//===----------------------------------------------------------------------===//

#include "ZestToRuntime.h"
#include "zest/Conversion/RuntimeCalls.h"
#include "zest/Dialect/Zest/Transforms/ElementwiseFusion.h"

using namespace mlir;
using namespace mlir::zest;
using namespace mlir::zest::zest_to_runtime;

/// The input of `op` if it is a convertElements widening (extf), else null.
Value zest_to_runtime::getWidenedInput(Operation *op) {
  if (!isa_and_nonnull<arith::ExtFOp>(getElementConversion(op)))
    return {};
  return cast<linalg::GenericOp>(op).getDpsInputs()[0];
}

namespace {

/// A view (a parameter's slice, its reshape) of a widened gather is the
/// widening of the same view of the received buffer: each parameter is
/// widened where it is used, and a model that computes in the wire type
/// (autocast) reads the received values with no f32 copy (its truncf of
/// the extf folds once the two are fused).
template <typename ViewOp>
struct SinkWidenIntoView : public OpRewritePattern<ViewOp> {
  using OpRewritePattern<ViewOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(ViewOp view,
                                PatternRewriter &rewriter) const override {
    Value narrow = getWidenedInput(view->getOperand(0).getDefiningOp());
    if (!narrow)
      return rewriter.notifyMatchFailure(view, "not a view of a widening");
    auto type = cast<RankedTensorType>(view.getType());
    Type narrowType = cast<RankedTensorType>(narrow.getType()).getElementType();
    Operation *narrowView = rewriter.clone(*view);
    narrowView->setOperand(0, narrow);
    narrowView->getResult(0).setType(type.clone(narrowType));
    rewriter.replaceOp(view, convertElements(rewriter, view.getLoc(),
                                             narrowView->getResult(0),
                                             type.getElementType()));
    return success();
  }
};

/// A widening read by one elementwise consumer is fused into it (the pass
/// runs after zest-fuse-elementwise): the consumer reads the received
/// values, with no f32 copy of them. A consumer that rounds them back (an
/// autocast model's cast of its parameters) reads them as they are.
struct FuseWidenIntoConsumer : public OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::GenericOp consumer,
                                PatternRewriter &rewriter) const override {
    for (OpOperand &operand : consumer->getOpOperands()) {
      if (!getWidenedInput(operand.get().getDefiningOp()))
        continue;
      FailureOr<linalg::GenericOp> fused =
          fuseElementwiseProducer(rewriter, operand);
      if (failed(fused))
        continue;
      foldRoundTrips(rewriter, *fused);
      return success();
    }
    return rewriter.notifyMatchFailure(consumer, "reads no widening");
  }

  /// truncf(extf(x)) is x (exact); a generic left copying its one input is
  /// that input.
  static void foldRoundTrips(RewriterBase &rewriter, linalg::GenericOp op) {
    op.getBody()->walk([&](arith::TruncFOp trunc) {
      auto ext = trunc.getIn().getDefiningOp<arith::ExtFOp>();
      if (ext && ext.getIn().getType() == trunc.getType())
        rewriter.replaceOp(trunc, ext.getIn());
    });
    Block *body = op.getBody();
    if (!isPointwise(op) || op->getNumResults() != 1 ||
        op.getDpsInputs()[0].getType() != op->getResult(0).getType() ||
        body->getTerminator()->getOperand(0) != body->getArgument(0))
      return;
    rewriter.replaceOp(op, op.getDpsInputs()[0]);
  }
};

} // namespace

void zest_to_runtime::populateWideningPatterns(RewritePatternSet &patterns) {
  patterns
      .add<SinkWidenIntoView<tensor::ExtractSliceOp>,
           SinkWidenIntoView<tensor::ExpandShapeOp>,
           SinkWidenIntoView<tensor::CollapseShapeOp>, FuseWidenIntoConsumer>(
          patterns.getContext());
}
