//===- InsertOptimizer.cpp - The optimizer inside the compiled step -------===//
//
// Turns every sharded training function (one returning `zest.unit_grad`
// results) into a whole training step: each unit's gradient shard feeds a
// `zest.update` of the unit's shard, placed as soon as the gradient is reduced
// and the shard is no longer read, and the function returns the updated
// shard, optimizer state and gradient accumulator instead of the gradient.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/Passes.h"
#include "zest_runtime.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::zest {
#define GEN_PASS_DEF_INSERTOPTIMIZERPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

/// The unit argument `arg` and every value that may alias its storage once
/// collectives at world size 1 become no-ops: gathers of it, parameter views
/// of those, and tensor views of the views.
static llvm::SetVector<Value> getAliases(BlockArgument arg) {
  llvm::SetVector<Value> aliases;
  aliases.insert(arg);
  for (unsigned i = 0; i < aliases.size(); ++i)
    for (Operation *user : aliases[i].getUsers())
      if (isa<AllGatherOp, UnflattenOp, tensor::ExtractSliceOp,
              tensor::ExpandShapeOp, tensor::CollapseShapeOp, tensor::CastOp>(
              user))
        aliases.insert(user->getResults().begin(), user->getResults().end());
  return aliases;
}

/// The first reduction of a unit's gradient `grad` (a reduce-scatter, or a
/// replicated unit's all-reduce), past hybrid sharding's all-reduce across
/// replicas; null if `grad` is not reduced that way.
static Operation *getFirstReduction(Value grad) {
  Operation *reduce = grad.getDefiningOp();
  if (auto acrossReplicas = dyn_cast_or_null<AllReduceOp>(reduce))
    if (acrossReplicas.getAcrossReplicas())
      reduce = acrossReplicas.getInput().getDefiningOp();
  return isa_and_nonnull<ReduceScatterOp, AllReduceOp>(reduce) ? reduce
                                                               : nullptr;
}

/// Parameters of `unit` the gradient `grad` carries no gradient for: those
/// its `zest.flatten` does not name. A gradient built some other way is taken
/// to cover every parameter.
static SmallVector<StringRef> getFrozenParams(UnitOp unit, Value grad) {
  Operation *reduce = getFirstReduction(grad);
  FlattenOp flatten;
  if (reduce)
    flatten = reduce->getOperand(0).getDefiningOp<FlattenOp>();
  SmallVector<StringRef> frozen;
  if (!flatten)
    return frozen;
  for (auto param : unit.getParams().getAsRange<ParamAttr>())
    if (!llvm::is_contained(flatten.getParams().getAsValueRange<StringAttr>(),
                            param.getName()))
      frozen.push_back(param.getName());
  return frozen;
}

/// `hyper[ACCUMULATE] != 0`.
static Value buildAccumulateFlag(OpBuilder &builder, Location loc,
                                 Value hyper) {
  Value index =
      arith::ConstantIndexOp::create(builder, loc, ZEST_HYPER_ACCUMULATE);
  Value flag = tensor::ExtractOp::create(builder, loc, hyper, index);
  Value zero =
      arith::ConstantOp::create(builder, loc, builder.getF32FloatAttr(0.0));
  return arith::CmpFOp::create(builder, loc, arith::CmpFPredicate::UNE, flag,
                               zero);
}

/// `accumulate ? gradSum + grad : grad`, computed in `gradSum`'s buffer (a
/// generic whose init is the sum, so bufferization writes it in place).
static Value buildGradSum(OpBuilder &builder, Location loc, Value grad,
                          Value gradSum, Value accumulate) {
  AffineMap id = AffineMap::getMultiDimIdentityMap(1, builder.getContext());
  return linalg::GenericOp::create(
             builder, loc, gradSum.getType(), ValueRange{grad},
             ValueRange{gradSum}, SmallVector<AffineMap>{id, id},
             SmallVector<utils::IteratorType>{utils::IteratorType::parallel},
             [&](OpBuilder &b, Location l, ValueRange args) {
               Value sum = arith::AddFOp::create(b, l, args[1], args[0]);
               linalg::YieldOp::create(
                   b, l,
                   ValueRange{
                       arith::SelectOp::create(b, l, accumulate, sum, args[0])
                           .getResult()});
             })
      .getResult(0);
}

