//===- FoldTransposes.cpp - Ops read transposed operands in place ---------===//
//
// A product or an elementwise op that reads (or writes) a materialized
// transpose reads the other layout through its indexing map instead: BLAS
// and cuBLASLt take strided batches of matrices at the same cost, and the
// copy costs a pass over the data with strided loads. Transposes move
// through slices, concatenations and reshapes to meet such ops.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/Contraction.h"
#include "zest/Dialect/Zest/Transforms/ElementwiseFusion.h"
#include "zest/Dialect/Zest/Transforms/Passes.h"
#include "zest/Dialect/Zest/Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::zest {
#define GEN_PASS_DEF_FOLDTRANSPOSESPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

namespace {

/// `map` with result i taken from result permutation[i]: the map that
/// writes a transpose's result where `map` wrote its input.
static AffineMap permuteResults(AffineMap map, ArrayRef<int64_t> permutation) {
  return AffineMap::get(map.getNumDims(), map.getNumSymbols(),
                        applyPermutation(map.getResults(), permutation),
                        map.getContext());
}

/// The map that reads a transpose's input where `map` read its result.
static AffineMap readThroughTranspose(AffineMap map,
                                      ArrayRef<int64_t> permutation) {
  return permuteResults(map, invertPermutationVector(permutation));
}

/// An empty tensor shaped like the transpose of `value` by `permutation`.
static Value createEmptyTransposed(OpBuilder &builder, Location loc,
                                   Value value, ArrayRef<int64_t> permutation) {
  return tensor::EmptyOp::create(
      builder, loc,
      applyPermutation(tensor::getMixedSizes(builder, loc, value), permutation),
      getElementTypeOrSelf(value));
}

/// The transpose of `value` by `permutation`, into a new empty tensor.
static Value createTranspose(OpBuilder &builder, Location loc, Value value,
                             ArrayRef<int64_t> permutation) {
  Value init = createEmptyTransposed(builder, loc, value, permutation);
  return linalg::TransposeOp::create(builder, loc, value, init, permutation)
      .getResult()[0];
}

/// A generic like `op` (same body and iterators) over other operands and
/// maps.
static linalg::GenericOp
cloneWithOperands(PatternRewriter &rewriter, linalg::LinalgOp op,
                  TypeRange resultTypes, ValueRange inputs, ValueRange inits,
                  ArrayRef<AffineMap> maps,
                  ArrayRef<utils::IteratorType> iterators) {
  auto generic = linalg::GenericOp::create(rewriter, op.getLoc(), resultTypes,
                                           inputs, inits, maps, iterators);
  rewriter.cloneRegionBefore(op->getRegion(0), generic.getRegion(),
                             generic.getRegion().end());
  return generic;
}

/// The batch loops of `op`, if it is a product on tensors BLAS takes.
static std::optional<unsigned> getProductBatchDims(linalg::LinalgOp op) {
  if (!op || !op.hasPureTensorSemantics())
    return std::nullopt;
  std::optional<unsigned> batch = getGemmBatchDims(op);
  if (!batch || !getGemmLayout(op, *batch))
    return std::nullopt;
  return batch;
}

/// The tensor `value` broadcasts (a `linalg.broadcast`, or a generic that
/// only copies its input into a larger identity-mapped output), with the
/// map from the broadcast's loops to that tensor; used only once.
static std::optional<std::pair<Value, AffineMap>> matchBroadcast(Value value) {
  auto op = value.getDefiningOp<linalg::LinalgOp>();
  if (!op || !value.hasOneUse() || !op.hasPureTensorSemantics() ||
      op.getNumDpsInputs() != 1 || op.getNumDpsInits() != 1 ||
      op.getNumParallelLoops() != op.getNumLoops() ||
      !op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isIdentity())
    return std::nullopt;
  if (!isa<linalg::BroadcastOp>(op)) {
    auto generic = dyn_cast<linalg::GenericOp>(op.getOperation());
    if (!generic)
      return std::nullopt;
    Block &body = generic.getRegion().front();
    if (body.getOperations().size() != 1 ||
        body.getTerminator()->getOperand(0) != body.getArgument(0))
      return std::nullopt;
  }
  OpOperand *input = op.getDpsInputOperand(0);
  AffineMap map = op.getMatchingIndexingMap(input);
  if (!map.isProjectedPermutation())
    return std::nullopt;
  return std::make_pair(input->get(), map);
}

/// The operand a product's input reads in place of a transpose or a
/// broadcast, with the map that reads it from the product's loops.
static std::optional<std::pair<Value, AffineMap>> readInPlace(Value input,
                                                              AffineMap map) {
  if (auto transpose = input.getDefiningOp<linalg::TransposeOp>())
    return std::make_pair(
        transpose.getInput(),
        readThroughTranspose(map, transpose.getPermutation()));
  // The broadcast's output map is the identity: its input map composed with
  // the product's map reads the source from the product's loops.
  if (auto broadcast = matchBroadcast(input))
    return std::make_pair(broadcast->first, broadcast->second.compose(map));
  return std::nullopt;
}

/// Rewrites a product (as zest-matmul-to-blas recognizes them) whose input
/// is a transpose or a broadcast into a generic product reading the
/// source, when the product can read it as a strided batch of matrices: an
/// inner-dimension swap (`W^T`, `K^T`), a head split (`[B, S, H, Dh]` read as
/// `[B, H, S, Dh]`, once SplitProductBatch has split the batch), a weight
/// broadcast over a batch, grouped-query attention's keys and values
/// repeated for each query head of a group.
struct ReadOperandsInPlace
    : public OpInterfaceRewritePattern<linalg::LinalgOp> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;

