//===- Views.cpp - Parameter views, gradient packing and buckets ----------===//
//
// zest.unflatten (a parameter out of a unit's buffer) becomes a slice and a
// reshape, views once bufferized; zest.flatten threads a unit's flat gradient
// buffer through backward so every gradient is computed in its slice;
// zest.pack / zest.unpack lay out and split the buffers of a bucket.
//
//===----------------------------------------------------------------------===//

#include "ZestToRuntime.h"
#include "zest/Conversion/RuntimeCalls.h"
#include "zest/Dialect/Zest/Transforms/Transforms.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::zest;
using namespace mlir::zest::zest_to_runtime;

namespace {

/// The parameter's elements, reshaped to its type: a view once bufferized.
struct LowerUnflatten : public OpRewritePattern<UnflattenOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(UnflattenOp op,
                                PatternRewriter &rewriter) const override {
    auto unit =
        SymbolTable::lookupNearestSymbolFrom<UnitOp>(op, op.getUnitAttr());
    rewriter.replaceOp(op, sliceParameter(rewriter, op.getLoc(), op.getFlat(),
                                          unit.lookupParam(op.getParam())));
    return success();
  }
};

/// The column where each part of a packed bucket starts when the bucket is
/// seen as `pieces` rows: row `p` holds piece `p` of every part in turn.
static SmallVector<int64_t> getPartColumns(TypeRange parts, int64_t pieces) {
  SmallVector<int64_t> columns;
  int64_t column = 0;
  for (Type part : parts) {
    columns.push_back(column);
    column += cast<RankedTensorType>(part).getNumElements() / pieces;
  }
  return columns;
}

/// The 2-D type of `pieces` rows of a flat buffer of `type`.
static RankedTensorType getRowsType(Type type, int64_t pieces) {
  auto flat = cast<RankedTensorType>(type);
  return RankedTensorType::get({pieces, flat.getNumElements() / pieces},
                               flat.getElementType());
}

/// Where a part of `width` columns starting at `column` lies in `pieces`
/// rows: offsets, sizes and strides of the slice (or subview).
struct ColumnBlock {
  SmallVector<OpFoldResult> offsets, sizes, strides;
  ColumnBlock(OpBuilder &builder, int64_t pieces, int64_t column, int64_t width)
      : offsets{builder.getIndexAttr(0), builder.getIndexAttr(column)},
        sizes{builder.getIndexAttr(pieces), builder.getIndexAttr(width)},
        strides{builder.getIndexAttr(1), builder.getIndexAttr(1)} {}
};

/// zest.pack: each part written into its columns of the rows. Parts
/// computed into an empty tensor of their own are computed in place once
/// empty tensors are eliminated.
struct LowerPack : public OpRewritePattern<PackOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PackOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    int64_t pieces = op.getPieces();
    RankedTensorType rowsType = getRowsType(op.getType(), pieces);
    Value rows = tensor::EmptyOp::create(rewriter, loc, rowsType.getShape(),
                                         rowsType.getElementType());
    for (auto [input, column] :
         llvm::zip(op.getInputs(),
                   getPartColumns(op.getInputs().getTypes(), pieces))) {
      RankedTensorType partType = getRowsType(input.getType(), pieces);
      Value part =
          tensor::ExpandShapeOp::create(rewriter, loc, partType, input,
                                        ArrayRef<ReassociationIndices>{{0, 1}});
      ColumnBlock block(rewriter, pieces, column, partType.getDimSize(1));
      rows = tensor::InsertSliceOp::create(
          rewriter, loc, part, rows, block.offsets, block.sizes, block.strides);
    }
    rewriter.replaceOpWithNewOp<tensor::CollapseShapeOp>(
        op, op.getType(), rows, ArrayRef<ReassociationIndices>{{0, 1}});
    return success();
  }
};

/// zest.unpack of a buffer that is not gathered: each part read from its
/// columns of the rows. One piece (a reduced bucket's shards) gives views.
struct LowerUnpack : public OpRewritePattern<UnpackOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(UnpackOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    int64_t pieces = op.getPieces();
    Value rows = tensor::ExpandShapeOp::create(
        rewriter, loc, getRowsType(op.getInput().getType(), pieces),
        op.getInput(), ArrayRef<ReassociationIndices>{{0, 1}});
    SmallVector<Value> results;
    for (auto [result, column] :
         llvm::zip(op.getResults(),
                   getPartColumns(op.getResults().getTypes(), pieces))) {
      RankedTensorType partType = getRowsType(result.getType(), pieces);
      ColumnBlock block(rewriter, pieces, column, partType.getDimSize(1));
      Value part = tensor::ExtractSliceOp::create(rewriter, loc, partType, rows,
                                                  block.offsets, block.sizes,
                                                  block.strides);
      results.push_back(tensor::CollapseShapeOp::create(
          rewriter, loc, result.getType(), part,
          ArrayRef<ReassociationIndices>{{0, 1}}));
    }
    rewriter.replaceOp(op, results);
    return success();
  }
};

