//===- FuseSiblings.cpp - Elementwise ops over one domain as one loop -----===//
//
// Computed per part, a rotary embedding is two elementwise ops over the same
// half of the head dimension, each reading both halves of the projection:
// two kernels, each reading them again. Two independent elementwise ops over
// the same iteration domain that read a common operand become one op with
// the results of both: one loop nest (one kernel on a GPU) reads that
// operand once and writes both results.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/ElementwiseFusion.h"
#include "zest/Dialect/Zest/Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::zest;

namespace {

/// Whether `op` can be computed in one loop nest with another op: a
/// linalg.generic on tensors, every loop parallel, static bounds.
bool isMergeable(linalg::GenericOp op) {
  return op.hasPureTensorSemantics() && op.isAllParallelLoops() &&
         !op.hasIndexSemantics() &&
         llvm::none_of(op.getStaticLoopRanges(), ShapedType::isDynamic);
}

/// Whether `a` and `b` hold the same elements: one value, or the same slice
/// of one value (the per-part ops of a split each slice their operands).
bool isSameTensor(Value a, Value b) {
  if (a == b)
    return true;
  auto sliceA = a.getDefiningOp<tensor::ExtractSliceOp>();
  auto sliceB = b.getDefiningOp<tensor::ExtractSliceOp>();
  return sliceA && sliceB &&
         OperationEquivalence::isEquivalentTo(
             sliceA, sliceB, OperationEquivalence::IgnoreLocations);
}

/// The values `value` is the same tensor as (isSameTensor), itself first.
SmallVector<Value> getSameTensors(Value value) {
  SmallVector<Value> same = {value};
  if (auto slice = value.getDefiningOp<tensor::ExtractSliceOp>())
    for (Operation *user : slice.getSource().getUsers())
      if (user != slice && isa<tensor::ExtractSliceOp>(user) &&
          isSameTensor(value, user->getResult(0)))
        same.push_back(user->getResult(0));
  return same;
}

/// Whether `user`, or the op of `position`'s block holding it, comes after
/// `position`.
bool isAfter(Operation *user, Operation *position) {
  Operation *ancestor = position->getBlock()->findAncestorOpInBlock(*user);
  return ancestor && position->isBeforeInBlock(ancestor);
}

/// The ops between `first` and `second` that read `first`'s results,
/// directly or not, if `first` can be computed at `second` instead: only
/// tensor computation lies between them (no collective, call or anything
/// else that bounds a unit's region, outlined later), `second` reads
/// nothing computed from `first`, and what does is a slice, reshape or
/// insertion (the first part's result inserted into the whole), which then
/// moves after `second`.
FailureOr<SmallVector<Operation *>> getDependentsBetween(Operation *first,
                                                         Operation *second) {
  llvm::SmallPtrSet<Operation *, 8> dependent = {first};
  SmallVector<Operation *> between;
  // Operands of nested ops too: a body may read a value defined above.
  auto readsDependent = [&](Operation *op) {
    WalkResult walk = op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        if (dependent.contains(operand.getDefiningOp()))
          return WalkResult::interrupt();
      return WalkResult::advance();
    });
    return walk.wasInterrupted();
  };
  for (Operation *op = first->getNextNode(); op != second;
       op = op->getNextNode()) {
    if (!isa<linalg::LinalgDialect, tensor::TensorDialect, arith::ArithDialect,
             math::MathDialect>(op->getDialect()))
      return failure();
    if (!readsDependent(op))
      continue;
    if (!isTensorView(op) && !isa<tensor::InsertSliceOp>(op))
      return failure();
    dependent.insert(op);
    between.push_back(op);
  }
  if (readsDependent(second))
    return failure();
  return between;
}

/// Whether each input of `first` is held until `second` anyway, so that
/// computing `first` there holds no tensor longer: the caller's, read by
/// `second` or later, or smaller than the domain (a row of cos).
bool inputsLiveUntil(linalg::GenericOp first, linalg::GenericOp second) {
  int64_t domain = 1;
  for (int64_t bound : first.getStaticLoopRanges())
    domain *= bound;
  return llvm::all_of(first.getDpsInputs(), [&](Value input) {
    auto type = dyn_cast<ShapedType>(input.getType());
    Value source = getViewedTensor(input);
    if (!type || isa<BlockArgument>(source) || !type.hasStaticShape() ||
        type.getNumElements() < domain)
      return true;
    return llvm::any_of(
               second.getDpsInputs(),
               [&](Value other) { return getViewedTensor(other) == source; }) ||
           llvm::any_of(source.getUsers(),
                        [&](Operation *user) { return isAfter(user, second); });
  });
}

