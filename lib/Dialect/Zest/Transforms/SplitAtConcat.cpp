//===- SplitAtConcat.cpp - Elementwise ops computed per concatenated part -===//
//
// A rotary embedding's rotate_half is cat(-x2, x1), read once by
// `x * cos + rotate_half(x) * sin`: stored, the concatenation is a copy of
// each part into a new tensor (two kernels) before the one elementwise op
// reads it. Computed per part, the elementwise op reads each part where it
// was produced (the negation fuses into it) and writes its own slice of the
// result: nothing is stored twice.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/ElementwiseFusion.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::zest;

namespace {

/// Where `map` reads along `loop`: the position of its result that is
/// exactly that loop, -1 if no result involves it, -2 if one involves it
/// otherwise (a sliced read would not be a slice of the operand).
int64_t getSlicedDim(AffineMap map, unsigned loop) {
  int64_t position = -1;
  for (auto [i, expr] : llvm::enumerate(map.getResults())) {
    if (auto dim = dyn_cast<AffineDimExpr>(expr);
        dim && dim.getPosition() == loop) {
      position = i;
    } else if (expr.isFunctionOfDim(loop)) {
      return -2;
    }
  }
  return position;
}

/// The offsets, sizes and strides of [offset, offset + size) along
/// dimension `dim` of a tensor of `shape`, whole along the others.
struct SliceBounds {
  SmallVector<OpFoldResult> offsets, sizes, strides;

  SliceBounds(OpBuilder &builder, ArrayRef<int64_t> shape, int64_t dim,
              int64_t offset, int64_t size)
      : offsets(shape.size(), builder.getIndexAttr(0)),
        strides(shape.size(), builder.getIndexAttr(1)) {
    for (int64_t extent : shape)
      sizes.push_back(builder.getIndexAttr(extent));
    offsets[dim] = builder.getIndexAttr(offset);
    sizes[dim] = builder.getIndexAttr(size);
  }
};

/// `value` restricted to [offset, offset + size) along dimension `dim`
/// (itself when `dim` is negative: it does not vary along the split loop).
Value sliceAlong(OpBuilder &builder, Location loc, Value value, int64_t dim,
                 int64_t offset, int64_t size) {
  if (dim < 0)
    return value;
  SliceBounds bounds(builder,
                     cast<RankedTensorType>(value.getType()).getShape(), dim,
                     offset, size);
  return tensor::ExtractSliceOp::create(builder, loc, value, bounds.offsets,
                                        bounds.sizes, bounds.strides);
}

/// An elementwise generic (static shapes, identity output, outputs only
/// written, no index reads) that reads a `tensor.concat` only it reads,
/// along one of its loops, becomes one generic per concatenated part over
/// that part of the loop, each written into its slice of the result.
struct SplitElementwiseAtConcat : public OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp generic,
                                PatternRewriter &rewriter) const override {
    if (!generic.hasPureTensorSemantics() || !generic.isAllParallelLoops() ||
        generic.getNumDpsInits() != 1 || generic.hasIndexSemantics() ||
        !generic.getMatchingIndexingMap(generic.getDpsInitOperand(0))
             .isIdentity() ||
        generic.payloadUsesValueFromOperand(generic.getDpsInitOperand(0)) ||
        llvm::any_of(generic->getOperandTypes(), [](Type type) {
          auto shaped = dyn_cast<ShapedType>(type);
          return !shaped || !shaped.hasStaticShape();
        }))
      return rewriter.notifyMatchFailure(generic,
                                         "not a static elementwise op");
    for (OpOperand *input : generic.getDpsInputOperands()) {
      auto concat = input->get().getDefiningOp<tensor::ConcatOp>();
      if (!concat || !concat->hasOneUse())
        continue;
      auto loop = dyn_cast<AffineDimExpr>(
          generic.getMatchingIndexingMap(input).getResult(concat.getDim()));
      if (!loop || !isSliceable(generic, input, concat, loop.getPosition()))
        continue;
      split(generic, input, concat, loop.getPosition(), rewriter);
      return success();
    }
    return rewriter.notifyMatchFailure(generic, "reads no concatenation");
  }

private:
  /// True if every operand reads slices along `loop` (or does not vary
  /// along it), the concatenation along its concatenated dimension only.
  static bool isSliceable(linalg::GenericOp generic, OpOperand *concatOperand,
                          tensor::ConcatOp concat, unsigned loop) {
    return llvm::all_of(generic->getOpOperands(), [&](OpOperand &operand) {
      int64_t dim =
          getSlicedDim(generic.getMatchingIndexingMap(&operand), loop);
      return &operand == concatOperand ? dim == int64_t(concat.getDim())
                                       : dim != -2;
    });
  }

  static void split(linalg::GenericOp generic, OpOperand *concatOperand,
                    tensor::ConcatOp concat, unsigned loop,
                    PatternRewriter &rewriter) {
    Location loc = generic.getLoc();
    auto resultType = cast<RankedTensorType>(generic.getResult(0).getType());
    Value result = tensor::EmptyOp::create(rewriter, loc, resultType.getShape(),
                                           resultType.getElementType());
    int64_t offset = 0;
    for (Value part : concat.getInputs()) {
      int64_t size =
          cast<RankedTensorType>(part.getType()).getDimSize(concat.getDim());
      SmallVector<Value> inputs;
      for (OpOperand *input : generic.getDpsInputOperands())
        inputs.push_back(
            input == concatOperand
                ? part
                : sliceAlong(
                      rewriter, loc, input->get(),
                      getSlicedDim(generic.getMatchingIndexingMap(input), loop),
                      offset, size));
      SmallVector<int64_t> shape(resultType.getShape());
      shape[loop] = size;
      Value init = tensor::EmptyOp::create(rewriter, loc, shape,
                                           resultType.getElementType());
      auto piece = linalg::GenericOp::create(
          rewriter, loc, TypeRange{init.getType()}, inputs, init,
          generic.getIndexingMapsArray(), generic.getIteratorTypesArray());
      rewriter.cloneRegionBefore(generic.getRegion(), piece.getRegion(),
                                 piece.getRegion().end());
      // The output map is the identity: loop `loop` is result dimension
      // `loop`.
      SliceBounds bounds(rewriter, resultType.getShape(), loop, offset, size);
      result = tensor::InsertSliceOp::create(rewriter, loc, piece.getResult(0),
                                             result, bounds.offsets,
                                             bounds.sizes, bounds.strides);
      offset += size;
    }
    rewriter.replaceOp(generic, result);
  }
};

} // namespace

void mlir::zest::populateSplitAtConcatPatterns(RewritePatternSet &patterns) {
  patterns.add<SplitElementwiseAtConcat>(patterns.getContext());
}