/// The operand whose buffer `result` is computed in: a destination-style
/// op's init, or a loop's initial value of an iteration argument (the
/// embedding gradient's scatter-add loop).
static OpOperand *getTiedDestination(OpResult result) {
  Operation *producer = result.getOwner();
  if (auto dps = dyn_cast<DestinationStyleOpInterface>(producer))
    return dps.getTiedOpOperand(result);
  if (auto loop = dyn_cast<scf::ForOp>(producer))
    return loop.getTiedLoopInit(result);
  return nullptr;
}

/// The empty tensor whose buffer `value` is computed in, through the
/// destinations of its producers (a matmul into a fill of an empty tensor).
static tensor::EmptyOp findRootEmpty(Value value) {
  while (auto result = dyn_cast<OpResult>(value)) {
    if (auto empty = dyn_cast<tensor::EmptyOp>(result.getOwner()))
      return empty;
    OpOperand *destination = getTiedDestination(result);
    if (!destination)
      return {};
    value = destination->get();
  }
  return {};
}

/// A fill of a new empty tensor with `value`'s contents at the rewriter's
/// insertion point, when `value` is an empty tensor, a fill of one (with a
/// value defined before it) or a splat constant; null otherwise.
static Value cloneDestination(Value value, PatternRewriter &rewriter) {
  Operation *op = value.getDefiningOp();
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!op || !type || !type.hasStaticShape())
    return {};
  if (isa<tensor::EmptyOp>(op))
    return rewriter.clone(*op)->getResult(0);
  if (Value fill = createFillOfSplat(rewriter, value))
    return fill;
  auto fill = dyn_cast<linalg::FillOp>(op);
  if (!fill || !fill.hasPureTensorSemantics())
    return {};
  Value init = cloneDestination(fill.getDpsInitOperand(0)->get(), rewriter);
  if (!init)
    return {};
  IRMapping mapping;
  mapping.map(fill.getDpsInitOperand(0)->get(), init);
  return rewriter.clone(*fill, mapping)->getResult(0);
}

/// Gives `value`'s chain of destinations (a matmul into a fill of an empty
/// tensor, a loop into a zero constant) a fill and empty tensor of its own
/// where they are shared with other ops (imported graphs share one zero fill
/// among the products of one shape) or constant, so that `value` can be
/// computed in its own slice.
static void privatizeDestinations(Value value, PatternRewriter &rewriter) {
  while (auto result = dyn_cast<OpResult>(value)) {
    OpOperand *destination = getTiedDestination(result);
    if (!destination)
      return;
    Value init = destination->get();
    Operation *owner = destination->getOwner();
    if (!init.hasOneUse() || matchPattern(init, m_Constant())) {
      rewriter.setInsertionPoint(owner);
      if (Value copy = cloneDestination(init, rewriter)) {
        rewriter.modifyOpInPlace(owner, [&] { destination->set(copy); });
        init = copy;
      }
    }
    value = init;
  }
}

/// Flattens `value` to 1-D (rank 0 and rank > 1 reshape, rank 1 is kept).
static Value reshapeToFlat(OpBuilder &builder, Location loc, Value value,
                           RankedTensorType flatType) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getRank() == 1)
    return value;
  if (type.getRank() == 0)
    return tensor::ExpandShapeOp::create(builder, loc, flatType, value,
                                         ArrayRef<ReassociationIndices>{});
  ReassociationIndices all;
  for (int64_t i = 0; i < type.getRank(); ++i)
    all.push_back(i);
  return tensor::CollapseShapeOp::create(builder, loc, value, {all});
}

/// The flat buffer of a unit's gradients: each named tensor at its offset,
/// zeros only where no gradient lands (padding, frozen parameters).
///
/// The buffer is threaded through the computation rather than assembled at
/// the end: a value computed into an empty tensor of its own (a weight
/// gradient: a matmul into a fill of an empty tensor) is computed directly in
/// its slice of the buffer, and inserted right after it is produced. After
/// bufferization every gradient is written once, in place. (Empty-tensor
/// elimination does this for 1-D values whose producers follow the insertion,
/// but not through a reshape, nor for values produced earlier.)
struct LowerFlatten : public OpRewritePattern<FlattenOp> {
  using OpRewritePattern::OpRewritePattern;