/// `first` and `second` as one generic, built at `second`: the inputs of
/// both (a tensor both read through the same map once), the outputs of
/// `first` then those of `second`.
linalg::GenericOp merge(RewriterBase &rewriter, linalg::GenericOp first,
                        linalg::GenericOp second) {
  SmallVector<Value> inputs, inits;
  SmallVector<AffineMap> maps;
  // The merged body's argument for each argument of the two bodies.
  SmallVector<unsigned> firstArgs, secondArgs;
  auto addInput = [&](Value value, AffineMap map, SmallVector<unsigned> &args) {
    for (auto [i, input] : llvm::enumerate(inputs))
      if (maps[i] == map && isSameTensor(input, value)) {
        args.push_back(i);
        return;
      }
    args.push_back(inputs.size());
    inputs.push_back(value);
    maps.push_back(map);
  };
  for (auto [op, args] : {std::pair{first, &firstArgs}, {second, &secondArgs}})
    for (OpOperand *input : op.getDpsInputOperands())
      addInput(input->get(), op.getMatchingIndexingMap(input), *args);
  for (auto [op, args] : {std::pair{first, &firstArgs}, {second, &secondArgs}})
    for (OpOperand &init : op.getDpsInitsMutable()) {
      args->push_back(inputs.size() + inits.size());
      inits.push_back(init.get());
      maps.push_back(op.getMatchingIndexingMap(&init));
    }

  rewriter.setInsertionPoint(second);
  SmallVector<Type> resultTypes(first->getResultTypes());
  llvm::append_range(resultTypes, second->getResultTypes());
  auto merged = linalg::GenericOp::create(
      rewriter, rewriter.getFusedLoc({first.getLoc(), second.getLoc()}),
      resultTypes, inputs, inits, maps, first.getIteratorTypesArray());
  Block *body = rewriter.createBlock(&merged.getRegion());
  for (Value operand : merged->getOperands())
    body->addArgument(getElementTypeOrSelf(operand.getType()),
                      operand.getLoc());

  SmallVector<Value> yielded;
  for (auto [op, args] :
       {std::pair{first, &firstArgs}, {second, &secondArgs}}) {
    IRMapping mapping;
    for (auto [arg, index] : llvm::zip(op.getBody()->getArguments(), *args))
      mapping.map(arg, body->getArgument(index));
    for (Operation &nested : op.getBody()->without_terminator())
      rewriter.clone(nested, mapping);
    for (Value value : op.getBody()->getTerminator()->getOperands())
      yielded.push_back(mapping.lookupOrDefault(value));
  }
  linalg::YieldOp::create(rewriter, second.getLoc(), yielded);
  return merged;
}

/// An elementwise generic and an earlier one in its block over the same
/// domain that reads one of its full-size inputs the same way, neither
/// reading the other: one generic at the later one's place.
struct FuseSiblings : public OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp second,
                                PatternRewriter &rewriter) const override {
    if (!isMergeable(second))
      return rewriter.notifyMatchFailure(second, "not a parallel generic");
    SmallVector<Operation *> dependents;
    linalg::GenericOp first = findEarlierSibling(second, dependents);
    if (!first)
      return rewriter.notifyMatchFailure(second, "no sibling before it");
    for (Operation *op : llvm::reverse(dependents))
      rewriter.moveOpAfter(op, second);
    linalg::GenericOp merged = merge(rewriter, first, second);
    unsigned firstResults = first->getNumResults();
    rewriter.replaceOp(first, merged->getResults().take_front(firstResults));
    rewriter.replaceOp(second, merged->getResults().drop_front(firstResults));
    return success();
  }

private:
  /// A mergeable generic before `second` in its block, over its loop
  /// bounds, that reads one of `second`'s inputs through the same
  /// permutation of all loops (each element once) and may move to it;
  /// `dependents` are the ops that must move after `second` for it.
  static linalg::GenericOp
  findEarlierSibling(linalg::GenericOp second,
                     SmallVector<Operation *> &dependents) {
    SmallVector<int64_t> bounds = second.getStaticLoopRanges();
    for (OpOperand *input : second.getDpsInputOperands()) {
      AffineMap map = second.getMatchingIndexingMap(input);
      if (!map.isPermutation())
        continue;
      for (Value same : getSameTensors(input->get()))
        for (OpOperand &use : same.getUses()) {
          auto first = dyn_cast<linalg::GenericOp>(use.getOwner());
          if (!first || first == second ||
              first->getBlock() != second->getBlock() ||
              !first->isBeforeInBlock(second) || !isMergeable(first) ||
              !first.isDpsInput(&use) ||
              first.getMatchingIndexingMap(&use) != map ||
              first.getStaticLoopRanges() != bounds ||
              !inputsLiveUntil(first, second))
            continue;
          FailureOr<SmallVector<Operation *>> between =
              getDependentsBetween(first, second);
          if (failed(between))
            continue;
          dependents = std::move(*between);
          return first;
        }
    }
    return {};
  }
};

} // namespace

void mlir::zest::populateFuseSiblingsPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseSiblings>(patterns.getContext());
}
