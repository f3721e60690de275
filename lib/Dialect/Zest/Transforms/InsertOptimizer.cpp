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
/// `min(1, maxNorm / (norm + 1e-6))` of torch's clip_grad_norm_; `norm` is
/// set to the global norm (a 0-d tensor).
static Value buildClippedHyper(OpBuilder &builder, Location loc,
                               MutableArrayRef<UnitUpdate> updates, Value hyper,
                               double maxNorm, Value &norm) {
  SmallVector<Value> grads, accums;
  SmallVector<Attribute> units;
  for (UnitUpdate &u : updates) {
    grads.push_back(u.grad);
    if (u.accum) // none with no-sync: the gradient is the whole sum
      accums.push_back(u.accum);
    units.push_back(FlatSymbolRefAttr::get(u.unit.getSymNameAttr()));
  }
  auto scalarType = RankedTensorType::get({}, builder.getF32Type());
  norm = GlobalGradNormOp::create(builder, loc, scalarType, grads, accums,
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

private:
  /// What a training step carries through its rewrite.
  struct Step {
    func::FuncOp func;
    func::ReturnOp ret;
    BlockArgument hyper;
    SmallVector<StringRef> stateNames;
    /// no_sync: the accumulate flag, and each unit's gradient sum and the
    /// argument it overwrites.
    Value accumulate;
    SmallVector<Value> gradSums;
    SmallVector<unsigned> gradSumArgs;
  };
  FailureOr<UnitUpdate> planUnitUpdate(Step &step, UnitOp unit, Value grad);
  void emitUpdates(Step &step, ArrayRef<UnitUpdate> updates, Optimizer kind,
                   Value updateHyper, SmallVectorImpl<Value> &newResults,
                   SmallVectorImpl<unsigned> &updatedArgs);
};

} // namespace

/// The argument of `func` that holds `unit`; null if none.
static BlockArgument getUnitArgument(func::FuncOp func, UnitOp unit) {
  for (BlockArgument arg : func.getArguments())
    if (auto ref = func.getArgAttrOfType<FlatSymbolRefAttr>(
            arg.getArgNumber(), ZestDialect::kUnitArgAttrName))
      if (ref.getValue() == unit.getSymName())
        return arg;
  return {};
}

/// Where the update of the unit in `param` goes, as early as possible: after
/// its gradient `grad` exists and after the last read of the shard (or of a
/// view that may share its storage); null for the start of `body`.
static Operation *getUpdatePoint(Block &body, Operation *ret, Value grad,
                                 BlockArgument param) {
  Operation *after = grad.getDefiningOp()
                         ? body.findAncestorOpInBlock(*grad.getDefiningOp())
                         : nullptr;
  for (Value alias : getAliases(param))
    for (Operation *user : alias.getUsers()) {
      Operation *top = body.findAncestorOpInBlock(*user);
      if (top && top != ret && (!after || after->isBeforeInBlock(top)))
        after = top;
    }
  return after;
}

/// Adds `unit`'s optimizer state arguments (`names`, in the shard's type).
static SmallVector<Value> appendStateArguments(func::FuncOp func, UnitOp unit,
                                               ArrayRef<StringRef> names) {
  MLIRContext *ctx = func.getContext();
  auto flatRef = FlatSymbolRefAttr::get(unit.getSymNameAttr());
  SmallVector<Value> state;
  for (StringRef name : names)
    state.push_back(appendArgument(
        func, unit.getShardType(), ZestDialect::kOptimizerStateAttrName,
        DictionaryAttr::get(
            ctx, {NamedAttribute(StringAttr::get(ctx, "unit"), flatRef),
                  NamedAttribute(StringAttr::get(ctx, "name"),
                                 StringAttr::get(ctx, name))})));
  return state;
}

/// Checks `unit` can be stepped, adds its state and accumulator arguments
/// (no-sync: sums its gradient instead) and says where its update goes.
FailureOr<UnitUpdate>
InsertOptimizerPass::planUnitUpdate(Step &step, UnitOp unit, Value grad) {
  func::FuncOp func = step.func;
  BlockArgument param = getUnitArgument(func, unit);
  if (!param)
    return func.emitError()
           << "returns a gradient of unit @" << unit.getSymName()
           << " but takes no argument for it";
  if (!unit.getElementType().isF32())
    return func.emitError()
           << "unit @" << unit.getSymName() << " holds "
           << unit.getElementType()
           << " parameters; the optimizer updates f32 units only";
  SmallVector<Value> state = appendStateArguments(func, unit, step.stateNames);
  SmallVector<StringRef> frozen = getFrozenParams(unit, grad);
  BlockArgument accum;
  if (noSync) {
    FailureOr<GradSum> summed =
        sumGradient(func, func, unit, grad, step.accumulate);
    if (failed(summed))
      return failure();
    summed->reduce->setOperand(0, summed->sum);
    step.gradSums.push_back(summed->sum);
    step.gradSumArgs.push_back(summed->arg.getArgNumber());
  } else {
    accum = appendArgument(func, unit.getShardType(),
                           ZestDialect::kGradAccumAttrName,
                           FlatSymbolRefAttr::get(unit.getSymNameAttr()));
  }
  Operation *after = getUpdatePoint(func.front(), step.ret, grad, param);
  return UnitUpdate{unit, param, accum, grad, state, after, frozen};
}

