//===- SplitAtConcat.cpp - Elementwise ops computed per assembled part ----===//
//
// A rotary embedding's rotate_half is cat(-x2, x1), read once by
// `x * cos + rotate_half(x) * sin`: stored, the concatenation is a copy of
// each part into a new tensor (two kernels) before the one elementwise op
// reads it. Its backward assembles the same halves as slices inserted into
// zeros, each padded array a copy of the zeros and one of the slice.
// Computed per part, the elementwise op reads each part where it was
// produced (the negation fuses into it), reads the padding as a constant,
// and writes its own slice of the result: nothing is stored twice.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/ElementwiseFusion.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

#include <set>

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
/// (itself when `dim` is negative, it does not vary along the split loop,
/// or the range is all of it).
Value sliceAlong(OpBuilder &builder, Location loc, Value value, int64_t dim,
                 int64_t offset, int64_t size) {
  auto type = cast<RankedTensorType>(value.getType());
  if (dim < 0 || (offset == 0 && size == type.getDimSize(dim)))
    return value;
  SliceBounds bounds(builder, type.getShape(), dim, offset, size);
  return tensor::ExtractSliceOp::create(builder, loc, value, bounds.offsets,
                                        bounds.sizes, bounds.strides);
}

/// The scalar every element of `value` holds, if it is a splat constant or
/// a fill with a constant.
TypedAttr getSplatValue(Value value) {
  DenseElementsAttr dense;
  if (matchPattern(value, m_Constant(&dense)) && dense.isSplat())
    return cast<TypedAttr>(dense.getSplatValue<Attribute>());
  TypedAttr scalar;
  if (auto fill = value.getDefiningOp<linalg::FillOp>();
      fill && fill.hasPureTensorSemantics() &&
      matchPattern(fill.value(), m_Constant(&scalar)))
    return scalar;
  return {};
}

/// A static tensor read only once, assembled from parts along one dimension:
/// a tensor.concat, or a slice inserted into a splat constant (the
/// constant on either side of it).
struct PartedValue {
  Value value;
  int64_t dim = 0;
  /// The parts' boundaries along `dim`, from 0 to the dimension's size.
  SmallVector<int64_t> bounds;

  static std::optional<PartedValue> get(Value value) {
    if (!value.hasOneUse())
      return std::nullopt;
    if (auto concat = value.getDefiningOp<tensor::ConcatOp>())
      return getConcat(concat);
    if (auto insert = value.getDefiningOp<tensor::InsertSliceOp>())
      return getPadded(insert);
    return std::nullopt;
  }

  /// This value over [offset, offset + size), which lies in one part; null
  /// where that part is the constant around an inserted slice.
  Value getPart(OpBuilder &builder, Location loc, int64_t offset,
                int64_t size) const {
    if (auto concat = value.getDefiningOp<tensor::ConcatOp>()) {
      int64_t start = 0;
      for (Value part : concat.getInputs()) {
        int64_t extent = cast<RankedTensorType>(part.getType()).getDimSize(dim);
        if (offset < start + extent)
          return sliceAlong(builder, loc, part, dim, offset - start, size);
        start += extent;
      }
      return {};
    }
    auto insert = value.getDefiningOp<tensor::InsertSliceOp>();
    int64_t start = insert.getStaticOffsets()[dim],
            extent = insert.getStaticSizes()[dim];
    if (offset < start || offset >= start + extent)
      return {};
    return sliceAlong(builder, loc, insert.getSource(), dim, offset - start,
                      size);
  }

  /// The constant around an inserted slice.
  TypedAttr getPadding() const {
    auto insert = value.getDefiningOp<tensor::InsertSliceOp>();
    return insert ? getSplatValue(insert.getDest()) : TypedAttr();
  }

private:
  static std::optional<PartedValue> getConcat(tensor::ConcatOp concat) {
    PartedValue parted{concat.getResult(), int64_t(concat.getDim()), {0}};
    for (Value part : concat.getInputs()) {
      auto type = cast<RankedTensorType>(part.getType());
      if (!type.hasStaticShape())
        return std::nullopt;
      parted.bounds.push_back(parted.bounds.back() +
                              type.getDimSize(parted.dim));
    }
    return parted;
  }

