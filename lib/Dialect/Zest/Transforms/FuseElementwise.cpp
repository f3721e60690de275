//===- FuseElementwise.cpp - Elementwise producers into consumers ---------===//
//
// Each linalg op becomes its own loop nest and full pass over memory; a chain
// of elementwise ops writes and re-reads a temporary per link. Upstream's
// elementwise fusion does the rewrite; this pass decides where it pays off
// for Zest: never into a matrix product (BLAS needs the plain product), never
// duplicating a producer's work.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/Contraction.h"
#include "zest/Dialect/Zest/Transforms/ElementwiseFusion.h"
#include "zest/Dialect/Zest/Transforms/Passes.h"
#include "zest/Dialect/Zest/Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::zest {
#define GEN_PASS_DEF_FUSEELEMENTWISEPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

namespace {

/// True if the producer of `operand` fuses into its consumer without
/// recomputing an element per read: an elementwise generic into a consumer
/// that is not a matrix product, read element by element.
bool isFusableRead(OpOperand &operand) {
  auto consumer = cast<linalg::LinalgOp>(operand.getOwner());
  auto producer = operand.get().getDefiningOp<linalg::GenericOp>();
  if (!producer || getGemmBatchDims(consumer) || !producer.isAllParallelLoops())
    return false;
  // A broadcasting read would recompute each element many times; a cast
  // (a 16-bit weight widened for a LayerNorm) is worth recomputing rather
  // than a pass over memory and, on a GPU, a launch of its own.
  return consumer.getMatchingIndexingMap(&operand).isPermutation() ||
         getElementConversion(producer);
}

/// True if fusing the producer of `operand` into its consumer saves a pass
/// without costing work (ElementwiseFusion.h).
bool isProfitable(OpOperand &operand) {
  if (!isFusableRead(operand))
    return false;
  for (Value result : operand.get().getDefiningOp()->getResults())
    for (OpOperand &use : result.getUses())
      if (&use != &operand)
        return false;
  return true;
}

/// Fuses the producer of `operand`, which only this operand reads, into its
/// consumer; replaces and erases both.
FailureOr<linalg::GenericOp> fuseOnlyReader(RewriterBase &rewriter,
                                            OpOperand &operand) {
  Operation *consumer = operand.getOwner();
  Operation *producer = operand.get().getDefiningOp();
  FailureOr<linalg::ElementwiseOpFusionResult> fused =
      linalg::fuseElementwiseOps(rewriter, &operand);
  if (failed(fused))
    return failure();
  // Only the consumer read the producer: its results are replaced with the
  // consumer's, and the producer is dead.
  for (auto [original, replacement] : fused->replacements)
    if (original.getDefiningOp() != producer)
      rewriter.replaceAllUsesWith(original, replacement);
  rewriter.eraseOp(consumer);
  rewriter.eraseOp(producer);
  return cast<linalg::GenericOp>(fused->fusedOp);
}

} // namespace

FailureOr<linalg::GenericOp>
mlir::zest::fuseElementwiseProducer(RewriterBase &rewriter,
                                    OpOperand &operand) {
  if (!isa<linalg::GenericOp>(operand.getOwner()) ||
      !linalg::areElementwiseOpsFusable(&operand) || !isProfitable(operand))
    return failure();
  return fuseOnlyReader(rewriter, operand);
}

bool mlir::zest::isPointwise(linalg::GenericOp generic) {
  return generic.getNumDpsInputs() == 1 && generic.getNumDpsInits() == 1 &&
         generic.isAllParallelLoops() &&
         llvm::all_of(generic.getIndexingMapsArray(),
                      [](AffineMap map) { return map.isIdentity(); });
}

Operation *mlir::zest::getElementConversion(Operation *op) {
  auto generic = dyn_cast_or_null<linalg::GenericOp>(op);
  return generic && isPointwise(generic) ? getBodyConversion(generic) : nullptr;
}

Operation *mlir::zest::getBodyConversion(linalg::GenericOp generic) {
  if (generic.getNumDpsInputs() != 1 || generic.getNumDpsInits() != 1)
    return nullptr;
  Block &body = generic.getRegion().front();
  Operation &cast = body.front();
  bool converts = isa<arith::TruncFOp, arith::ExtFOp>(cast) &&
                  body.getOperations().size() == 2 &&
                  cast.getOperand(0) == body.getArgument(0) &&
                  body.getTerminator()->getOperand(0) == cast.getResult(0);
  return converts ? &cast : nullptr;
}