  LogicalResult matchAndRewrite(linalg::LinalgOp op,
                                PatternRewriter &rewriter) const override {
    std::optional<unsigned> batch = getProductBatchDims(op);
    if (!batch)
      return rewriter.notifyMatchFailure(op, "not a product BLAS takes");
    SmallVector<Value> inputs = op.getDpsInputs();
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    bool folded = false;
    for (unsigned i = 0; i < 2; ++i) {
      std::optional<std::pair<Value, AffineMap>> source =
          readInPlace(inputs[i], maps[i]);
      if (!source)
        continue;
      SmallVector<AffineMap> candidate = maps;
      candidate[i] = source->second;
      if (!getGemmLayout(candidate, *batch))
        continue;
      inputs[i] = source->first;
      maps = std::move(candidate);
      folded = true;
    }
    if (!folded)
      return rewriter.notifyMatchFailure(op, "no operand to read in place");
    rewriter.replaceOp(op, cloneWithOperands(rewriter, op, op->getResultTypes(),
                                             inputs, op.getDpsInits(), maps,
                                             op.getIteratorTypesArray())
                               ->getResults());
    return success();
  }
};

/// A transpose of a collapse_shape that moves whole groups is a collapse of
/// the transposed source (grouped-query attention's output, [B, G, R, S, Dh]
/// collapsed to [B, H, S, Dh] and transposed to [B, S, H, Dh]): the
/// transpose then meets the product that wrote the source.
struct TransposeBeforeCollapse : public OpRewritePattern<linalg::TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::TransposeOp transpose,
                                PatternRewriter &rewriter) const override {
    auto collapse =
        transpose.getInput().getDefiningOp<tensor::CollapseShapeOp>();
    if (!collapse)
      return rewriter.notifyMatchFailure(transpose, "not of a collapse");
    SmallVector<ReassociationIndices> groups =
        collapse.getReassociationIndices();
    SmallVector<int64_t> permutation;
    SmallVector<ReassociationIndices> newGroups;
    for (int64_t group : transpose.getPermutation()) {
      ReassociationIndices newGroup;
      for (int64_t dim : groups[group]) {
        newGroup.push_back(permutation.size());
        permutation.push_back(dim);
      }
      newGroups.push_back(std::move(newGroup));
    }
    Value moved = createTranspose(rewriter, transpose.getLoc(),
                                  collapse.getSrc(), permutation);
    rewriter.replaceOpWithNewOp<tensor::CollapseShapeOp>(
        transpose, transpose.getResult()[0].getType(), moved, newGroups);
    return success();
  }
};