  struct Piece {
    Value value;
    ParamAttr param;
    tensor::EmptyOp root; // computed in its slice when set
    bool early;           // inserted right after its producer when set
  };

  LogicalResult matchAndRewrite(FlattenOp op,
                                PatternRewriter &rewriter) const override {
    auto unit =
        SymbolTable::lookupNearestSymbolFrom<UnitOp>(op, op.getUnitAttr());
    Block *block = op->getBlock();
    SmallVector<Piece> pieces;
    llvm::SmallPtrSet<Operation *, 8> roots;
    for (auto [name, value] : llvm::zip(
             op.getParams().getAsValueRange<StringAttr>(), op.getValues())) {
      Piece piece{value, unit.lookupParam(name), {}, false};
      Operation *producer = value.getDefiningOp();
      piece.early = producer && producer->getBlock() == block;
      if (piece.early)
        privatizeDestinations(value, rewriter);
      tensor::EmptyOp root = piece.early ? findRootEmpty(value) : nullptr;
      if (root && root != producer && root->hasOneUse() &&
          root->getBlock() == block && roots.insert(root).second)
        piece.root = root;
      pieces.push_back(piece);
    }

    // Where the buffer must exist: before the first root or early value.
    Operation *first = op;
    for (Piece &piece : pieces) {
      Operation *anchor =
          piece.root ? piece.root.getOperation() : piece.value.getDefiningOp();
      if (piece.early && anchor->isBeforeInBlock(first))
        first = anchor;
    }
    rewriter.setInsertionPoint(first);
    Value flat = createZeroFilledGaps(op, pieces, rewriter);

    // Slices taken and values inserted in block order, so each slice comes
    // from the buffer as it is at that point.
    struct Event {
      Operation *anchor;
      bool isInsert;
      Piece *piece;
    };
    SmallVector<Event> events;
    for (Piece &piece : pieces) {
      if (piece.root)
        events.push_back({piece.root, false, &piece});
      if (piece.early)
        events.push_back({piece.value.getDefiningOp(), true, &piece});
    }
    llvm::stable_sort(events, [](const Event &a, const Event &b) {
      return a.anchor != b.anchor && a.anchor->isBeforeInBlock(b.anchor);
    });
    // A producer of several pieces (a fused linear backward: weight and bias
    // gradients) gets its insertions one after the other.
    DenseMap<Operation *, Operation *> lastInsertAfter;
    for (Event &event : events) {
      if (event.isInsert) {
        Operation *&after = lastInsertAfter[event.anchor];
        rewriter.setInsertionPointAfter(after ? after : event.anchor);
        flat = insertPiece(rewriter, *event.piece, flat);
        after = flat.getDefiningOp();
        continue;
      }
      tensor::EmptyOp root = event.piece->root;
      rewriter.setInsertionPoint(root);
      rewriter.replaceOp(root, sliceParameter(rewriter, root.getLoc(), flat,
                                              event.piece->param));
    }
    rewriter.setInsertionPoint(op);
    for (Piece &piece : pieces)
      if (!piece.early)
        flat = insertPiece(rewriter, piece, flat);
    rewriter.replaceOp(op, flat);
    return success();
  }

  static Value createZeroFilledGaps(FlattenOp op, ArrayRef<Piece> pieces,
                                    PatternRewriter &rewriter) {
    Location loc = op.getLoc();
    RankedTensorType flatType = op.getResult().getType();
    Type elementType = flatType.getElementType();
    Value flat = tensor::EmptyOp::create(rewriter, loc, flatType.getShape(),
                                         elementType);
    SmallVector<std::pair<int64_t, int64_t>> covered;
    for (const Piece &piece : pieces)
      covered.push_back({piece.param.getOffset(), piece.param.getEnd()});
    llvm::sort(covered);
    int64_t next = 0;
    covered.push_back({flatType.getNumElements(), flatType.getNumElements()});
    for (auto [begin, end] : covered) {
      if (begin > next) {
        Value gap =
            tensor::EmptyOp::create(rewriter, loc, {begin - next}, elementType);
        Value zero = arith::ConstantOp::create(
            rewriter, loc, rewriter.getZeroAttr(elementType));
        gap = linalg::FillOp::create(rewriter, loc, zero, gap).getResult(0);
        flat = tensor::InsertSliceOp::create(
            rewriter, loc, gap, flat,
            ArrayRef<OpFoldResult>{rewriter.getIndexAttr(next)},
            ArrayRef<OpFoldResult>{rewriter.getIndexAttr(begin - next)},
            ArrayRef<OpFoldResult>{rewriter.getIndexAttr(1)});
      }
      next = std::max(next, end);
    }
    return flat;
  }

