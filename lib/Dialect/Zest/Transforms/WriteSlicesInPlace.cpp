//===- WriteSlicesInPlace.cpp - Pieces computed into their slices ---------===//
//
// A concatenation written as insert_slices into a zero-filled tensor (the
// q, k and v gradients packed into the qkv gradient) costs a fill and one
// copy per piece. Upstream empty-tensor elimination computes each piece in
// its slice when the piece's chain starts from tensor.empty and reaches the
// insert_slice directly; these patterns bring the IR to that form. See
// Passes.td.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::zest {
#define GEN_PASS_DEF_WRITESLICESINPLACEPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;

namespace {

/// insert_slice(collapse_shape(x)) into d, where every collapsed group of
/// dims is inserted whole, becomes collapse_shape(insert_slice(x) into
/// expand_shape(d)): x itself is what is inserted, so its producer can
/// write into the slice.
struct InsertUncollapsed : public OpRewritePattern<tensor::InsertSliceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tensor::InsertSliceOp insert,
                                PatternRewriter &rewriter) const override {
    auto collapse = insert.getSource().getDefiningOp<tensor::CollapseShapeOp>();
    if (!collapse)
      return rewriter.notifyMatchFailure(insert, "source not collapsed");
    RankedTensorType destType = insert.getDestType();
    RankedTensorType srcType = collapse.getSrcType();
    if (!destType.hasStaticShape() || !srcType.hasStaticShape() ||
        insert.getSourceType().getRank() != destType.getRank() ||
        !insert.hasUnitStride())
      return rewriter.notifyMatchFailure(insert, "not a static plain insert");
    SmallVector<ReassociationIndices> groups =
        collapse.getReassociationIndices();
    SmallVector<int64_t> offsets(insert.getStaticOffsets());
    SmallVector<int64_t> sizes(insert.getStaticSizes());
    if (ShapedType::isDynamicShape(offsets) ||
        ShapedType::isDynamicShape(sizes))
      return rewriter.notifyMatchFailure(insert, "dynamic slice");
    // The destination's shape with each collapsed group expanded, and the
    // slice in it.
    SmallVector<int64_t> expandedShape, newOffsets, newSizes;
    for (auto [dim, group] : llvm::enumerate(groups)) {
      if (group.size() == 1) {
        expandedShape.push_back(destType.getDimSize(dim));
        newOffsets.push_back(offsets[dim]);
        newSizes.push_back(sizes[dim]);
        continue;
      }
      if (offsets[dim] != 0 || sizes[dim] != destType.getDimSize(dim))
        return rewriter.notifyMatchFailure(insert, "a group split by slice");
      for (int64_t srcDim : group) {
        expandedShape.push_back(srcType.getDimSize(srcDim));
        newOffsets.push_back(0);
        newSizes.push_back(srcType.getDimSize(srcDim));
      }
    }
    Location loc = insert.getLoc();
    auto expandedType =
        RankedTensorType::get(expandedShape, destType.getElementType());
    Value dest = tensor::ExpandShapeOp::create(rewriter, loc, expandedType,
                                               insert.getDest(), groups);
    SmallVector<int64_t> strides(expandedShape.size(), 1);
    Value inserted = tensor::InsertSliceOp::create(
        rewriter, loc, collapse.getSrc(), dest, ValueRange(), ValueRange(),
        ValueRange(), newOffsets, newSizes, strides);
    rewriter.replaceOpWithNewOp<tensor::CollapseShapeOp>(insert, destType,
                                                         inserted, groups);
    return success();
  }
};

/// A fill whose value is overwritten everywhere by the chain of
/// insert_slices it is the destination of (static, disjoint slices whose
/// sizes add up to the whole tensor) fills nothing anyone reads: the chain
/// starts from the fill's destination instead.
struct DropOverwrittenFill : public OpRewritePattern<linalg::FillOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::FillOp fill,
                                PatternRewriter &rewriter) const override {
    if (!fill.hasPureTensorSemantics())
      return failure();
    auto type = dyn_cast<RankedTensorType>(fill.getResult(0).getType());
    if (!type || !type.hasStaticShape())
      return failure();
    // Follow the chain: each insert_slice's result is the only use, as the
    // destination, of the previous value.
    SmallVector<std::pair<SmallVector<int64_t>, SmallVector<int64_t>>> boxes;
    Value current = fill.getResult(0);
    while (current.hasOneUse()) {
      auto insert =
          dyn_cast<tensor::InsertSliceOp>(*current.getUsers().begin());
      if (!insert || insert.getDest() != current)
        break;
      SmallVector<int64_t> offsets(insert.getStaticOffsets());
      SmallVector<int64_t> sizes(insert.getStaticSizes());
      if (ShapedType::isDynamicShape(offsets) ||
          ShapedType::isDynamicShape(sizes) || !insert.hasUnitStride())
        return rewriter.notifyMatchFailure(fill, "dynamic or strided slice");
      boxes.push_back({offsets, sizes});
      current = insert.getResult();
    }
    if (boxes.empty())
      return rewriter.notifyMatchFailure(fill, "not a concatenation");
    int64_t covered = 0;
    for (auto &[offsets, sizes] : boxes) {
      int64_t volume = 1;
      for (int64_t size : sizes)
        volume *= size;
      covered += volume;
    }
    auto overlap = [](const auto &a, const auto &b) {
      for (size_t d = 0; d < a.first.size(); ++d)
        if (a.first[d] + a.second[d] <= b.first[d] ||
            b.first[d] + b.second[d] <= a.first[d])
          return false;
      return true;
    };
    for (size_t i = 0; i < boxes.size(); ++i)
      for (size_t j = i + 1; j < boxes.size(); ++j)
        if (overlap(boxes[i], boxes[j]))
          return rewriter.notifyMatchFailure(fill, "slices overlap");
    if (covered != type.getNumElements())
      return rewriter.notifyMatchFailure(fill, "slices leave a gap");
    rewriter.replaceOp(fill, fill.getDpsInits()[0]);
    return success();
  }
};

struct WriteSlicesInPlacePass
    : public zest::impl::WriteSlicesInPlacePassBase<WriteSlicesInPlacePass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    RewritePatternSet patterns(ctx);
    patterns.add<InsertUncollapsed, DropOverwrittenFill>(ctx);
    // expand_shape(collapse_shape(x)) -> x between consecutive pieces, and a
    // fill moves through the reshape of its result.
    tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, ctx);
    tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns, ctx);
    linalg::FillOp::getCanonicalizationPatterns(patterns, ctx);
    tensor::populateFoldTensorEmptyPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
