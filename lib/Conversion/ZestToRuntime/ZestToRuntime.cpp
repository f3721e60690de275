//===- ZestToRuntime.cpp - Lower Zest ops to runtime calls ----------------===//

#include "zest/Conversion/Passes.h"
#include "zest/Conversion/RuntimeCalls.h"
#include "zest/Dialect/Zest/IR/ZestOps.h"
#include "zest/Dialect/Zest/Transforms/ElementwiseFusion.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/TypeSwitch.h"

#include "zest_runtime.h"

namespace mlir::zest {
#define GEN_PASS_DEF_CONVERTZESTTORUNTIMEPASS
#include "zest/Conversion/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

/// The runtime's zest_dtype_t code of `type`, or -1.
static int64_t getDTypeCode(Type type) {
  if (type.isF32())
    return 0;
  if (type.isF64())
    return 1;
  if (type.isF16())
    return 2;
  if (type.isBF16())
    return 3;
  if (type.isInteger(32))
    return 4;
  if (type.isInteger(64))
    return 5;
  if (type.isInteger(8))
    return 6;
  return -1;
}

/// A `const char *` naming the unit, for the runtime's traces.
static Value getUnitTag(OpBuilder &builder, Location loc, StringRef unit) {
  std::string symbol = ("zest.tag." + unit).str();
  std::string text = (unit + Twine('\0')).str();
  auto module =
      builder.getInsertionBlock()->getParentOp()->getParentOfType<ModuleOp>();
  auto ptrType = LLVM::LLVMPointerType::get(builder.getContext());
  if (!module.lookupSymbol(symbol)) {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToStart(module.getBody());
    auto arrayType = LLVM::LLVMArrayType::get(builder.getI8Type(), text.size());
    LLVM::GlobalOp::create(builder, loc, arrayType, /*isConstant=*/true,
                           LLVM::Linkage::Internal, symbol,
                           builder.getStringAttr(text));
  }
  return LLVM::AddressOfOp::create(builder, loc, ptrType, symbol);
}

namespace {

/// What a collective sends and receives, independent of its sync/async form.
struct CollectiveInfo {
  /// "all_gather", "reduce_scatter" or "all_reduce": the runtime's
  /// zest_<kind>_start.
  StringRef kind;
  Value input;
  RankedTensorType resultType;
  StringRef unit;
  /// The runtime's `count`: per rank for gathers and reduce-scatters.
  int64_t count;
  std::optional<Reduction> reduction;
  bool gathers;
  /// The ranks it runs over, and how many they are.
  zest_group_t group;
  int64_t groupSize;
  /// Mixed precision: the type the f32 buffers are rounded to and travel
  /// as (null: theirs).
  Type wireType = {};
};

/// This rank's index in `group`, as an index.
static Value getGroupRank(OpBuilder &builder, Location loc,
                          zest_group_t group) {
  Value rank =
      callRuntime(
          builder, loc, "zest_group_rank", builder.getI32Type(),
          ValueRange{arith::ConstantIntOp::create(builder, loc, group, 32)})
          .getResult(0);
  return arith::IndexCastOp::create(builder, loc, builder.getIndexType(), rank);
}

/// Whether `generic` maps one input to one output element by element (all
/// parallel, identity maps): a conversion or a copy.
static bool isPointwise(linalg::GenericOp generic) {
  return generic.getNumDpsInputs() == 1 && generic.getNumDpsInits() == 1 &&
         generic.isAllParallelLoops() &&
         llvm::all_of(generic.getIndexingMapsArray(),
                      [](AffineMap map) { return map.isIdentity(); });
}

/// `tensor` with its elements rounded (truncf) or widened (extf) to
/// `elementType`: an elementwise linalg.generic, which fuses with the model's
/// own elementwise ops and runs wherever they run (a kernel on a GPU).
static Value convertElements(OpBuilder &builder, Location loc, Value tensor,
                             Type elementType) {
  auto type = cast<RankedTensorType>(tensor.getType());
  auto resultType = type.clone(elementType);
  Value init =
      tensor::EmptyOp::create(builder, loc, resultType.getShape(), elementType);
  unsigned rank = type.getRank();
  AffineMap id = builder.getMultiDimIdentityMap(rank);
  bool widens = elementType.getIntOrFloatBitWidth() >
                type.getElementType().getIntOrFloatBitWidth();
  return linalg::GenericOp::create(
             builder, loc, resultType, tensor, init,
             SmallVector<AffineMap>{id, id},
             SmallVector<utils::IteratorType>(rank,
                                              utils::IteratorType::parallel),
             [&](OpBuilder &b, Location l, ValueRange args) {
               Value converted =
                   widens ? arith::ExtFOp::create(b, l, elementType, args[0])
                                .getResult()
                          : arith::TruncFOp::create(b, l, elementType, args[0])
                                .getResult();
               linalg::YieldOp::create(b, l, converted);
             })
      .getResult(0);
}

/// The input of `op` if it is a convertElements widening (extf), else null.
static Value getWidenedInput(Operation *op) {
  auto generic = dyn_cast_or_null<linalg::GenericOp>(op);
  if (!generic || !isPointwise(generic))
    return {};
  Block &body = generic.getRegion().front();
  auto extf = dyn_cast<arith::ExtFOp>(body.front());
  if (!extf || body.getOperations().size() != 2 ||
      extf.getIn() != body.getArgument(0) ||
      body.getTerminator()->getOperand(0) != extf.getResult())
    return {};
  return generic.getDpsInputs()[0];
}

/// Starts the collective: returns the request handle and the result buffer
/// (of the wire type under mixed precision).
static FailureOr<std::pair<Value, Value>>
startCollective(PatternRewriter &rewriter, Operation *op,
                const CollectiveInfo &info) {
  Type wireType =
      info.wireType ? info.wireType : info.resultType.getElementType();
  int64_t dtype = getDTypeCode(wireType);
  if (dtype < 0)
    return rewriter.notifyMatchFailure(op, "element type without runtime "
                                           "dtype");
  Location loc = op->getLoc();
  auto recvType = MemRefType::get(info.resultType.getShape(), wireType);
  // Mixed precision: the compiled step rounds what it sends, so the
  // collective moves (and reduces) the wire type on any backend. A gather
  // rounds its shard straight into this rank's slot of the gathered buffer
  // and runs in place (NCCL's and MPI's in-place all-gather): no send
  // buffer of its own.
  bool inPlace = info.wireType && info.gathers && recvType.getRank() == 1;
  Value send;
  if (!inPlace) {
    Value input = info.input;
    if (info.wireType)
      input = convertElements(rewriter, loc, input, wireType);
    auto inType = cast<RankedTensorType>(input.getType());
    send = bufferization::ToBufferOp::create(
        rewriter, loc,
        MemRefType::get(inType.getShape(), inType.getElementType()), input,
        /*read_only=*/true);
  }
  Value recv = memref::AllocOp::create(rewriter, loc, recvType);
  // A gathered buffer counts from its allocation: with prefetch it is held
  // while its gather is in flight.
  if (info.gathers)
    callRuntime(rewriter, loc, "zest_pool_mark_gathered", {},
                getElementPointer(rewriter, loc, recv));
  if (inPlace) {
    Value offset = arith::MulIOp::create(
        rewriter, loc, getGroupRank(rewriter, loc, info.group),
        arith::ConstantIndexOp::create(rewriter, loc, info.count));
    send = memref::SubViewOp::create(
        rewriter, loc, recv, ArrayRef<OpFoldResult>{offset},
        ArrayRef<OpFoldResult>{rewriter.getIndexAttr(info.count)},
        ArrayRef<OpFoldResult>{rewriter.getIndexAttr(1)});
    Value rounded = convertElements(rewriter, loc, info.input, wireType);
    bufferization::MaterializeInDestinationOp::create(
        rewriter, loc, TypeRange{}, rounded, send, /*restrict=*/true,
        /*writable=*/true);
  }
  SmallVector<Value> args = {
      getElementPointer(rewriter, loc, send),
      getElementPointer(rewriter, loc, recv),
      arith::ConstantIntOp::create(rewriter, loc, info.count, 64),
      arith::ConstantIntOp::create(rewriter, loc, dtype, 32)};
  if (info.reduction)
    args.push_back(arith::ConstantIntOp::create(
        rewriter, loc, static_cast<int64_t>(*info.reduction), 32));
  args.push_back(arith::ConstantIntOp::create(rewriter, loc, info.group, 32));
  args.push_back(getUnitTag(rewriter, loc, info.unit));
  std::string startFn = ("zest_" + info.kind + "_start").str();
  Value request =
      callRuntime(rewriter, loc, startFn, rewriter.getI64Type(), args)
          .getResult(0);
  return std::make_pair(request, recv);
}

/// Waits for `request` and returns the result buffer as a tensor of
/// `resultType` (widened from the wire type under mixed precision).
static Value finishCollective(PatternRewriter &rewriter, Location loc,
                              Value request, Value recv,
                              RankedTensorType resultType) {
  callRuntime(rewriter, loc, "zest_wait", {}, request);
  auto recvType = cast<MemRefType>(recv.getType());
  Value received = bufferization::ToTensorOp::create(
      rewriter, loc, resultType.clone(recvType.getElementType()), recv,
      /*restrict=*/true, /*writable=*/true);
  if (recvType.getElementType() == resultType.getElementType())
    return received;
  return convertElements(rewriter, loc, received, resultType.getElementType());
}

/// Over one rank a collective returns its input (shard == full buffer);
/// under mixed precision rounded to the wire type, so that every world
/// size computes with the same values.
static Value replaceNoOp(PatternRewriter &rewriter, Location loc,
                         const CollectiveInfo &info) {
  if (!info.wireType)
    return info.input;
  Value rounded = convertElements(rewriter, loc, info.input, info.wireType);
  return convertElements(rewriter, loc, rounded,
                         info.resultType.getElementType());
}

/// What `op` moves, over which ranks, and as which type: gathers travel as
/// the layout's gather_type, gradient reductions as its reduce_type (mixed
/// precision).
static CollectiveInfo getInfo(Operation *op) {
  Type resultType = op->getResult(0).getType();
  if (auto future = dyn_cast<FutureType>(resultType))
    resultType = future.getValueType();
  auto result = cast<RankedTensorType>(resultType);
  // A unit's or a bucket's layout (the verifier resolved it).
  CollectiveLayout layout =
      *lookupCollectiveLayout(op, op->getAttrOfType<FlatSymbolRefAttr>("unit"));
  // Synchronous and asynchronous forms share their accessors. Gathers and
  // reduce-scatters run within a replica group (the whole world without
  // hybrid sharding), replicated units' all-reduces over every rank.
  CollectiveInfo info =
      llvm::TypeSwitch<Operation *, CollectiveInfo>(op)
          .Case<AllGatherOp, AllGatherStartOp>([&](auto gather) {
            return CollectiveInfo{"all_gather",
                                  gather.getShard(),
                                  result,
                                  gather.getUnit(),
                                  gather.getShard().getType().getNumElements(),
                                  std::nullopt,
                                  /*gathers=*/true,
                                  ZEST_GROUP_SHARD,
                                  layout.worldSize};
          })
          .Case<ReduceScatterOp, ReduceScatterStartOp>([&](auto scatter) {
            return CollectiveInfo{"reduce_scatter",
                                  scatter.getInput(),
                                  result,
                                  scatter.getUnit(),
                                  result.getNumElements(),
                                  scatter.getReduction(),
                                  /*gathers=*/false,
                                  ZEST_GROUP_SHARD,
                                  layout.worldSize};
          })
          .Case<AllReduceOp, AllReduceStartOp>([&](auto reduce) {
            bool acrossReplicas = reduce.getAcrossReplicas();
            return CollectiveInfo{
                "all_reduce",
                reduce.getInput(),
                result,
                reduce.getUnit(),
                result.getNumElements(),
                reduce.getReduction(),
                /*gathers=*/false,
                acrossReplicas ? ZEST_GROUP_REPLICA : ZEST_GROUP_WORLD,
                acrossReplicas ? layout.replicas : layout.getNumRanks()};
          });
  info.wireType = info.gathers ? layout.gatherType : layout.reduceType;
  return info;
}

/// Over one rank a collective moves nothing.
static bool isNoOp(const CollectiveInfo &info) { return info.groupSize == 1; }

/// Synchronous collectives: start and wait in place.
template <typename OpTy>
struct LowerSyncCollective : public OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    CollectiveInfo info = getInfo(op);
    if (isNoOp(info)) {
      rewriter.replaceOp(op, replaceNoOp(rewriter, op.getLoc(), info));
      return success();
    }
    auto started = startCollective(rewriter, op, info);
    if (failed(started))
      return failure();
    rewriter.replaceOp(op,
                       finishCollective(rewriter, op.getLoc(), started->first,
                                        started->second, info.resultType));
    return success();
  }
};