/// An elementwise generic (parallel loops only) reads a transposed input
/// through its indexing map instead: the op passes over the data anyway, the
/// transpose's copy goes. Attention's scaled q and k are written in the
/// head-split layout this way.
struct FoldTransposeIntoElementwise
    : public OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics() ||
        op.getNumParallelLoops() != op.getNumLoops())
      return rewriter.notifyMatchFailure(op, "not elementwise on tensors");
    if (llvm::none_of(op.getDpsInputs(), [](Value input) {
          return input.getDefiningOp<linalg::TransposeOp>();
        }))
      return rewriter.notifyMatchFailure(op, "no transposed input");
    rewriter.modifyOpInPlace(op, [&] {
      SmallVector<AffineMap> maps = op.getIndexingMapsArray();
      for (OpOperand *input : op.getDpsInputOperands()) {
        auto transpose = input->get().getDefiningOp<linalg::TransposeOp>();
        if (!transpose)
          continue;
        unsigned i = input->getOperandNumber();
        maps[i] = readThroughTranspose(maps[i], transpose.getPermutation());
        input->set(transpose.getInput());
      }
      op.setIndexingMapsAttr(rewriter.getAffineMapArrayAttr(maps));
    });
    return success();
  }
};

/// A batch loop of a product and the loops it splits into (their sizes,
/// outer first).
struct BatchSplit {
  unsigned loop;
  SmallVector<int64_t> sizes;
};

/// The reassociation that splits dimension `dim` of a rank-`rank` tensor
/// into `parts` dimensions.
static SmallVector<ReassociationIndices>
getSplitReassociation(int64_t rank, int64_t dim, int64_t parts) {
  SmallVector<ReassociationIndices> groups;
  for (int64_t i = 0, next = 0; i < rank; ++i) {
    ReassociationIndices group;
    for (int64_t j = 0; j < (i == dim ? parts : 1); ++j)
      group.push_back(next++);
    groups.push_back(std::move(group));
  }
  return groups;
}

/// The split a reshape asks of a product's batch loop: `groups` (of the
/// operand read through `map`) merge static dimensions `shape` of one batch
/// loop and keep all others apart.
static std::optional<BatchSplit>
getBatchSplit(ArrayRef<ReassociationIndices> groups, ArrayRef<int64_t> shape,
              AffineMap map, unsigned batchDims) {
  std::optional<BatchSplit> split;
  for (auto [position, group] : llvm::enumerate(groups)) {
    if (group.size() == 1)
      continue;
    unsigned loop = map.getDimPosition(position);
    if (split || loop >= batchDims)
      return std::nullopt;
    split = BatchSplit{loop, {}};
    for (int64_t dim : group) {
      if (ShapedType::isDynamic(shape[dim]))
        return std::nullopt;
      split->sizes.push_back(shape[dim]);
    }
  }
  return split;
}

/// The batch split that an input's collapse_shape or the result's only
/// user, an expand_shape, asks for.
static std::optional<BatchSplit> findBatchSplit(linalg::LinalgOp op,
                                                unsigned batchDims) {
  for (OpOperand *input : op.getDpsInputOperands())
    if (auto collapse = input->get().getDefiningOp<tensor::CollapseShapeOp>())
      if (auto split =
              getBatchSplit(collapse.getReassociationIndices(),
                            collapse.getSrcType().getShape(),
                            op.getMatchingIndexingMap(input), batchDims))
        return split;
  Value result = op->getResult(0);
  if (!result.hasOneUse())
    return std::nullopt;
  auto expand = dyn_cast<tensor::ExpandShapeOp>(*result.getUsers().begin());
  if (!expand)
    return std::nullopt;
  return getBatchSplit(
      expand.getReassociationIndices(), expand.getResultType().getShape(),
      op.getMatchingIndexingMap(op.getDpsInitOperand(0)), batchDims);
}

/// `map` over the loops after `split`: the split loop becomes its parts,
/// the loops after it move up.
static AffineMap splitLoop(AffineMap map, const BatchSplit &split) {
  unsigned extra = split.sizes.size() - 1;
  SmallVector<AffineExpr> results;
  MLIRContext *ctx = map.getContext();
  for (unsigned position = 0; position < map.getNumResults(); ++position) {
    unsigned loop = map.getDimPosition(position);
    if (loop == split.loop) {
      for (unsigned part = 0; part <= extra; ++part)
        results.push_back(getAffineDimExpr(loop + part, ctx));
      continue;
    }
    results.push_back(
        getAffineDimExpr(loop > split.loop ? loop + extra : loop, ctx));
  }
  return AffineMap::get(map.getNumDims() + extra, 0, results, ctx);
}