/// Appends an argument of `type` carrying `attr = value` to `func`.
static BlockArgument appendArgument(func::FuncOp func, Type type,
                                    StringRef attr, Attribute value) {
  MLIRContext *ctx = func.getContext();
  unsigned index = func.getNumArguments();
  (void)func.insertArgument(
      index, type,
      DictionaryAttr::get(ctx,
                          {NamedAttribute(StringAttr::get(ctx, attr), value)}),
      func.getLoc());
  return func.getArgument(index);
}

/// The attributes of a result that overwrites argument `arg` in place.
static DictionaryAttr getUpdatedAttrs(MLIRContext *ctx, unsigned arg) {
  return DictionaryAttr::get(
      ctx, {NamedAttribute(StringAttr::get(ctx, ZestDialect::kUpdatedAttrName),
                           IntegerAttr::get(IntegerType::get(ctx, 64), arg))});
}

/// Replaces the results flagged in `erase` by `newResults`, each updating
/// the argument at the same position of `updatedArgs` in place.
static LogicalResult replaceResults(func::FuncOp func, func::ReturnOp ret,
                                    const llvm::BitVector &erase,
                                    ArrayRef<Value> newResults,
                                    ArrayRef<unsigned> updatedArgs) {
  if (failed(func.eraseResults(erase)))
    return failure();
  ret->eraseOperands(erase);
  unsigned kept = func.getNumResults();
  SmallVector<unsigned> positions(newResults.size(), kept);
  SmallVector<Type> types;
  SmallVector<DictionaryAttr> attrs;
  for (auto [value, arg] : llvm::zip(newResults, updatedArgs)) {
    types.push_back(value.getType());
    attrs.push_back(getUpdatedAttrs(func.getContext(), arg));
  }
  if (failed(func.insertResults(positions, types, attrs)))
    return failure();
  ret->insertOperands(ret.getNumOperands(), newResults);
  return success();
}

/// The units `func` returns gradients for, with the result index of each.
static FailureOr<SmallVector<std::pair<UnitOp, unsigned>>>
getTrainedUnits(func::FuncOp func) {
  SmallVector<std::pair<UnitOp, unsigned>> trained;
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    auto ref = func.getResultAttrOfType<FlatSymbolRefAttr>(
        i, ZestDialect::kUnitGradAttrName);
    if (!ref)
      continue;
    auto unit = SymbolTable::lookupNearestSymbolFrom<UnitOp>(func, ref);
    if (!unit)
      return func.emitError() << "gradient result #" << i << " refers to "
                              << ref << ", which is not a zest.unit";
    trained.push_back({unit, i});
  }
  return trained;
}

/// no_sync: a unit's flat gradient summed into its `zest.grad_sum`
/// argument, right before the reduction that read the gradient.
struct GradSum {
  Operation *reduce;
  Value sum;
  BlockArgument arg;
};

/// Adds the `zest.grad_sum` argument of `unit` to `func` and builds the sum
/// of the flat gradient `grad` reduces; failure (reported at `reportAt`) if
/// `grad` is not a reduced flat gradient.
static FailureOr<GradSum> sumGradient(func::FuncOp func, func::FuncOp reportAt,
                                      UnitOp unit, Value grad,
                                      Value accumulate) {
  Operation *reduce = getFirstReduction(grad);
  if (!reduce)
    return reportAt.emitError()
           << "no-sync: the gradient of unit @" << unit.getSymName()
           << " is not a reduced flat gradient";
  BlockArgument arg =
      appendArgument(func, unit.getFlatType(), ZestDialect::kGradSumAttrName,
                     FlatSymbolRefAttr::get(unit.getSymNameAttr()));
  OpBuilder builder(reduce);
  Value sum = buildGradSum(builder, reduce->getLoc(), reduce->getOperand(0),
                           arg, accumulate);
  return GradSum{reduce, sum, arg};
}