/// An asynchronous pair: the start call where the `*_start` op is, the wait
/// where `zest.wait` is (the verifier guarantees the pair is 1:1).
struct LowerAsyncCollective : public OpRewritePattern<WaitOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(WaitOp wait,
                                PatternRewriter &rewriter) const override {
    Operation *start = wait.getFuture().getDefiningOp();
    if (!start)
      return rewriter.notifyMatchFailure(wait, "future is not a start op");
    CollectiveInfo info = getInfo(start);
    if (isNoOp(info)) {
      rewriter.setInsertionPoint(start);
      rewriter.replaceOp(wait, replaceNoOp(rewriter, start->getLoc(), info));
      rewriter.eraseOp(start);
      return success();
    }
    rewriter.setInsertionPoint(start);
    auto started = startCollective(rewriter, start, info);
    if (failed(started))
      return failure();
    rewriter.setInsertionPoint(wait);
    rewriter.replaceOp(wait,
                       finishCollective(rewriter, wait.getLoc(), started->first,
                                        started->second, info.resultType));
    rewriter.eraseOp(start);
    return success();
  }
};

/// The parameter's elements, reshaped to its type: a view once bufferized.
struct LowerUnflatten : public OpRewritePattern<UnflattenOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(UnflattenOp op,
                                PatternRewriter &rewriter) const override {
    auto unit =
        SymbolTable::lookupNearestSymbolFrom<UnitOp>(op, op.getUnitAttr());
    ParamAttr param = unit.lookupParam(op.getParam());
    Location loc = op.getLoc();
    RankedTensorType type = param.getValueType();
    Value slice = tensor::ExtractSliceOp::create(
        rewriter, loc, op.getFlat(),
        ArrayRef<OpFoldResult>{rewriter.getIndexAttr(param.getOffset())},
        ArrayRef<OpFoldResult>{rewriter.getIndexAttr(param.getNumElements())},
        ArrayRef<OpFoldResult>{rewriter.getIndexAttr(1)});
    rewriter.replaceOp(op, reshapeFromFlat(rewriter, loc, slice, type));
    return success();
  }

  static Value reshapeFromFlat(OpBuilder &builder, Location loc, Value flat,
                               RankedTensorType type) {
    if (type.getRank() == 1)
      return flat;
    if (type.getRank() == 0)
      return tensor::CollapseShapeOp::create(builder, loc, type, flat,
                                             ArrayRef<ReassociationIndices>{});
    ReassociationIndices all;
    for (int64_t i = 0; i < type.getRank(); ++i)
      all.push_back(i);
    return tensor::ExpandShapeOp::create(builder, loc, type, flat, {all});
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

/// The empty tensor whose buffer `value` is computed in, through the inits
/// of destination-style producers (a matmul into a fill of an empty tensor).
static tensor::EmptyOp findRootEmpty(Value value) {
  while (auto result = dyn_cast<OpResult>(value)) {
    Operation *producer = result.getOwner();
    if (auto empty = dyn_cast<tensor::EmptyOp>(producer))
      return empty;
    auto dps = dyn_cast<DestinationStyleOpInterface>(producer);
    if (!dps)
      return {};
    value = dps.getTiedOpOperand(result)->get();
  }
  return {};
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
      Value slice =
          extractSlice(rewriter, root.getLoc(), flat, event.piece->param);
      rewriter.replaceOp(
          root, LowerUnflatten::reshapeFromFlat(rewriter, root.getLoc(), slice,
                                                root.getType()));
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

  static Value extractSlice(OpBuilder &builder, Location loc, Value flat,
                            ParamAttr param) {
    return tensor::ExtractSliceOp::create(
        builder, loc, flat,
        ArrayRef<OpFoldResult>{builder.getIndexAttr(param.getOffset())},
        ArrayRef<OpFoldResult>{builder.getIndexAttr(param.getNumElements())},
        ArrayRef<OpFoldResult>{builder.getIndexAttr(1)});
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

/// The shard index, from the runtime (the same program runs on every rank):
/// the rank within the shard group, the world rank without hybrid sharding.
struct LowerRank : public OpRewritePattern<RankOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RankOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op,
                       getGroupRank(rewriter, op.getLoc(), ZEST_GROUP_SHARD));
    return success();
  }
};