  /// A slice inserted into a splat constant that it covers but along one
  /// dimension, with unit strides and no dropped dimensions.
  static std::optional<PartedValue> getPadded(tensor::InsertSliceOp insert) {
    RankedTensorType type = insert.getDestType();
    if (!type.hasStaticShape() || !getSplatValue(insert.getDest()) ||
        insert.getSourceType().getRank() != type.getRank() ||
        ShapedType::isDynamicShape(insert.getStaticOffsets()) ||
        ShapedType::isDynamicShape(insert.getStaticSizes()) ||
        !llvm::all_of(insert.getStaticStrides(),
                      [](int64_t stride) { return stride == 1; }))
      return std::nullopt;
    std::optional<int64_t> padded;
    for (auto [dim, offset, size] :
         llvm::enumerate(insert.getStaticOffsets(), insert.getStaticSizes())) {
      if (offset == 0 && size == type.getDimSize(dim))
        continue;
      if (padded)
        return std::nullopt;
      padded = dim;
    }
    if (!padded)
      return std::nullopt;
    int64_t offset = insert.getStaticOffsets()[*padded],
            end = offset + insert.getStaticSizes()[*padded];
    PartedValue parted{insert.getResult(), *padded, {0}};
    for (int64_t bound : {offset, end, type.getDimSize(*padded)})
      if (bound != parted.bounds.back())
        parted.bounds.push_back(bound);
    return parted;
  }
};

/// Whether `generic` is elementwise with static shapes, one output written
/// through a permutation and not read, and no index reads.
bool isSplittable(linalg::GenericOp generic) {
  return generic.hasPureTensorSemantics() && generic.isAllParallelLoops() &&
         generic.getNumDpsInits() == 1 && !generic.hasIndexSemantics() &&
         generic.getMatchingIndexingMap(generic.getDpsInitOperand(0))
             .isPermutation() &&
         !generic.payloadUsesValueFromOperand(generic.getDpsInitOperand(0)) &&
         llvm::all_of(generic->getOperandTypes(), [](Type type) {
           auto shaped = dyn_cast<ShapedType>(type);
           return shaped && shaped.hasStaticShape();
         });
}

/// The block argument of `piece`'s input `index` replaced by the constant
/// `value`, and the input dropped.
void inlineConstantInput(RewriterBase &rewriter, linalg::GenericOp piece,
                         unsigned index, TypedAttr value) {
  Block &body = piece.getRegion().front();
  rewriter.setInsertionPointToStart(&body);
  Value scalar = arith::ConstantOp::create(rewriter, piece.getLoc(), value);
  rewriter.replaceAllUsesWith(body.getArgument(index), scalar);
  body.eraseArgument(index);
  SmallVector<AffineMap> maps = piece.getIndexingMapsArray();
  maps.erase(maps.begin() + index);
  piece.setIndexingMapsAttr(rewriter.getAffineMapArrayAttr(maps));
  piece.getInputsMutable().erase(index);
}

/// An elementwise generic that reads assembled tensors (PartedValue) only
/// it reads, along one of its loops, becomes one generic per part over
/// that part of the loop (the parts of all such operands read along the
/// loop, intersected), each written into its slice of the result: the
/// concatenated parts are read where they were produced, the padding is a
/// constant in the body.
struct SplitElementwiseAtParts : public OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp generic,
                                PatternRewriter &rewriter) const override {
    if (!isSplittable(generic))
      return rewriter.notifyMatchFailure(generic,
                                         "not a static elementwise op");
    for (OpOperand *input : generic.getDpsInputOperands()) {
      std::optional<PartedValue> parted = PartedValue::get(input->get());
      if (!parted)
        continue;
      auto loop = dyn_cast<AffineDimExpr>(
          generic.getMatchingIndexingMap(input).getResult(parted->dim));
      if (!loop)
        continue;
      DenseMap<OpOperand *, PartedValue> parts =
          getPartedOperands(generic, loop.getPosition());
      if (parts.empty())
        continue;
      split(generic, parts, loop.getPosition(), rewriter);
      return success();
    }
    return rewriter.notifyMatchFailure(generic, "reads no assembled tensor");
  }