  static Value insertPiece(OpBuilder &builder, const Piece &piece, Value flat) {
    Location loc = piece.value.getLoc();
    auto type = cast<RankedTensorType>(piece.value.getType());
    auto flatType = RankedTensorType::get({piece.param.getNumElements()},
                                          type.getElementType());
    Value flatValue = reshapeToFlat(builder, loc, piece.value, flatType);
    return tensor::InsertSliceOp::create(
        builder, loc, flatValue, flat,
        ArrayRef<OpFoldResult>{builder.getIndexAttr(piece.param.getOffset())},
        ArrayRef<OpFoldResult>{
            builder.getIndexAttr(piece.param.getNumElements())},
        ArrayRef<OpFoldResult>{builder.getIndexAttr(1)});
  }
};

} // namespace

/// The all-gather that returns `value` (the synchronous form, or the start
/// whose wait returns it), if any.
static Operation *getGather(Value value) {
  if (auto gather = value.getDefiningOp<AllGatherOp>())
    return gather;
  auto wait = value.getDefiningOp<WaitOp>();
  if (!wait)
    return nullptr;
  return wait.getFuture().getDefiningOp<AllGatherStartOp>();
}

/// zest.unpack of a gathered bucket: each member copied out into a buffer of
/// its own, which counts as gathered parameters from its allocation, like
/// the buffer of an unbucketed gather. Under mixed precision the members are
/// copied in the wire type and widened where they are used. Runs before the
/// collectives are lowered, while the gather is still recognizable.
static void lowerGatheredUnpack(UnpackOp op, Operation *gather) {
  OpBuilder builder(op);
  Location loc = op.getLoc();
  int64_t pieces = op.getPieces();
  Value gathered = op.getInput();
  Type wireType = getInfo(gather).wireType;
  // The gather's result is the widening of what arrived: this rounding of
  // it folds away, leaving the received buffer.
  if (wireType)
    gathered = convertElements(builder, loc, gathered, wireType);
  auto inType = cast<RankedTensorType>(gathered.getType());
  Type elementType = inType.getElementType();
  Value input = bufferization::ToBufferOp::create(
      builder, loc, MemRefType::get(inType.getShape(), elementType), gathered,
      /*read_only=*/true);
  RankedTensorType rowsType = getRowsType(inType, pieces);
  Value rows = memref::ExpandShapeOp::create(
      builder, loc, MemRefType::get(rowsType.getShape(), elementType), input,
      ArrayRef<ReassociationIndices>{{0, 1}});
  SmallVector<Value> results;
  for (auto [result, column] :
       llvm::zip(op.getResults(),
                 getPartColumns(op.getResults().getTypes(), pieces))) {
    auto type = cast<RankedTensorType>(result.getType());
    Value full = memref::AllocOp::create(
        builder, loc, MemRefType::get(type.getShape(), elementType));
    callRuntime(builder, loc, "zest_pool_mark_gathered", {},
                getElementPointer(builder, loc, full));
    int64_t width = type.getNumElements() / pieces;
    ColumnBlock block(builder, pieces, column, width);
    Value source = memref::SubViewOp::create(builder, loc, rows, block.offsets,
                                             block.sizes, block.strides);
    Value target = memref::ExpandShapeOp::create(
        builder, loc, MemRefType::get({pieces, width}, elementType), full,
        ArrayRef<ReassociationIndices>{{0, 1}});
    memref::CopyOp::create(builder, loc, source, target);
    Value member = bufferization::ToTensorOp::create(
        builder, loc, type.clone(elementType), full, /*restrict=*/true,
        /*writable=*/true);
    if (wireType)
      member = convertElements(builder, loc, member, type.getElementType());
    results.push_back(member);
  }
  op->replaceAllUsesWith(results);
  op->erase();
}

void zest_to_runtime::lowerGatheredUnpacks(ModuleOp module) {
  module.walk([](UnpackOp op) {
    if (Operation *gather = getGather(op.getInput()))
      lowerGatheredUnpack(op, gather);
  });
}

void zest_to_runtime::populateViewPatterns(RewritePatternSet &patterns) {
  patterns.add<LowerUnflatten, LowerFlatten, LowerPack, LowerUnpack>(
      patterns.getContext());
}