/// Buffers are freed after their last use by ownership-based deallocation.
struct DropRelease : public OpRewritePattern<ReleaseOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReleaseOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.eraseOp(op);
    return success();
  }
};

/// A 0-d tensor holding zero, where sums of squares accumulate.
static Value buildZeroScalarTensor(OpBuilder &builder, Location loc) {
  Type f32 = builder.getF32Type();
  Value init = tensor::EmptyOp::create(builder, loc, ArrayRef<int64_t>{}, f32);
  Value zero =
      arith::ConstantOp::create(builder, loc, builder.getZeroAttr(f32));
  return linalg::FillOp::create(builder, loc, zero, init).getResult(0);
}

/// The sum of squares of `(accum ? accum + grad : grad) * scale`, added to
/// `init` (a 0-d tensor), as a 0-d tensor.
static Value buildSumOfSquares(OpBuilder &builder, Location loc, Value grad,
                               Value accum, Value scale, Value init) {
  SmallVector<Value> ins = {grad};
  if (accum)
    ins.push_back(accum);
  MLIRContext *ctx = builder.getContext();
  AffineMap id = AffineMap::getMultiDimIdentityMap(1, ctx);
  SmallVector<AffineMap> maps(ins.size(), id);
  maps.push_back(AffineMap::get(1, 0, ctx));
  auto sum = linalg::GenericOp::create(
      builder, loc, init.getType(), ins, init, maps,
      SmallVector<utils::IteratorType>{utils::IteratorType::reduction},
      [&](OpBuilder &b, Location l, ValueRange args) {
        Value g = args[0];
        if (accum)
          g = arith::AddFOp::create(b, l, args[1], g);
        Value e = arith::MulFOp::create(b, l, g, scale);
        Value square = arith::MulFOp::create(b, l, e, e);
        linalg::YieldOp::create(
            b, l,
            ValueRange{
                arith::AddFOp::create(b, l, args.back(), square).getResult()});
      });
  return sum.getResult(0);
}