private:
  /// The inputs read part by part along `loop` (each along its assembled
  /// dimension), or none if another operand's read along `loop` is not a
  /// slice of it.
  static DenseMap<OpOperand *, PartedValue>
  getPartedOperands(linalg::GenericOp generic, unsigned loop) {
    DenseMap<OpOperand *, PartedValue> parts;
    for (OpOperand &operand : generic->getOpOperands()) {
      int64_t dim =
          getSlicedDim(generic.getMatchingIndexingMap(&operand), loop);
      if (dim == -2)
        return DenseMap<OpOperand *, PartedValue>();
      std::optional<PartedValue> parted;
      if (generic.isDpsInput(&operand))
        parted = PartedValue::get(operand.get());
      if (parted && parted->dim == dim)
        parts.try_emplace(&operand, *parted);
    }
    return parts;
  }

  static void split(linalg::GenericOp generic,
                    const DenseMap<OpOperand *, PartedValue> &parts,
                    unsigned loop, PatternRewriter &rewriter) {
    std::set<int64_t> bounds;
    for (const auto &entry : parts)
      bounds.insert(entry.second.bounds.begin(), entry.second.bounds.end());
    Location loc = generic.getLoc();
    auto resultType = cast<RankedTensorType>(generic.getResult(0).getType());
    int64_t resultDim = getSlicedDim(
        generic.getMatchingIndexingMap(generic.getDpsInitOperand(0)), loop);
    Value result = tensor::EmptyOp::create(rewriter, loc, resultType.getShape(),
                                           resultType.getElementType());
    for (auto begin = bounds.begin(), next = std::next(begin);
         next != bounds.end(); begin = next++) {
      int64_t offset = *begin, size = *next - *begin;
      linalg::GenericOp piece =
          createPiece(generic, parts, loop, offset, size, rewriter);
      SliceBounds slice(rewriter, resultType.getShape(), resultDim, offset,
                        size);
      rewriter.setInsertionPoint(generic);
      result = tensor::InsertSliceOp::create(rewriter, loc, piece.getResult(0),
                                             result, slice.offsets, slice.sizes,
                                             slice.strides);
    }
    rewriter.replaceOp(generic, result);
  }

  /// `generic` over [offset, offset + size) of `loop`.
  static linalg::GenericOp
  createPiece(linalg::GenericOp generic,
              const DenseMap<OpOperand *, PartedValue> &parts, unsigned loop,
              int64_t offset, int64_t size, PatternRewriter &rewriter) {
    Location loc = generic.getLoc();
    rewriter.setInsertionPoint(generic);
    SmallVector<Value> inputs;
    SmallVector<std::pair<unsigned, TypedAttr>> constants;
    for (OpOperand *input : generic.getDpsInputOperands()) {
      auto parted = parts.find(input);
      Value part =
          parted == parts.end()
              ? sliceAlong(
                    rewriter, loc, input->get(),
                    getSlicedDim(generic.getMatchingIndexingMap(input), loop),
                    offset, size)
              : parted->second.getPart(rewriter, loc, offset, size);
      if (!part) {
        constants.emplace_back(inputs.size(), parted->second.getPadding());
        part = input->get(); // replaced by the constant below
      }
      inputs.push_back(part);
    }
    OpOperand *output = generic.getDpsInitOperand(0);
    auto outputType = cast<RankedTensorType>(output->get().getType());
    SmallVector<int64_t> shape(outputType.getShape());
    shape[getSlicedDim(generic.getMatchingIndexingMap(output), loop)] = size;
    Value init = tensor::EmptyOp::create(rewriter, loc, shape,
                                         outputType.getElementType());
    auto piece = linalg::GenericOp::create(
        rewriter, loc, TypeRange{init.getType()}, inputs, init,
        generic.getIndexingMapsArray(), generic.getIteratorTypesArray());
    rewriter.cloneRegionBefore(generic.getRegion(), piece.getRegion(),
                               piece.getRegion().end());
    for (auto [index, value] : llvm::reverse(constants))
      inlineConstantInput(rewriter, piece, index, value);
    return piece;
  }
};

} // namespace

void mlir::zest::populateSplitAtConcatPatterns(RewritePatternSet &patterns) {
  patterns.add<SplitElementwiseAtParts>(patterns.getContext());
}