/// Emits each unit's `zest.update` and collects its new values: per unit the
/// updated shard, state and accumulator, each with the argument it
/// overwrites.
void InsertOptimizerPass::emitUpdates(Step &step, ArrayRef<UnitUpdate> updates,
                                      Optimizer kind, Value updateHyper,
                                      SmallVectorImpl<Value> &newResults,
                                      SmallVectorImpl<unsigned> &updatedArgs) {
  OpBuilder builder(step.func.getContext());
  bool clip = maxGradNorm > 0;
  for (const UnitUpdate &u : updates) {
    UnitOp unit = u.unit; // (its accessors are not const)
    if (clip)
      builder.setInsertionPoint(step.ret);
    else if (u.after)
      builder.setInsertionPointAfter(u.after);
    else
      builder.setInsertionPointToStart(&step.func.front());
    SmallVector<Type> valueTypes(u.state.size() + (u.accum ? 1 : 0),
                                 unit.getShardType());
    auto update = UpdateOp::create(
        builder, u.grad.getLoc(), unit.getShardType(), valueTypes, kind,
        unit.getSymName(), u.param, u.grad, u.state, u.accum, updateHyper,
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
}

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

  Step step;
  step.func = func;
  step.ret = cast<func::ReturnOp>(func.front().getTerminator());
  // New arguments: the hyperparameters, then per unit its state and its
  // gradient accumulator, all in the shard's layout.
  auto hyperType =
      RankedTensorType::get({ZEST_HYPER_COUNT}, Float32Type::get(ctx));
  step.hyper = appendArgument(func, hyperType, ZestDialect::kHyperAttrName,
                              UnitAttr::get(ctx));
  step.stateNames = UpdateOp::getStateNames(kind, momentum);
  if (maxGradNorm < 0)
    return func.emitError() << "max-grad-norm must be positive (0 disables "
                            << "clipping), got " << maxGradNorm;
  // no_sync: each unit's flat gradient joins the sum of the earlier
  // micro-batches (the accumulate entry point's) before its one reduction.
  OpBuilder builder(ctx);
  if (noSync) {
    builder.setInsertionPointToStart(&func.front());
    step.accumulate = buildAccumulateFlag(builder, func.getLoc(), step.hyper);
  }
  SmallVector<UnitUpdate> updates;
  for (auto [unit, resultIndex] : trained) {
    FailureOr<UnitUpdate> update =
        planUnitUpdate(step, unit, step.ret.getOperand(resultIndex));
    if (failed(update))
      return failure();
    updates.push_back(std::move(*update));
  }

  // With clipping, every update waits for the global norm at the end and
  // takes its gradient scale multiplied by the clipping coefficient.
  Value updateHyper = step.hyper, norm;
  if (maxGradNorm > 0) {
    builder.setInsertionPoint(step.ret);
    updateHyper = buildClippedHyper(builder, step.ret.getLoc(), updates,
                                    step.hyper, maxGradNorm, norm);
  }
  SmallVector<Value> newResults;
  SmallVector<unsigned> updatedArgs;
  emitUpdates(step, updates, kind, updateHyper, newResults, updatedArgs);
  llvm::append_range(newResults, step.gradSums);
  llvm::append_range(updatedArgs, step.gradSumArgs);

  // Gradient results give way to the updated values.
  llvm::BitVector erase(func.getNumResults());
  for (auto &entry : trained)
    erase.set(entry.second);
  if (failed(replaceResults(func, step.ret, erase, newResults, updatedArgs)))
    return failure();
  // The norm before clipping, for the metrics (a result, not an update).
  if (norm) {
    unsigned at = func.getNumResults();
    if (failed(func.insertResult(
            at, norm.getType(),
            DictionaryAttr::get(
                ctx, {NamedAttribute(
                         StringAttr::get(ctx, ZestDialect::kGradNormAttrName),
                         UnitAttr::get(ctx))}))))
      return failure();
    step.ret->insertOperands(at, norm);
  }
  func->setAttr(ZestDialect::kOptimizerAttrName,
                StringAttr::get(ctx, stringifyOptimizer(kind)));
  return success();
}