/// no_sync: a copy of the training function `func`, named
/// `<func>_accumulate`, that adds each unit's flat gradient to its
/// `zest.grad_sum` argument instead of reducing it, and returns the sums
/// (in place) and the other results.
static LogicalResult buildAccumulateEntry(func::FuncOp func) {
  MLIRContext *ctx = func.getContext();
  std::string name = (func.getSymName() + "_accumulate").str();
  auto module = func->getParentOfType<ModuleOp>();
  if (module.lookupSymbol(name))
    return func.emitError() << "no-sync needs the symbol @" << name
                            << " for the accumulation entry point, but the "
                            << "module already has one";
  FailureOr<SmallVector<std::pair<UnitOp, unsigned>>> trained =
      getTrainedUnits(func);
  if (failed(trained))
    return failure();
  OpBuilder builder(func);
  auto clone = cast<func::FuncOp>(builder.clone(*func));
  clone.setSymName(name);
  clone->setAttr(ZestDialect::kAccumulateForAttrName,
                 FlatSymbolRefAttr::get(func.getSymNameAttr()));
  auto hyperType =
      RankedTensorType::get({ZEST_HYPER_COUNT}, Float32Type::get(ctx));
  BlockArgument hyper = appendArgument(
      clone, hyperType, ZestDialect::kHyperAttrName, UnitAttr::get(ctx));
  auto ret = cast<func::ReturnOp>(clone.front().getTerminator());
  llvm::BitVector erase(clone.getNumResults());
  SmallVector<Value> sums;
  SmallVector<unsigned> sumArgs;
  SmallVector<Operation *> dead;
  builder.setInsertionPointToStart(&clone.front());
  Value accumulate = buildAccumulateFlag(builder, clone.getLoc(), hyper);
  for (auto [unit, resultIndex] : *trained) {
    Value grad = ret.getOperand(resultIndex);
    FailureOr<GradSum> summed =
        sumGradient(clone, func, unit, grad, accumulate);
    if (failed(summed))
      return failure();
    Operation *reduce = summed->reduce;
    sums.push_back(summed->sum);
    sumArgs.push_back(summed->arg.getArgNumber());
    erase.set(resultIndex);
    // The reductions go with the gradient result (last use first).
    if (grad.getDefiningOp() != reduce)
      dead.push_back(grad.getDefiningOp());
    dead.push_back(reduce);
  }
  if (failed(replaceResults(clone, ret, erase, sums, sumArgs)))
    return failure();
  for (Operation *op : dead) {
    if (!op->use_empty())
      return func.emitError() << "no-sync: a reduced gradient is used "
                              << "before the step ends";
    op->erase();
  }
  return success();
}

namespace {

/// What one unit's update takes, and the op after which it can run.
struct UnitUpdate {
  UnitOp unit;
  BlockArgument param, accum;
  Value grad;
  SmallVector<Value> state;
  Operation *after;
  /// Parameters without a gradient, found before no-sync's sum moves the
  /// flatten away from the reduction.
  SmallVector<StringRef> frozen;
};

/// `hyper` with its gradient scale multiplied by the clipping coefficient
/// `min(1, maxNorm / (norm + 1e-6))` of torch's clip_grad_norm_.
static Value buildClippedHyper(OpBuilder &builder, Location loc,
                               MutableArrayRef<UnitUpdate> updates, Value hyper,
                               double maxNorm) {
  SmallVector<Value> grads, accums;
  SmallVector<Attribute> units;
  for (UnitUpdate &u : updates) {
    grads.push_back(u.grad);
    if (u.accum) // none with no-sync: the gradient is the whole sum
      accums.push_back(u.accum);
    units.push_back(FlatSymbolRefAttr::get(u.unit.getSymNameAttr()));
  }
  auto scalarType = RankedTensorType::get({}, builder.getF32Type());
  Value norm = GlobalGradNormOp::create(builder, loc, scalarType, grads, accums,
                                        hyper, builder.getArrayAttr(units));
  Value normValue = tensor::ExtractOp::create(builder, loc, norm, {});
  auto f32 = [&](double value) -> Value {
    return arith::ConstantOp::create(builder, loc,
                                     builder.getF32FloatAttr(value));
  };
  Value coef = arith::DivFOp::create(
      builder, loc, f32(maxNorm),
      arith::AddFOp::create(builder, loc, normValue, f32(1e-6)));
  coef = arith::MinimumFOp::create(builder, loc, coef, f32(1.0));
  Value index =
      arith::ConstantIndexOp::create(builder, loc, ZEST_HYPER_GRAD_SCALE);
  Value scale = tensor::ExtractOp::create(builder, loc, hyper, index);
  Value clipped = arith::MulFOp::create(builder, loc, scale, coef);
  return tensor::InsertOp::create(builder, loc, clipped, hyper, index);
}

struct InsertOptimizerPass
    : public zest::impl::InsertOptimizerPassBase<InsertOptimizerPass> {
  using Base::Base;

  void runOnOperation() override {
    std::optional<Optimizer> kind = symbolizeOptimizer(optimizer);
    if (!kind) {
      getOperation().emitError()
          << "unknown optimizer '" << optimizer << "': use sgd or adamw";
      return signalPassFailure();
    }
    if (nesterov && (*kind != Optimizer::SGD || !momentum)) {
      getOperation().emitError()
          << "nesterov needs optimizer=sgd with momentum";
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> funcs;
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal())
        funcs.push_back(func);
    for (func::FuncOp func : funcs) {
      if (noSync && !getTrainedUnits(func)->empty() &&
          failed(buildAccumulateEntry(func)))
        return signalPassFailure();
      if (failed(rewrite(func, *kind)))
        return signalPassFailure();
    }
  }

  LogicalResult rewrite(func::FuncOp func, Optimizer kind);
};

} // namespace