/// `operand`, read through `map`, with the split loop's dimension split: a
/// collapse_shape's source when it merged exactly those dimensions, else an
/// expand_shape (a view).
static Value splitOperand(PatternRewriter &rewriter, Location loc,
                          Value operand, AffineMap map,
                          const BatchSplit &split) {
  std::optional<unsigned> position =
      map.getResultPosition(getAffineDimExpr(split.loop, map.getContext()));
  if (!position)
    return operand; // shared by the split batches
  auto type = cast<RankedTensorType>(operand.getType());
  int64_t dim = *position;
  SmallVector<ReassociationIndices> groups =
      getSplitReassociation(type.getRank(), dim, split.sizes.size());
  SmallVector<int64_t> shape(type.getShape());
  shape.erase(shape.begin() + dim);
  shape.insert(shape.begin() + dim, split.sizes.begin(), split.sizes.end());
  auto splitType = type.clone(shape);
  if (auto collapse = operand.getDefiningOp<tensor::CollapseShapeOp>())
    if (collapse.getSrcType() == splitType &&
        collapse.getReassociationIndices() == groups)
      return collapse.getSrc();
  return tensor::ExpandShapeOp::create(rewriter, loc, splitType, operand,
                                       groups);
}

/// A batched product whose operand is a collapse of batch dimensions (a
/// head-split [B, H, S, Dh] collapsed to [B * H, S, Dh] for a batch
/// matmul), or whose result is expanded so, becomes a product over the
/// split batch loops: each operand is then read in its own layout, where a
/// transpose in between can fold into the product's indexing map.
struct SplitProductBatch : public OpInterfaceRewritePattern<linalg::LinalgOp> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;

  LogicalResult matchAndRewrite(linalg::LinalgOp op,
                                PatternRewriter &rewriter) const override {
    std::optional<unsigned> batch = getProductBatchDims(op);
    if (!batch || *batch == 0)
      return rewriter.notifyMatchFailure(op, "not a batched product");
    std::optional<BatchSplit> split = findBatchSplit(op, *batch);
    if (!split)
      return rewriter.notifyMatchFailure(op, "no reshape splits a batch");
    Location loc = op.getLoc();
    SmallVector<Value> operands;
    SmallVector<AffineMap> maps;
    for (OpOperand &operand : op->getOpOperands()) {
      AffineMap map = op.getMatchingIndexingMap(&operand);
      operands.push_back(
          splitOperand(rewriter, loc, operand.get(), map, *split));
      maps.push_back(splitLoop(map, *split));
    }
    SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
    iterators.insert(iterators.begin() + split->loop, split->sizes.size() - 1,
                     utils::IteratorType::parallel);
    Value init = operands.back();
    linalg::GenericOp generic = cloneWithOperands(
        rewriter, op, init.getType(), ValueRange(operands).drop_back(), init,
        maps, iterators);
    // The result, collapsed back: an expand_shape that splits it the same
    // way folds with it.
    AffineMap resultMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
    auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
    auto collapse = tensor::CollapseShapeOp::create(
        rewriter, loc, resultType, generic.getResult(0),
        getSplitReassociation(resultType.getRank(),
                              *resultMap.getResultPosition(getAffineDimExpr(
                                  split->loop, op.getContext())),
                              split->sizes.size()));
    rewriter.replaceOp(op, collapse.getResult());
    return success();
  }
};

/// The fill `op` reduces into, if it reads its destination: null if it
/// does not, failure if that destination is not a fill.
static FailureOr<linalg::FillOp> getReducedFill(linalg::LinalgOp op) {
  if (!op.payloadUsesValueFromOperand(op.getDpsInitOperand(0)))
    return linalg::FillOp();
  auto fill = op.getDpsInits()[0].getDefiningOp<linalg::FillOp>();
  if (!fill || !fill.hasPureTensorSemantics())
    return failure();
  return fill;
}

/// Whether every user of `value` is a transpose by `permutation` (a value
/// that attention's forward and backward both read, each transposed).
static bool isOnlyTransposed(Value value, ArrayRef<int64_t> permutation) {
  return llvm::all_of(value.getUsers(), [&](Operation *user) {
    auto transpose = dyn_cast<linalg::TransposeOp>(user);
    return transpose && transpose.getPermutation() == permutation;
  });
}

