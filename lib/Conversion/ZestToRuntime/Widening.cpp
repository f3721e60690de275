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

#include "mlir/Dialect/Utils/IndexingUtils.h"

using namespace mlir;
using namespace mlir::zest;
using namespace mlir::zest::zest_to_runtime;

namespace {

/// A widening that may also permute: an elementwise generic that widens its
/// one input, read through a permutation, into the loops' order (attention's
/// [B, S, H, D] gradient widened into [B, H, S, D] for a rotary embedding's
/// backward).
struct PermutedWidening {
  Value input;
  /// Input dimension i is loop permutation[i].
  SmallVector<int64_t> permutation;

  static std::optional<PermutedWidening> get(Operation *op) {
    auto generic = dyn_cast_or_null<linalg::GenericOp>(op);
    if (!generic || !generic.isAllParallelLoops() ||
        !generic.hasPureTensorSemantics() ||
        !isa_and_nonnull<arith::ExtFOp>(getBodyConversion(generic)))
      return std::nullopt;
    AffineMap inputMap = generic.getIndexingMapsArray()[0];
    if (!inputMap.isPermutation() ||
        !generic.getIndexingMapsArray()[1].isIdentity())
      return std::nullopt;
    PermutedWidening widening{generic.getDpsInputs()[0], {}};
    for (unsigned i = 0; i < inputMap.getNumResults(); ++i)
      widening.permutation.push_back(inputMap.getDimPosition(i));
    return widening;
  }

  bool isIdentity() const { return isIdentityPermutation(permutation); }
};

} // namespace

/// The input of `op` if it is a convertElements widening (extf), else null.
Value zest_to_runtime::getWidenedInput(Operation *op) {
  std::optional<PermutedWidening> widening = PermutedWidening::get(op);
  return widening && widening->isIdentity() ? widening->input : Value();
}

namespace {

/// A slice of a widening that may permute (PermutedWidening) is the
/// widening of the same slice of its input, permuted: each part a rotary
/// embedding's backward reads is widened where it is read.
struct SinkPermutedWidenIntoSlice
    : public OpRewritePattern<tensor::ExtractSliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tensor::ExtractSliceOp slice,
                                PatternRewriter &rewriter) const override {
    std::optional<PermutedWidening> widening =
        PermutedWidening::get(slice.getSource().getDefiningOp());
    // Identity widenings: SinkWidenIntoView, rank-reducing slices too.
    if (!widening || widening->isIdentity() ||
        slice.getType().getRank() != slice.getSourceType().getRank())
      return rewriter.notifyMatchFailure(slice,
                                         "not a slice of a permuted widening");
    ArrayRef<int64_t> permutation = widening->permutation;
    Value narrow = tensor::ExtractSliceOp::create(
        rewriter, slice.getLoc(), widening->input,
        applyPermutation(slice.getMixedOffsets(), permutation),
        applyPermutation(slice.getMixedSizes(), permutation),
        applyPermutation(slice.getMixedStrides(), permutation));
    rewriter.replaceOp(slice, convertElements(rewriter, slice.getLoc(), narrow,
                                              slice.getType().getElementType(),
                                              permutation));
    return success();
  }
};

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

/// A widening (one that may permute, too) read by one elementwise consumer
/// is fused into it (the pass
/// runs after zest-fuse-elementwise): the consumer reads the received
/// values, with no f32 copy of them. A consumer that rounds them back (an
/// autocast model's cast of its parameters) reads them as they are.
struct FuseWidenIntoConsumer : public OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::GenericOp consumer,
                                PatternRewriter &rewriter) const override {
    for (OpOperand &operand : consumer->getOpOperands()) {
      if (!PermutedWidening::get(operand.get().getDefiningOp()))
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
    if (isCopyOfInput(op))
      rewriter.replaceOp(op, op.getDpsInputs()[0]);
  }
};

} // namespace

void zest_to_runtime::populateWideningPatterns(RewritePatternSet &patterns) {
  patterns.add<SinkWidenIntoView<tensor::ExtractSliceOp>,
               SinkWidenIntoView<tensor::ExpandShapeOp>,
               SinkWidenIntoView<tensor::CollapseShapeOp>,
               SinkPermutedWidenIntoSlice, FuseWidenIntoConsumer>(
      patterns.getContext());
}