LogicalResult InsertOptimizerPass::rewrite(func::FuncOp func, Optimizer kind) {
  MLIRContext *ctx = func.getContext();
  // Trained units, in result order: unit, gradient result index.
  FailureOr<SmallVector<std::pair<UnitOp, unsigned>>> trainedUnits =
      getTrainedUnits(func);
  if (failed(trainedUnits))
    return failure();
  SmallVector<std::pair<UnitOp, unsigned>> &trained = *trainedUnits;
  if (trained.empty())
    return success();
  if (func.getBlocks().size() != 1)
    return func.emitError() << "the optimizer needs a single-block function";
  if (func->hasAttr(ZestDialect::kOptimizerAttrName))
    return func.emitError() << "already has an optimizer";

  Block &body = func.front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  auto unitArgOf = [&](UnitOp unit) -> BlockArgument {
    for (BlockArgument arg : func.getArguments())
      if (auto ref = func.getArgAttrOfType<FlatSymbolRefAttr>(
              arg.getArgNumber(), ZestDialect::kUnitArgAttrName))
        if (ref.getValue() == unit.getSymName())
          return arg;
    return {};
  };

  // New arguments: the hyperparameters, then per unit its state and its
  // gradient accumulator, all in the shard's layout.
  auto hyperType =
      RankedTensorType::get({ZEST_HYPER_COUNT}, Float32Type::get(ctx));
  auto appendArg = [&](Type type, StringRef attr, Attribute value) {
    return appendArgument(func, type, attr, value);
  };
  BlockArgument hyper =
      appendArg(hyperType, ZestDialect::kHyperAttrName, UnitAttr::get(ctx));
  SmallVector<StringRef> stateNames = UpdateOp::getStateNames(kind, momentum);

  OpBuilder builder(ctx);
  if (maxGradNorm < 0)
    return func.emitError() << "max-grad-norm must be positive (0 disables "
                            << "clipping), got " << maxGradNorm;
  bool clip = maxGradNorm > 0;
  SmallVector<UnitUpdate> updates;
  // no_sync: each unit's flat gradient joins the sum of the earlier
  // micro-batches (the accumulate entry point's) before its one reduction.
  SmallVector<Value> gradSums;
  SmallVector<unsigned> gradSumArgs;
  Value accumulate;
  if (noSync) {
    builder.setInsertionPointToStart(&body);
    accumulate = buildAccumulateFlag(builder, func.getLoc(), hyper);
  }
  for (auto [unit, resultIndex] : trained) {
    BlockArgument param = unitArgOf(unit);
    if (!param)
      return func.emitError()
             << "returns a gradient of unit @" << unit.getSymName()
             << " but takes no argument for it";
    if (!unit.getElementType().isF32())
      return func.emitError()
             << "unit @" << unit.getSymName() << " holds "
             << unit.getElementType()
             << " parameters; the optimizer updates f32 units only";
    Value grad = ret.getOperand(resultIndex);
    auto flatRef = FlatSymbolRefAttr::get(unit.getSymNameAttr());
    SmallVector<Value> state;
    for (StringRef name : stateNames)
      state.push_back(appendArg(
          unit.getShardType(), ZestDialect::kOptimizerStateAttrName,
          DictionaryAttr::get(
              ctx, {NamedAttribute(StringAttr::get(ctx, "unit"), flatRef),
                    NamedAttribute(StringAttr::get(ctx, "name"),
                                   StringAttr::get(ctx, name))})));
    SmallVector<StringRef> frozen = getFrozenParams(unit, grad);
    BlockArgument accum;
    if (noSync) {
      FailureOr<GradSum> summed =
          sumGradient(func, func, unit, grad, accumulate);
      if (failed(summed))
        return failure();
      summed->reduce->setOperand(0, summed->sum);
      gradSums.push_back(summed->sum);
      gradSumArgs.push_back(summed->arg.getArgNumber());
    } else {
      accum = appendArg(unit.getShardType(), ZestDialect::kGradAccumAttrName,
                        flatRef);
    }

    // As early as possible: after the gradient exists and after the last
    // read of the shard (or of a view that may share its storage).
    Operation *after = grad.getDefiningOp()
                           ? body.findAncestorOpInBlock(*grad.getDefiningOp())
                           : nullptr;
    for (Value alias : getAliases(param))
      for (Operation *user : alias.getUsers()) {
        Operation *top = body.findAncestorOpInBlock(*user);
        if (top && top != ret && (!after || after->isBeforeInBlock(top)))
          after = top;
      }
    updates.push_back({unit, param, accum, grad, state, after, frozen});
  }

  // With clipping, every update waits for the global norm at the end and
  // takes its gradient scale multiplied by the clipping coefficient.
  Value updateHyper = hyper;
  if (clip) {
    builder.setInsertionPoint(ret);
    updateHyper =
        buildClippedHyper(builder, ret.getLoc(), updates, hyper, maxGradNorm);
  }

  // New results: per unit the updated shard, state and accumulator (or, with
  // no-sync, the gradient sum), each tagged with the argument it overwrites.
  SmallVector<Value> newResults;
  SmallVector<unsigned> updatedArgs;
  for (UnitUpdate &u : updates) {
    if (clip)
      builder.setInsertionPoint(ret);
    else if (u.after)
      builder.setInsertionPointAfter(u.after);
    else
      builder.setInsertionPointToStart(&body);
    SmallVector<Type> valueTypes(u.state.size() + (u.accum ? 1 : 0),
                                 u.unit.getShardType());
    auto update = UpdateOp::create(
        builder, u.grad.getLoc(), u.unit.getShardType(), valueTypes, kind,
        u.unit.getSymName(), u.param, u.grad, u.state, u.accum, updateHyper,
        /*nesterov=*/nesterov && momentum, builder.getStrArrayAttr(u.frozen));
    newResults.push_back(update.getNewParam());
    updatedArgs.push_back(u.param.getArgNumber());
    for (auto [value, arg] : llvm::zip(update.getNewState(), u.state)) {
      newResults.push_back(value);
      updatedArgs.push_back(cast<BlockArgument>(arg).getArgNumber());
    }
    if (u.accum) {
      newResults.push_back(update.getNewAccum());
      updatedArgs.push_back(u.accum.getArgNumber());
    }
  }
  llvm::append_range(newResults, gradSums);
  llvm::append_range(updatedArgs, gradSumArgs);

  // Gradient results give way to the updated values.
  llvm::BitVector erase(func.getNumResults());
  for (auto &entry : trained)
    erase.set(entry.second);
  if (failed(replaceResults(func, ret, erase, newResults, updatedArgs)))
    return failure();
  func->setAttr(ZestDialect::kOptimizerAttrName,
                StringAttr::get(ctx, stringifyOptimizer(kind)));
  return success();
}