/// The global gradient norm: per unit the sum of squares of the gradient
/// the update applies (the accumulator is read only when accumulating),
/// divided by the number of ranks holding the same values (a replicated
/// unit's world, a sharded unit's replicas under hybrid sharding), summed
/// over ranks, then the square root.
struct LowerGlobalGradNorm : public OpRewritePattern<GlobalGradNormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GlobalGradNormOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type f32 = rewriter.getF32Type();
    Value hyper = op.getHyper();
    auto hyperAt = [&](int64_t index) -> Value {
      Value position = arith::ConstantIndexOp::create(rewriter, loc, index);
      return tensor::ExtractOp::create(rewriter, loc, hyper, position);
    };
    Value zero =
        arith::ConstantOp::create(rewriter, loc, rewriter.getZeroAttr(f32));
    Value accumulate =
        arith::CmpFOp::create(rewriter, loc, arith::CmpFPredicate::UNE,
                              hyperAt(ZEST_HYPER_ACCUMULATE), zero);
    Value scale = hyperAt(ZEST_HYPER_GRAD_SCALE);
    Value total = zero;
    int64_t world = 1;
    for (auto [index, ref, grad] : llvm::enumerate(
             op.getUnits().getAsRange<FlatSymbolRefAttr>(), op.getGrads())) {
      auto unit = SymbolTable::lookupNearestSymbolFrom<UnitOp>(op, ref);
      world = std::max<int64_t>(world, unit.getNumRanks());
      // Without accumulators (no_sync) the gradient is the whole sum. With
      // them, both branches sum into the same buffer, so the branch leaves
      // nothing but computation on buffers (a kernel; on a GPU no host
      // scalar) once bufferization writes in place.
      Value init = buildZeroScalarTensor(rewriter, loc), sum;
      if (op.getAccums().empty()) {
        sum = buildSumOfSquares(rewriter, loc, grad, Value(), scale, init);
      } else {
        Value accum = op.getAccums()[index];
        sum =
            scf::IfOp::create(
                rewriter, loc, accumulate,
                [&](OpBuilder &b, Location l) {
                  scf::YieldOp::create(
                      b, l, buildSumOfSquares(b, l, grad, accum, scale, init));
                },
                [&](OpBuilder &b, Location l) {
                  scf::YieldOp::create(
                      b, l,
                      buildSumOfSquares(b, l, grad, Value(), scale, init));
                })
                .getResult(0);
      }
      Value partial =
          tensor::ExtractOp::create(rewriter, loc, sum, ValueRange{});
      int64_t copies =
          unit.isSharded() ? unit.getNumReplicas() : unit.getNumRanks();
      if (copies > 1)
        partial = arith::DivFOp::create(
            rewriter, loc, partial,
            arith::ConstantOp::create(
                rewriter, loc, rewriter.getF32FloatAttr(double(copies))));
      total = arith::AddFOp::create(rewriter, loc, total, partial);
    }
    if (world > 1) {
      auto vectorType = RankedTensorType::get({1}, f32);
      Value local =
          tensor::FromElementsOp::create(rewriter, loc, vectorType, total);
      CollectiveInfo info{"all_reduce",
                          local,
                          vectorType,
                          "grad-norm",
                          1,
                          Reduction::Sum,
                          /*gathers=*/false,
                          ZEST_GROUP_WORLD,
                          world};
      auto started = startCollective(rewriter, op, info);
      if (failed(started))
        return failure();
      Value summed = finishCollective(rewriter, loc, started->first,
                                      started->second, vectorType);
      Value first = arith::ConstantIndexOp::create(rewriter, loc, 0);
      total = tensor::ExtractOp::create(rewriter, loc, summed, first);
    }
    Value norm = math::SqrtOp::create(rewriter, loc, total);
    rewriter.replaceOpWithNewOp<tensor::FromElementsOp>(
        op, op.getNorm().getType(), norm);
    return success();
  }
};