/// The transpose of a generic's or a product's result, its only user (or
/// one of several like it), is written by that op directly through its
/// output map: attention's output `[B, H, S, Dh]` written as `[B, S, H, Dh]`
/// (rows of the next linear layer's input), the backward of attention's
/// scaling written back in the layout of the qkv gradient, grouped-query
/// attention's key gradient summed over the group, a Llama's rotated q read
/// sequence-major by attention's forward and backward. An op that reads its
/// destination (a product, a reduction) must accumulate into a fill, which
/// is filled in the transposed shape instead; a product must still be one
/// BLAS takes.
struct WriteResultTransposed : public OpRewritePattern<linalg::TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::TransposeOp transpose,
                                PatternRewriter &rewriter) const override {
    auto op = transpose.getInput().getDefiningOp<linalg::LinalgOp>();
    if (!op || !op.hasPureTensorSemantics() || op.getNumDpsInits() != 1 ||
        !isOnlyTransposed(transpose.getInput(), transpose.getPermutation()))
      return rewriter.notifyMatchFailure(transpose, "not a single result's");
    std::optional<unsigned> batch = getGemmBatchDims(op);
    if (!batch && !isa<linalg::GenericOp>(op))
      return rewriter.notifyMatchFailure(transpose, "not a generic's");
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    maps.back() = permuteResults(maps.back(), transpose.getPermutation());
    if (batch && !getGemmLayout(maps, *batch))
      return rewriter.notifyMatchFailure(transpose,
                                         "transposed result not a matrix");
    // An op that reads its destination accumulates into a fill of the
    // transposed shape instead.
    FailureOr<linalg::FillOp> fill = getReducedFill(op);
    if (failed(fill))
      return rewriter.notifyMatchFailure(transpose,
                                         "reduces into something not a fill");
    // At the op, as the transposes that read it may come later in any order.
    rewriter.setInsertionPoint(op);
    Value init = createEmptyTransposed(
        rewriter, op.getLoc(), op.getDpsInits()[0], transpose.getPermutation());
    if (*fill)
      init = linalg::FillOp::create(rewriter, op.getLoc(), fill->value(), init)
                 .result();
    Value written =
        cloneWithOperands(rewriter, op, init.getType(), op.getDpsInputs(), init,
                          maps, op.getIteratorTypesArray())
            ->getResult(0);
    for (Operation *user : llvm::make_early_inc_range(op->getUsers()))
      rewriter.replaceOp(user, written);
    rewriter.eraseOp(op);
    return success();
  }
};

/// A slice of a transpose is the transpose of a slice of its input (the
/// halves of rotary embeddings, q, k and v cut from a fused projection after
/// the head split): the smaller transposes then meet the ops that read them
/// and fold there.
struct SliceBeforeTranspose : public OpRewritePattern<tensor::ExtractSliceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tensor::ExtractSliceOp slice,
                                PatternRewriter &rewriter) const override {
    auto transpose = slice.getSource().getDefiningOp<linalg::TransposeOp>();
    if (!transpose ||
        slice.getType().getRank() != slice.getSourceType().getRank())
      return rewriter.notifyMatchFailure(slice, "not a slice of a transpose");
    ArrayRef<int64_t> permutation = transpose.getPermutation();
    SmallVector<int64_t> inverse = invertPermutationVector(permutation);
    Location loc = slice.getLoc();
    Value input = tensor::ExtractSliceOp::create(
        rewriter, loc, transpose.getInput(),
        applyPermutation(slice.getMixedOffsets(), inverse),
        applyPermutation(slice.getMixedSizes(), inverse),
        applyPermutation(slice.getMixedStrides(), inverse));
    rewriter.replaceOp(slice,
                       createTranspose(rewriter, loc, input, permutation));
    return success();
  }
};

