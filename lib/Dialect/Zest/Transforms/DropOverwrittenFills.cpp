//===- DropOverwrittenFills.cpp - Fills their slices overwrite
//-------------===//
//
// A concatenation written as insert_slices into a zero-filled tensor (the
// q, k and v gradients packed into the qkv gradient) fills the whole tensor
// only for its slices to overwrite it. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/Passes.h"
#include "zest/Dialect/Zest/Transforms/Transforms.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::zest {
#define GEN_PASS_DEF_DROPOVERWRITTENFILLSPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;

namespace {

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

struct DropOverwrittenFillsPass
    : public zest::impl::DropOverwrittenFillsPassBase<
          DropOverwrittenFillsPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    RewritePatternSet patterns(ctx);
    patterns.add<DropOverwrittenFill>(ctx);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     zest::getStraightLineRewriteConfig())))
      return signalPassFailure();
  }
};

} // namespace
