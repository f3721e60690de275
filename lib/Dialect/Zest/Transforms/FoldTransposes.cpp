//===- FoldTransposes.cpp - Products read transposed operands in place ----===//
//
// A product that reads a materialized transpose of its operand reads the
// operand itself through a transposed indexing map instead: BLAS and
// cuBLASLt take either layout at the same cost, the copy costs a pass over
// the operand with strided loads.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/Contraction.h"
#include "zest/Dialect/Zest/Transforms/ElementwiseFusion.h"
#include "zest/Dialect/Zest/Transforms/Passes.h"
#include "zest/Dialect/Zest/Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::zest {
#define GEN_PASS_DEF_FOLDTRANSPOSESPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

namespace {

/// True if `transpose` swaps the two innermost dimensions and keeps the
/// others in place: what a product's transposed layout absorbs.
static bool swapsInnerDims(linalg::TransposeOp transpose) {
  ArrayRef<int64_t> permutation = transpose.getPermutation();
  size_t rank = permutation.size();
  if (rank < 2)
    return false;
  for (size_t i = 0; i + 2 < rank; ++i)
    if (permutation[i] != int64_t(i))
      return false;
  return permutation[rank - 2] == int64_t(rank - 1) &&
         permutation[rank - 1] == int64_t(rank - 2);
}

/// `map` with its two last results swapped.
static AffineMap swapLastResults(AffineMap map) {
  SmallVector<AffineExpr> results(map.getResults());
  std::swap(results[results.size() - 2], results.back());
  return AffineMap::get(map.getNumDims(), map.getNumSymbols(), results,
                        map.getContext());
}

/// Rewrites a product (as zest-matmul-to-blas recognizes them) whose input
/// is an inner-dimension transpose into a generic product reading the
/// transpose's input.
struct FoldTransposeIntoProduct
    : public OpInterfaceRewritePattern<linalg::LinalgOp> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;

  LogicalResult matchAndRewrite(linalg::LinalgOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics())
      return rewriter.notifyMatchFailure(op, "not on tensors");
    std::optional<unsigned> batch = getGemmBatchDims(op);
    if (!batch || !getGemmLayout(op, *batch))
      return rewriter.notifyMatchFailure(op, "not a product BLAS takes");
    SmallVector<Value> inputs = op.getDpsInputs();
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    bool folded = false;
    for (unsigned i = 0; i < 2; ++i) {
      auto transpose = inputs[i].getDefiningOp<linalg::TransposeOp>();
      if (!transpose || !swapsInnerDims(transpose))
        continue;
      inputs[i] = transpose.getInput();
      maps[i] = swapLastResults(maps[i]);
      folded = true;
    }
    if (!folded)
      return rewriter.notifyMatchFailure(op, "no transposed operand");
    auto product = linalg::GenericOp::create(
        rewriter, op.getLoc(), op->getResultTypes(), inputs, op.getDpsInits(),
        maps, op.getIteratorTypesArray());
    rewriter.cloneRegionBefore(op->getRegion(0), product.getRegion(),
                               product.getRegion().end());
    rewriter.replaceOp(op, product->getResults());
    return success();
  }
};

/// round(transpose(x)) is transpose(round(x)): the rounding goes first, so
/// that the transpose moves the narrow values and meets the product that
/// reads it (autocast casts each weight after `W^T`), where it folds; and
/// the rounding then reads the weight itself, where the round trip of a
/// gather widened from bf16 folds away (zest-convert-zest-to-runtime).
struct RoundBeforeTranspose : public OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp round,
                                PatternRewriter &rewriter) const override {
    auto trunc = dyn_cast_or_null<arith::TruncFOp>(getElementConversion(round));
    if (!trunc || !round.hasPureTensorSemantics())
      return rewriter.notifyMatchFailure(round, "not a rounding on tensors");
    auto transpose =
        round.getDpsInputs()[0].getDefiningOp<linalg::TransposeOp>();
    if (!transpose || !transpose->hasOneUse())
      return rewriter.notifyMatchFailure(round, "not a rounded transpose");
    Location loc = round.getLoc();
    Type rounded = trunc.getType();
    auto inputType = cast<RankedTensorType>(transpose.getInput().getType());
    Value empty =
        tensor::EmptyOp::create(rewriter, loc, inputType.getShape(), rounded);
    auto early = linalg::GenericOp::create(
        rewriter, loc, TypeRange{inputType.clone(rounded)},
        ValueRange{transpose.getInput()}, ValueRange{empty},
        SmallVector<AffineMap>(
            2, rewriter.getMultiDimIdentityMap(inputType.getRank())),
        round.getIteratorTypesArray());
    rewriter.cloneRegionBefore(round.getRegion(), early.getRegion(),
                               early.getRegion().end());
    auto resultType = cast<RankedTensorType>(round.getResult(0).getType());
    Value init =
        tensor::EmptyOp::create(rewriter, loc, resultType.getShape(), rounded);
    rewriter.replaceOpWithNewOp<linalg::TransposeOp>(
        round, early.getResult(0), init, transpose.getPermutation());
    return success();
  }
};

struct FoldTransposesPass
    : public zest::impl::FoldTransposesPassBase<FoldTransposesPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    // The greedy driver erases the transposes left without users.
    patterns.add<FoldTransposeIntoProduct, RoundBeforeTranspose>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     getStraightLineRewriteConfig())))
      signalPassFailure();
  }
};

} // namespace