bool mlir::zest::isParallelGeneric(Operation *op) {
  auto generic = dyn_cast_or_null<linalg::GenericOp>(op);
  return generic && generic.isAllParallelLoops();
}

bool mlir::zest::isCopyOfInput(linalg::GenericOp generic) {
  if (generic.getNumDpsInputs() != 1 || generic.getNumDpsInits() != 1 ||
      !generic.isAllParallelLoops() || !generic.hasPureTensorSemantics())
    return false;
  SmallVector<AffineMap> maps = generic.getIndexingMapsArray();
  Block *body = generic.getBody();
  return maps[0] == maps[1] && maps[0].isPermutation() &&
         generic.getDpsInputs()[0].getType() ==
             generic.getResult(0).getType() &&
         body->getTerminator()->getOperand(0) == body->getArgument(0);
}

Value mlir::zest::convertElements(OpBuilder &builder, Location loc,
                                  Value tensor, Type elementType,
                                  ArrayRef<int64_t> permutation) {
  auto type = cast<RankedTensorType>(tensor.getType());
  unsigned rank = type.getRank();
  AffineMap id = builder.getMultiDimIdentityMap(rank);
  AffineMap inputMap = id;
  SmallVector<int64_t> shape(type.getShape());
  if (!permutation.empty()) {
    inputMap = AffineMap::getPermutationMap(permutation, builder.getContext());
    shape = applyPermutation(shape, invertPermutationVector(permutation));
  }
  auto resultType = RankedTensorType::get(shape, elementType);
  Value init = tensor::EmptyOp::create(builder, loc, shape, elementType);
  bool widens = elementType.getIntOrFloatBitWidth() >
                type.getElementType().getIntOrFloatBitWidth();
  return linalg::GenericOp::create(
             builder, loc, resultType, tensor, init,
             SmallVector<AffineMap>{inputMap, id},
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

namespace {

/// At most this many ops in a producer computed anew in each reader, and at
/// most this many readers: recomputation stays a few operations per element.
constexpr size_t kMaxRecomputedOps = 24;
constexpr unsigned kMaxRecomputingReaders = 4;

/// The op of `block` that holds the last use of `value` (the uses' ancestors
/// in `block`); null if a use lies outside `block`.
Operation *getLastUser(Value value, Block *block) {
  Operation *last = nullptr;
  for (Operation *user : value.getUsers()) {
    Operation *op = block->findAncestorOpInBlock(*user);
    if (!op)
      return nullptr;
    if (!last || last->isBeforeInBlock(op))
      last = op;
  }
  return last;
}

/// True if `generic`'s body reads one of its outputs' old values.
bool readsOutputs(linalg::GenericOp generic) {
  return llvm::any_of(generic.getDpsInitsMutable(), [&](OpOperand &init) {
    return generic.payloadUsesValueFromOperand(&init);
  });
}

/// True if `input` of a producer stays allocated until `lastReader` whether
/// or not the producer is computed again there: the caller's argument, a
/// tensor used there or later, or one smaller than the producer's result
/// (a bias, a row's statistics, a scalar), which it costs little to hold.
bool staysAlive(Value input, Operation *lastReader, ShapedType resultType) {
  auto type = dyn_cast<ShapedType>(input.getType());
  if (!type || isa<BlockArgument>(input) ||
      (type.hasStaticShape() && resultType.hasStaticShape() &&
       type.getNumElements() < resultType.getNumElements()))
    return true;
  Operation *last = getLastUser(input, lastReader->getBlock());
  return last && !last->isBeforeInBlock(lastReader);
}

/// True if every reader of `producer`'s one result can compute it anew,
/// fused in, so that it is never stored, at no cost in memory: each input
/// stays alive until the last reader anyway. GELU's and SiLU's intermediates
/// are such results: the backward reads the activation's input anyway and
/// re-derives them, as torch.compile's partitioner has it do, instead of
/// the forward storing them.
bool isRecomputable(linalg::GenericOp producer) {
  // isFusableRead checks below that the producer is elementwise.
  if (producer->getNumResults() != 1 || producer->use_empty() ||
      producer.getBody()->getOperations().size() > kMaxRecomputedOps ||
      readsOutputs(producer))
    return false;
  Value result = producer->getResult(0);
  if (llvm::hasNItemsOrMore(result.getUses(), kMaxRecomputingReaders + 1))
    return false;
  // A reader in a loop's body would compute it again on every iteration.
  for (OpOperand &use : result.getUses())
    if (use.getOwner()->getBlock() != producer->getBlock() ||
        !isa<linalg::GenericOp>(use.getOwner()) ||
        !linalg::areElementwiseOpsFusable(&use) || !isFusableRead(use))
      return false;
  Operation *lastReader = getLastUser(result, producer->getBlock());
  auto resultType = cast<ShapedType>(result.getType());
  return lastReader && llvm::all_of(producer.getDpsInputs(), [&](Value input) {
           return staysAlive(input, lastReader, resultType);
         });
}

/// Fuses a copy of `producer` into each of its readers, then erases it.
void recomputeInReaders(RewriterBase &rewriter, linalg::GenericOp producer) {
  Value result = producer->getResult(0);
  while (!result.use_empty()) {
    OpOperand &use = *result.getUses().begin();
    rewriter.setInsertionPoint(use.getOwner());
    Operation *copy = rewriter.clone(*producer);
    rewriter.modifyOpInPlace(use.getOwner(),
                             [&] { use.set(copy->getResult(0)); });
    // isRecomputable checked that it fuses; were it not to, the copy
    // stays, still correct.
    (void)fuseOnlyReader(rewriter, use);
  }
  rewriter.eraseOp(producer);
}

/// True if `reshape` (an expand_shape or collapse_shape) only inserts or
/// drops unit dimensions, between an elementwise generic that only it reads
/// and one that is its only reader.
template <typename ReshapeOp>
bool isUnitReshapeBetweenElementwise(ReshapeOp reshape,
                                     ShapedType expandedType) {
  bool unitOnly = llvm::all_of(
      reshape.getReassociationIndices(), [&](ReassociationIndices group) {
        return llvm::count_if(group, [&](int64_t dim) {
                 return expandedType.getDimSize(dim) != 1;
               }) <= 1;
      });
  return unitOnly && reshape->hasOneUse() &&
         isParallelGeneric(*reshape->getUsers().begin()) &&
         reshape.getSrc().hasOneUse() &&
         isParallelGeneric(reshape.getSrc().getDefiningOp());
}

/// True if `generic` is elementwise, only writes its outputs, reads unit
/// reshapes of its elementwise neighbours (or scalars) and is read through
/// one: torch-mlir's `[1, S, D]` views around an op of an activation's
/// backward. Dropping its unit loops then creates no reshape of its own.
bool isBetweenUnitReshapes(linalg::GenericOp generic) {
  if (!isParallelGeneric(generic) || generic->getNumResults() != 1 ||
      !generic->hasOneUse() || readsOutputs(generic))
    return false;
  for (Value input : generic.getDpsInputs()) {
    auto expand = input.getDefiningOp<tensor::ExpandShapeOp>();
    if (cast<ShapedType>(input.getType()).getRank() != 0 &&
        !(expand &&
          isUnitReshapeBetweenElementwise(expand, expand.getResultType())))
      return false;
  }
  auto collapse = dyn_cast<tensor::CollapseShapeOp>(*generic->user_begin());
  return collapse &&
         isUnitReshapeBetweenElementwise(collapse, collapse.getSrcType());
}

/// Such generics lose their unit loops, so that the reshapes on both sides
/// cancel and the chain fuses (dropUnitDims may leave dead ops on failure,
/// so it runs here rather than in the greedy driver).
void dropUnitLoopsBetweenReshapes(func::FuncOp func) {
  SmallVector<linalg::GenericOp> generics;
  func.walk([&](linalg::GenericOp generic) {
    if (isBetweenUnitReshapes(generic))
      generics.push_back(generic);
  });
  IRRewriter rewriter(func.getContext());
  linalg::ControlDropUnitDims control;
  for (linalg::GenericOp generic : generics) {
    rewriter.setInsertionPoint(generic);
    FailureOr<linalg::DropUnitDimsResult> dropped =
        linalg::dropUnitDims(rewriter, generic, control);
    if (succeeded(dropped))
      rewriter.replaceOp(generic, dropped->replacements);
  }
}

struct FuseElementwiseProducer : public OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp consumer,
                                PatternRewriter &rewriter) const override {
    for (OpOperand &operand : consumer->getOpOperands())
      if (succeeded(fuseElementwiseProducer(rewriter, operand)))
        return success();
    for (Value input : consumer.getDpsInputs()) {
      auto producer = input.getDefiningOp<linalg::GenericOp>();
      if (producer && isRecomputable(producer)) {
        recomputeInReaders(rewriter, producer);
        return success();
      }
    }
    return rewriter.notifyMatchFailure(consumer, "no producer to fuse");
  }
};

/// A `linalg.reduce` fed by a fusable producer becomes a generic, which the
/// pattern above then fuses: a sum of squares reads its input once.
struct GeneralizeReduceWithProducer
    : public OpRewritePattern<linalg::ReduceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::ReduceOp reduce,
                                PatternRewriter &rewriter) const override {
    if (!reduce.hasPureTensorSemantics() ||
        llvm::none_of(reduce.getDpsInputOperands(),
                      [](OpOperand *input) { return isProfitable(*input); }))
      return rewriter.notifyMatchFailure(reduce, "no producer to fuse");
    if (failed(linalg::generalizeNamedOp(
            rewriter, cast<linalg::LinalgOp>(reduce.getOperation()))))
      return rewriter.notifyMatchFailure(reduce, "cannot generalize");
    return success();
  }
};