/// The transpose of a concatenation, its only user, is the concatenation
/// of its operands' transposes (Pythia's q, k and v gradients joined into
/// the fused projection's): each of those then meets the op that wrote the
/// operand and folds into it.
struct ConcatBeforeTranspose : public OpRewritePattern<linalg::TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::TransposeOp transpose,
                                PatternRewriter &rewriter) const override {
    auto concat = transpose.getInput().getDefiningOp<tensor::ConcatOp>();
    if (!concat || !concat->hasOneUse())
      return rewriter.notifyMatchFailure(transpose, "not of a concatenation");
    ArrayRef<int64_t> permutation = transpose.getPermutation();
    Location loc = transpose.getLoc();
    SmallVector<Value> operands;
    for (Value operand : concat.getInputs())
      operands.push_back(createTranspose(rewriter, loc, operand, permutation));
    int64_t dim =
        llvm::find(permutation, int64_t(concat.getDim())) - permutation.begin();
    rewriter.replaceOpWithNewOp<tensor::ConcatOp>(transpose, dim, operands);
    return success();
  }
};

/// round(transpose(x)) is transpose(round(x)): the rounding goes first, so
/// that the transpose moves the narrow values and meets the product that
/// reads it (autocast casts each weight after `W^T`), where it folds; and
/// the rounding then reads the weight itself, where the round trip of a
/// gather widened from bf16 folds away (zest-convert-zest-to-runtime).
struct RoundBeforeTranspose : public OpRewritePattern<linalg::GenericOp> {
  /// Before FoldTransposeIntoElementwise, which would read the transpose
  /// into the rounding and leave a transposed copy in bf16.
  RoundBeforeTranspose(MLIRContext *ctx)
      : OpRewritePattern(ctx, /*benefit=*/2) {}

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

/// The permutation between attention's [B, H, S, D] and [B, S, H, D]
/// layouts (its own inverse).
constexpr int64_t kHeadsRows[] = {0, 2, 1, 3};

/// Whether `op` swaps heads and rows of a 4-D tensor.
static bool isHeadsRowsTranspose(Operation *op) {
  auto transpose = dyn_cast_or_null<linalg::TransposeOp>(op);
  return transpose && transpose.getPermutation() == ArrayRef(kHeadsRows);
}

/// Whether `op` is an attention op, which may switch layouts as well.
static bool isAttention(Operation *op) {
  return isa_and_nonnull<AttentionOp, AttentionBackwardOp>(op);
}

/// Whether `value` is read only by attention ops (forward or backward, as
/// arrays) or swapped back to [B, S, H, D].
static bool isOnlyReadByAttention(Value value) {
  return llvm::all_of(value.getUsers(), [](Operation *user) {
    return isAttention(user) || isHeadsRowsTranspose(user);
  });
}

/// How an attention op's [B, H, S, D] array is held: as a transpose of a
/// [B, S, H, D] one (or transposed back by every reader), by ops that would
/// write or read the other layout at the same cost (elementwise generics,
/// into which a transpose folds), or as computed.
enum class ArrayLayout { SequenceMajor, Either, HeadsMajor };

static ArrayLayout getInputLayout(Value input) {
  Operation *producer = input.getDefiningOp();
  if (isHeadsRowsTranspose(producer))
    return ArrayLayout::SequenceMajor;
  // An elementwise producer read only by attention writes the transpose
  // instead (a Llama's rotated q and k, its v widened and rounded).
  if (isAttention(producer) ||
      (isParallelGeneric(producer) && isOnlyReadByAttention(input)))
    return ArrayLayout::Either;
  return ArrayLayout::HeadsMajor;
}

static ArrayLayout getResultLayout(Value result) {
  auto readers = llvm::make_filter_range(
      result.getUsers(), [](Operation *user) { return !isAttention(user); });
  if (readers.empty())
    return result.use_empty() ? ArrayLayout::HeadsMajor : ArrayLayout::Either;
  if (llvm::all_of(readers, isHeadsRowsTranspose))
    return ArrayLayout::SequenceMajor;
  if (llvm::all_of(readers, isParallelGeneric))
    return ArrayLayout::Either;
  return ArrayLayout::HeadsMajor;
}

/// An attention op (forward or backward) on [B, H, S, D] arrays more of
/// which are transposes of [B, S, H, D] ones, or are only transposed back,
/// than are held as computed (PyTorch's `view(B, S, H, D).transpose(1, 2)`
/// of a projection's rows, and the transpose back of the output before the
/// next projection), becomes a `sequence_major` one that reads and writes
/// the [B, S, H, D] arrays: those transposes go, and the runtime reads q, k
/// and v where the projection wrote them. Any other array is transposed for
/// it, where that transpose may meet the op that writes or reads it and fold
/// there; arrays written or read by elementwise ops count for neither side.
template <typename OpTy>
struct AttentionToSequenceMajor : public OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    if (op.getSequenceMajor() || !op.hasPureTensorSemantics())
      return rewriter.notifyMatchFailure(op, "not [B, H, S, D] on tensors");
    SmallVector<OpOperand *> arrays = getArrayInputs(op);
    int64_t votes = 0;
    auto vote = [&](ArrayLayout layout) {
      votes += layout == ArrayLayout::SequenceMajor ? 1
               : layout == ArrayLayout::HeadsMajor  ? -1
                                                    : 0;
    };
    for (OpOperand *input : arrays)
      vote(getInputLayout(input->get()));
    for (OpResult result : op->getResults())
      if (isArray(result))
        vote(getResultLayout(result));
    if (votes <= 0)
      return rewriter.notifyMatchFailure(op, "mostly [B, H, S, D] arrays");
    Location loc = op.getLoc();
    IRMapping mapping;
    for (OpOperand *input : arrays)
      mapping.map(input->get(), getSequenceMajor(rewriter, loc, input->get()));
    for (Value init : op.getDpsInits())
      if (isArray(init))
        mapping.map(init,
                    createEmptyTransposed(rewriter, loc, init, kHeadsRows));
    Operation *replacement = rewriter.clone(*op, mapping);
    auto dps = cast<DestinationStyleOpInterface>(replacement);
    for (OpResult result : replacement->getResults())
      result.setType(dps.getTiedOpOperand(result)->get().getType());
    replacement->setAttr(op.getSequenceMajorAttrName(), rewriter.getUnitAttr());
    SmallVector<Value> results;
    for (OpResult result : replacement->getResults())
      results.push_back(isArray(result)
                            ? createTranspose(rewriter, loc, result, kHeadsRows)
                            : Value(result));
    rewriter.replaceOp(op, results);
    return success();
  }

