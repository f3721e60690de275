//===- Collectives.cpp - Zest collectives to runtime calls ----------------===//
//
// zest.all_gather, zest.reduce_scatter and zest.all_reduce, synchronous or as
// *_start / zest.wait pairs, become zest_<kind>_start / zest_wait calls on
// the raw pointers of their buffers; over one rank they move nothing. Under
// mixed precision what is sent is rounded to the wire type first and what
// arrives is widened (Widening.cpp moves the widening to its uses).
//
//===----------------------------------------------------------------------===//

#include "ZestToRuntime.h"
#include "zest/Conversion/RuntimeCalls.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::zest;
using namespace mlir::zest::zest_to_runtime;

/// The runtime's zest_dtype_t code of `type`, or -1.
static int64_t getDTypeCode(Type type) {
  if (type.isF32())
    return ZEST_F32;
  if (type.isF64())
    return ZEST_F64;
  if (type.isF16())
    return ZEST_F16;
  if (type.isBF16())
    return ZEST_BF16;
  if (type.isInteger(32))
    return ZEST_I32;
  if (type.isInteger(64))
    return ZEST_I64;
  if (type.isInteger(8))
    return ZEST_I8;
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

/// This rank's index in `group`, as an index.
Value zest_to_runtime::getGroupRank(OpBuilder &builder, Location loc,
                                    zest_group_t group) {
  Value rank =
      callRuntime(
          builder, loc, "zest_group_rank", builder.getI32Type(),
          ValueRange{arith::ConstantIntOp::create(builder, loc, group, 32)})
          .getResult(0);
  return arith::IndexCastOp::create(builder, loc, builder.getIndexType(), rank);
}

/// Starts the collective: returns the request handle and the result buffer
/// (of the wire type under mixed precision).
FailureOr<std::pair<Value, Value>>
zest_to_runtime::startCollective(PatternRewriter &rewriter, Operation *op,
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
Value zest_to_runtime::finishCollective(PatternRewriter &rewriter, Location loc,
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
CollectiveInfo zest_to_runtime::getInfo(Operation *op) {
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
            return CollectiveInfo{"all_reduce",
                                  reduce.getInput(),
                                  result,
                                  reduce.getUnit(),
                                  result.getNumElements(),
                                  reduce.getReduction(),
                                  /*gathers=*/false,
                                  !acrossReplicas  ? ZEST_GROUP_WORLD
                                  : layout.experts ? ZEST_GROUP_EXPERT_REPLICA
                                                   : ZEST_GROUP_REPLICA,
                                  acrossReplicas ? layout.replicas
                                                 : layout.getNumRanks()};
          });
  info.wireType = info.gathers ? layout.gatherType : layout.reduceType;
  return info;
}

/// Over one rank a collective moves nothing.
static bool isNoOp(const CollectiveInfo &info) { return info.groupSize == 1; }

namespace {

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

} // namespace

void zest_to_runtime::populateCollectivePatterns(RewritePatternSet &patterns) {
  patterns.add<
      LowerSyncCollective<AllGatherOp>, LowerSyncCollective<ReduceScatterOp>,
      LowerSyncCollective<AllReduceOp>, LowerAsyncCollective, LowerRank>(
      patterns.getContext());
}