/// A `linalg.transpose` that keeps the innermost dimension in place, read
/// only by an elementwise generic, becomes a generic that the pattern above
/// fuses into its reader: the reader reads the transposed operand in place
/// (rows still contiguous) instead of a transposed copy (a rotary
/// embedding's half read after the head split).
struct GeneralizeTransposeIntoReader
    : public OpRewritePattern<linalg::TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::TransposeOp transpose,
                                PatternRewriter &rewriter) const override {
    ArrayRef<int64_t> permutation = transpose.getPermutation();
    if (!transpose.hasPureTensorSemantics() || permutation.empty() ||
        permutation.back() != int64_t(permutation.size()) - 1 ||
        !transpose->hasOneUse() ||
        !isParallelGeneric(*transpose->getUsers().begin()) ||
        getGemmBatchDims(
            cast<linalg::LinalgOp>(*transpose->getUsers().begin())))
      return rewriter.notifyMatchFailure(transpose, "no elementwise reader");
    if (failed(linalg::generalizeNamedOp(
            rewriter, cast<linalg::LinalgOp>(transpose.getOperation()))))
      return rewriter.notifyMatchFailure(transpose, "cannot generalize");
    return success();
  }
};

/// A generic that copies its input in the input's own layout is that input
/// (a Llama's v, widened and transposed to [B, H, S, D] then rounded and
/// transposed back once attention reads [B, S, H, D]).
struct EraseCopyOfInput : public OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp generic,
                                PatternRewriter &rewriter) const override {
    if (!isCopyOfInput(generic))
      return rewriter.notifyMatchFailure(generic, "not a copy of its input");
    rewriter.replaceOp(generic, generic.getDpsInputs()[0]);
    return success();
  }
};

struct FuseElementwisePass
    : public zest::impl::FuseElementwisePassBase<FuseElementwisePass> {
  void runOnOperation() override {
    dropUnitLoopsBetweenReshapes(getOperation());
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseElementwiseProducer, GeneralizeReduceWithProducer,
                 GeneralizeTransposeIntoReader, EraseCopyOfInput>(
        &getContext());
    populateSplitAtConcatPatterns(patterns);
    // Results nothing reads are not computed: the indices of torch's
    // max.dim in every softmax (a compare and select per element, and an
    // index buffer) when only the maximum is used.
    linalg::populateEraseUnusedOperandsAndResultsPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     getStraightLineRewriteConfig())))
      return signalPassFailure();
    // Siblings merge once every chain has fused: a generic of several
    // results would otherwise stop its producers' fusion.
    RewritePatternSet siblings(&getContext());
    populateFuseSiblingsPatterns(siblings);
    if (failed(applyPatternsGreedily(getOperation(), std::move(siblings),
                                     getStraightLineRewriteConfig())))
      signalPassFailure();
  }
};

} // namespace