private:
  static bool isArray(Value value) {
    return cast<ShapedType>(value.getType()).getRank() == 4;
  }

  /// The 4-D inputs (queries, keys, values and, in the backward, the output
  /// and its gradient): every input but the mask and the log-sum-exp.
  static SmallVector<OpOperand *> getArrayInputs(OpTy op) {
    SmallVector<OpOperand *> inputs;
    for (OpOperand *input : op.getDpsInputOperands())
      if (isArray(input->get()) && input->get() != op.getMask())
        inputs.push_back(input);
    return inputs;
  }

  /// `value` [B, H, S, D] as [B, S, H, D]: a transpose's input, or its
  /// transpose.
  static Value getSequenceMajor(OpBuilder &builder, Location loc, Value value) {
    if (isHeadsRowsTranspose(value.getDefiningOp()))
      return value.getDefiningOp<linalg::TransposeOp>().getInput();
    return createTranspose(builder, loc, value, kHeadsRows);
  }
};

struct FoldTransposesPass
    : public zest::impl::FoldTransposesPassBase<FoldTransposesPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    // The greedy driver erases the transposes left without users.
    populateReadOperandsInPlacePatterns(patterns);
    patterns.add<FoldTransposeIntoElementwise, TransposeBeforeCollapse,
                 SplitProductBatch, WriteResultTransposed, SliceBeforeTranspose,
                 ConcatBeforeTranspose, RoundBeforeTranspose,
                 AttentionToSequenceMajor<AttentionOp>,
                 AttentionToSequenceMajor<AttentionBackwardOp>>(&getContext());
    // The reshapes a split leaves behind fold with their neighbours.
    tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, &getContext());
    tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns,
                                                         &getContext());
    linalg::FillOp::getCanonicalizationPatterns(patterns, &getContext());
    // Transposes back to back (an attention's output made sequence-major,
    // then transposed back to its reader's layout) compose and cancel.
    linalg::TransposeOp::getCanonicalizationPatterns(patterns, &getContext());
    tensor::populateFoldTensorEmptyPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     getStraightLineRewriteConfig())))
      signalPassFailure();
  }
};

} // namespace

void mlir::zest::populateReadOperandsInPlacePatterns(
    RewritePatternSet &patterns) {
  patterns.add<ReadOperandsInPlace>(patterns.getContext());
}