struct ConvertZestToRuntimePass
    : public zest::impl::ConvertZestToRuntimePassBase<
          ConvertZestToRuntimePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    module.walk([](UnpackOp op) {
      if (Operation *gather = getGather(op.getInput()))
        lowerGatheredUnpack(op, gather);
    });
    RewritePatternSet patterns(&getContext());
    // Releases first, so no release keeps a gathered tensor alive.
    patterns.add<DropRelease>(&getContext(), /*benefit=*/2);
    patterns.add<
        LowerSyncCollective<AllGatherOp>, LowerSyncCollective<ReduceScatterOp>,
        LowerSyncCollective<AllReduceOp>, LowerAsyncCollective, LowerUnflatten,
        LowerFlatten, LowerPack, LowerUnpack, LowerRank, LowerGlobalGradNorm,
        SinkWidenIntoView<tensor::ExtractSliceOp>,
        SinkWidenIntoView<tensor::ExpandShapeOp>,
        SinkWidenIntoView<tensor::CollapseShapeOp>, FuseWidenIntoConsumer>(
        &getContext());
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    config.enableFolding(false);
    if (failed(applyPatternsGreedily(module, std::move(patterns), config)))
      return signalPassFailure();
    // Anything left (an element type the runtime cannot move) is an error.
    // Fused linear ops are compute, lowered after bufferization.
    WalkResult result = module.walk([](Operation *op) {
      if (isa<ZestDialect>(op->getDialect()) &&
          !isa<UnitOp, BucketOp, LinearOp, LinearBackwardOp>(op)) {
        op->emitOpError() << "cannot be lowered to the runtime: element "
                          << "types must be f32, f64, f16, bf16, i8, i32 or "
                          << "i64";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
