//===- ShardParams.cpp - Replace parameters by unit shards ----------------===//
//
// Rewrites each function that takes parameters into the sharded program:
// unit shards in, gathers + views before uses, flattened gradients
// reduce-scattered (or all-reduced) out.
//
//===----------------------------------------------------------------------===//

#include "ParameterDerivations.h"
#include "zest/Dialect/Zest/Transforms/ModelContract.h"
#include "zest/Dialect/Zest/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::zest {
#define GEN_PASS_DEF_SHARDPARAMSPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

namespace {

/// Sharded units are gathered before their uses, except expert-parallel
/// ones: a rank computes with its own experts.
bool isGathered(UnitOp unit) { return unit.isSharded() && !unit.getExperts(); }

/// A maximal run of top-level operations that use a sharded unit without a
/// use of another sharded unit in between: one gather serves all of it.
struct UseInterval {
  UnitOp unit;
  Operation *first;
};

/// Which sharded units each top-level operation uses.
using UnitUses = DenseMap<Operation *, llvm::SetVector<Operation *>>;

/// The use intervals of a block, and the interval of each (top-level op,
/// unit) use.
struct UseIntervals {
  SmallVector<UseInterval> list;
  DenseMap<std::pair<Operation *, Operation *>, unsigned> of;
};

class FunctionSharder {
public:
  FunctionSharder(ModelFunction &info, ArrayRef<UnitOp> units,
                  const llvm::StringMap<UnitOp> &unitOfParam)
      : info(info), func(info.func), units(units), unitOfParam(unitOfParam) {}

  void run();

private:
  /// Adds one argument per unit the function uses, in unit order.
  void addUnitArguments();
  void rewriteReplicatedUses(UnitOp unit, ArrayRef<BlockArgument> params);
  /// An expert-parallel unit's parameter is a view of this rank's shard.
  void rewriteExpertUses(UnitOp unit, ArrayRef<BlockArgument> params);
  /// An expert-parallel unit's gradient shard, made the mean over all ranks.
  Operation *reduceExpertGradient(OpBuilder &builder, Location loc, UnitOp unit,
                                  Value grad);
  /// The sharded units each top-level op uses through a parameter, and
  /// (given `derivations`) through a value derived from parameters.
  UnitUses collectUses(const ParameterDerivations *derivations = nullptr);
  UseIntervals computeIntervals(const UnitUses &uses);
  void rederiveAcrossIntervals();
  void rewriteShardedUses();
  void reduceGradients();
  unsigned unitIndex(UnitOp unit) const {
    return llvm::find(units, unit) - units.begin();
  }

  ModelFunction &info;
  func::FuncOp func;
  ArrayRef<UnitOp> units;
  const llvm::StringMap<UnitOp> &unitOfParam;
  /// Argument holding each used unit's local buffer.
  llvm::MapVector<Operation *, BlockArgument> unitArg;
  /// Parameter arguments of each used unit.
  llvm::MapVector<Operation *, SmallVector<BlockArgument>> paramArgs;
  /// FQN of every parameter argument.
  DenseMap<BlockArgument, StringAttr> fqnOf;
};

} // namespace

void FunctionSharder::addUnitArguments() {
  // Unit order, not argument order, so every function lists units alike.
  SmallVector<UnitOp> used;
  for (auto [argIndex, fqn] : info.params) {
    UnitOp unit = unitOfParam.lookup(fqn.getValue());
    if (!llvm::is_contained(used, unit))
      used.push_back(unit);
  }
  llvm::sort(used,
             [&](UnitOp a, UnitOp b) { return unitIndex(a) < unitIndex(b); });
  SmallVector<BlockArgument> oldArgs(func.getArguments());
  MLIRContext *ctx = func.getContext();
  for (auto [position, unit] : llvm::enumerate(used)) {
    // Located at the unit's first parameter argument of this function.
    Location loc = func.getLoc();
    for (auto [argIndex, fqn] : info.params)
      if (unitOfParam.lookup(fqn.getValue()) == unit) {
        loc = oldArgs[argIndex].getLoc();
        break;
      }
    auto attrs = DictionaryAttr::get(
        ctx,
        {NamedAttribute(StringAttr::get(ctx, ZestDialect::kUnitArgAttrName),
                        FlatSymbolRefAttr::get(unit.getSymNameAttr()))});
    (void)func.insertArgument(position, unit.getShardType(), attrs, loc);
    unitArg[unit] = func.getArgument(position);
    paramArgs[unit] = {};
  }
  for (auto [argIndex, fqn] : info.params) {
    BlockArgument arg = oldArgs[argIndex];
    paramArgs[unitOfParam.lookup(fqn.getValue())].push_back(arg);
    fqnOf[arg] = fqn;
  }
}

void FunctionSharder::rewriteReplicatedUses(UnitOp unit,
                                            ArrayRef<BlockArgument> params) {
  // Every rank holds the whole buffer: views straight off the argument.
  OpBuilder builder = OpBuilder::atBlockBegin(&func.front());
  Value buffer = unitArg.lookup(unit);
  for (BlockArgument param : params) {
    if (param.use_empty())
      continue;
    Value view =
        UnflattenOp::create(builder, param.getLoc(), param.getType(), buffer,
                            unit.getSymName(), fqnOf.lookup(param).getValue());
    param.replaceAllUsesWith(view);
  }
}

void FunctionSharder::rewriteExpertUses(UnitOp unit,
                                        ArrayRef<BlockArgument> params) {
  OpBuilder builder = OpBuilder::atBlockBegin(&func.front());
  for (BlockArgument param : params) {
    if (param.use_empty())
      continue;
    auto type = cast<RankedTensorType>(param.getType());
    SmallVector<ReassociationIndices> all = {
        llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()))};
    Value view = tensor::ExpandShapeOp::create(builder, param.getLoc(), type,
                                               unitArg.lookup(unit), all);
    param.replaceAllUsesWith(view);
  }
}

Operation *FunctionSharder::reduceExpertGradient(OpBuilder &builder,
                                                 Location loc, UnitOp unit,
                                                 Value grad) {
  auto type = cast<RankedTensorType>(grad.getType());
  SmallVector<ReassociationIndices> all = {
      llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()))};
  Value flat = tensor::CollapseShapeOp::create(builder, loc, grad, all);
  // The rank's experts saw the rows of its whole group: their gradient is
  // the sum of the group's ranks' gradients, of which the step takes the
  // mean, as for every other unit.
  auto shardType = cast<RankedTensorType>(flat.getType());
  Value scale = arith::ConstantOp::create(
      builder, loc,
      builder.getFloatAttr(shardType.getElementType(),
                           1.0 / double(unit.getWorldSize())));
  Value empty = tensor::EmptyOp::create(builder, loc, shardType.getShape(),
                                        shardType.getElementType());
  AffineMap identity = builder.getMultiDimIdentityMap(1);
  Operation *reduced = linalg::GenericOp::create(
      builder, loc, shardType, flat, empty, {identity, identity},
      {utils::IteratorType::parallel},
      [&](OpBuilder &b, Location at, ValueRange args) {
        linalg::YieldOp::create(
            b, at, ValueRange{arith::MulFOp::create(b, at, args[0], scale)});
      });
  if (unit.getNumReplicas() > 1)
    reduced = AllReduceOp::create(builder, loc, unit.getShardType(),
                                  Reduction::Avg, reduced->getResult(0),
                                  unit.getSymName(), /*across_replicas=*/true);
  return reduced;
}

UnitUses FunctionSharder::collectUses(const ParameterDerivations *derivations) {
  Block &body = func.front();
  UnitUses uses;
  for (auto &[unitOp, params] : paramArgs) {
    auto unit = cast<UnitOp>(unitOp);
    if (!isGathered(unit))
      continue;
    for (BlockArgument param : params)
      for (Operation *user : param.getUsers())
        uses[body.findAncestorOpInBlock(*user)].insert(unit);
  }
  if (derivations)
    for (auto &[op, unit] : *derivations)
      for (Operation *user : op->getUsers())
        uses[body.findAncestorOpInBlock(*user)].insert(unit);
  return uses;
}

UseIntervals FunctionSharder::computeIntervals(const UnitUses &uses) {
  // Walk the block once, opening an interval when a unit is used and none is
  // open, closing every other open interval when another unit is used.
  UseIntervals intervals;
  DenseMap<Operation *, unsigned> openInterval;
  for (Operation &op : func.front()) {
    auto it = uses.find(&op);
    if (it == uses.end())
      continue;
    const llvm::SetVector<Operation *> &used = it->second;
    for (auto open = openInterval.begin(); open != openInterval.end();) {
      auto current = open++;
      if (!used.contains(current->first))
        openInterval.erase(current);
    }
    // Open in unit order so gathers issued before one op keep that order.
    SmallVector<Operation *> ordered(used.begin(), used.end());
    llvm::sort(ordered, [&](Operation *a, Operation *b) {
      return unitIndex(cast<UnitOp>(a)) < unitIndex(cast<UnitOp>(b));
    });
    for (Operation *unit : ordered) {
      auto [slot, inserted] =
          openInterval.insert({unit, intervals.list.size()});
      if (inserted)
        intervals.list.push_back({cast<UnitOp>(unit), &op});
      intervals.of[{&op, unit}] = slot->second;
    }
  }
  return intervals;
}

void FunctionSharder::rederiveAcrossIntervals() {
  Block &body = func.front();
  DenseMap<BlockArgument, Operation *> unitOfArg;
  for (auto &[unitOp, params] : paramArgs)
    if (isGathered(cast<UnitOp>(unitOp)))
      for (BlockArgument param : params)
        unitOfArg[param] = unitOp;
  ParameterDerivations derivations = findParameterDerivations(
      body, [&](BlockArgument arg) { return unitOfArg.lookup(arg); });
  if (derivations.empty())
    return;
  // Where each derived value is read: in the interval that derived it, or
  // in a later one (the backward), where it is derived again.
  UseIntervals intervals = computeIntervals(collectUses(&derivations));
  SmallVector<std::pair<Operation *, OpOperand *>> farUses;
  for (auto &[op, unit] : derivations)
    for (OpOperand &use : op->getResult(0).getUses()) {
      Operation *top = body.findAncestorOpInBlock(*use.getOwner());
      // A derived result lives to the end anyway.
      if (top->hasTrait<OpTrait::IsTerminator>())
        continue;
      if (intervals.of.lookup({top, unit}) != intervals.of.lookup({op, unit}))
        farUses.push_back({top, &use});
    }
  // In block order, so that the first use in an interval derives what the
  // later ones there share.
  llvm::sort(farUses, [](auto &a, auto &b) {
    return a.first->isBeforeInBlock(b.first);
  });
  DenseMap<unsigned, IRMapping> derivedIn;
  OpBuilder builder(func.getContext());
  for (auto [top, use] : farUses) {
    Operation *unit = derivations.lookup(use->get().getDefiningOp());
    builder.setInsertionPoint(top);
    use->set(cloneDerivation(builder, use->get(), derivations,
                             derivedIn[intervals.of.lookup({top, unit})]));
  }
  eraseUnusedDerivations(derivations);
}

void FunctionSharder::rewriteShardedUses() {
  Block &body = func.front();
  UseIntervals found = computeIntervals(collectUses());
  SmallVector<UseInterval> &intervals = found.list;
  auto &intervalOf = found.of;

  // One gather per interval, then a view per parameter used in it.
  SmallVector<DenseMap<BlockArgument, Value>> views(intervals.size());
  SmallVector<Value> gathered(intervals.size()), lastView(intervals.size());
  OpBuilder builder(func.getContext());
  for (auto [index, interval] : llvm::enumerate(intervals)) {
    builder.setInsertionPoint(interval.first);
    gathered[index] = AllGatherOp::create(
        builder, interval.first->getLoc(), interval.unit.getFlatType(),
        unitArg.lookup(interval.unit), interval.unit.getSymName());
  }
  for (auto &[unitOp, params] : paramArgs) {
    auto unit = cast<UnitOp>(unitOp);
    if (!isGathered(unit))
      continue;
    for (BlockArgument param : params) {
      for (OpOperand &use : llvm::make_early_inc_range(param.getUses())) {
        Operation *top = body.findAncestorOpInBlock(*use.getOwner());
        unsigned index = intervalOf.lookup({top, unit});
        Value &view = views[index][param];
        if (!view) {
          // Views follow the gather in the order they are created.
          Value &last = lastView[index];
          builder.setInsertionPointAfterValue(last ? last : gathered[index]);
          view = UnflattenOp::create(builder, param.getLoc(), param.getType(),
                                     gathered[index], unit.getSymName(),
                                     fqnOf.lookup(param).getValue());
          last = view;
        }
        use.set(view);
      }
    }
  }
}

/// The attributes of the result holding `unit`'s gradient.
static DictionaryAttr getUnitGradAttrs(UnitOp unit) {
  MLIRContext *ctx = unit.getContext();
  return DictionaryAttr::get(
      ctx, {NamedAttribute(StringAttr::get(ctx, ZestDialect::kUnitGradAttrName),
                           FlatSymbolRefAttr::get(unit.getSymNameAttr()))});
}

void FunctionSharder::reduceGradients() {
  auto returnOp = cast<func::ReturnOp>(func.front().getTerminator());
  MLIRContext *ctx = func.getContext();
  Block &body = func.front();

  // Results that stay: everything but per-parameter gradients.
  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  SmallVector<DictionaryAttr> resultAttrs;
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    if (func.getResultAttr(i, ZestDialect::kGradAttrName))
      continue;
    results.push_back(returnOp.getOperand(i));
    resultTypes.push_back(func.getResultTypes()[i]);
    resultAttrs.push_back(func.getResultAttrDict(i) ? func.getResultAttrDict(i)
                                                    : DictionaryAttr::get(ctx));
  }

  // After each op that computes a unit's last gradient, the last collective
  // inserted there, so several units finishing together keep unit order.
  DenseMap<Operation *, Operation *> insertedAfter;
  OpBuilder builder(ctx);
  for (auto &[unitOp, params] : paramArgs) {
    auto unit = cast<UnitOp>(unitOp);
    SmallVector<Attribute> names;
    SmallVector<Value> grads;
    Operation *lastDef = nullptr;
    for (BlockArgument param : params) {
      StringAttr fqn = fqnOf.lookup(param);
      auto result = info.gradResults.find(fqn.getValue());
      if (result == info.gradResults.end())
        continue; // Frozen: zeros in the flat gradient.
      Value grad = returnOp.getOperand(result->second);
      names.push_back(fqn);
      grads.push_back(grad);
      // Return operands are defined in the function body (or are
      // arguments, which are ready at entry).
      if (Operation *def = grad.getDefiningOp())
        if (!lastDef || lastDef->isBeforeInBlock(def))
          lastDef = def;
    }
    if (grads.empty())
      continue;
    Operation *&anchor = insertedAfter[lastDef];
    if (anchor)
      builder.setInsertionPointAfter(anchor);
    else if (lastDef)
      builder.setInsertionPointAfter(lastDef);
    else
      builder.setInsertionPointToStart(&body);
    Location loc = lastDef ? lastDef->getLoc() : func.getLoc();
    if (unit.getExperts()) {
      anchor = reduceExpertGradient(builder, loc, unit, grads.front());
      results.push_back(anchor->getResult(0));
      resultTypes.push_back(anchor->getResult(0).getType());
      resultAttrs.push_back(getUnitGradAttrs(unit));
      continue;
    }
    Value flat =
        FlattenOp::create(builder, loc, unit.getFlatType(), unit.getSymName(),
                          builder.getArrayAttr(names), grads);
    Operation *reduced;
    if (unit.isSharded())
      reduced =
          ReduceScatterOp::create(builder, loc, unit.getShardType(),
                                  Reduction::Avg, flat, unit.getSymName());
    else
      reduced = AllReduceOp::create(builder, loc, unit.getFlatType(),
                                    Reduction::Avg, flat, unit.getSymName());
    // Hybrid sharding: every replica group reduced its own micro-batches;
    // the shards' mean over the groups is the mean over all ranks.
    if (unit.isSharded() && unit.getNumReplicas() > 1)
      reduced = AllReduceOp::create(
          builder, loc, unit.getShardType(), Reduction::Avg,
          reduced->getResult(0), unit.getSymName(), /*across_replicas=*/true);
    anchor = reduced;
    results.push_back(reduced->getResult(0));
    resultTypes.push_back(reduced->getResult(0).getType());
    resultAttrs.push_back(getUnitGradAttrs(unit));
  }

  returnOp->setOperands(results);
  func.setType(FunctionType::get(ctx, func.getArgumentTypes(), resultTypes));
  func.setAllResultAttrs(resultAttrs);
}

void FunctionSharder::run() {
  addUnitArguments();
  for (auto &[unitOp, params] : paramArgs) {
    auto unit = cast<UnitOp>(unitOp);
    if (unit.getExperts())
      rewriteExpertUses(unit, params);
    else if (!unit.isSharded())
      rewriteReplicatedUses(unit, params);
  }
  rederiveAcrossIntervals();
  rewriteShardedUses();
  reduceGradients();
  llvm::BitVector erase(func.getNumArguments());
  for (auto [arg, fqn] : fqnOf)
    erase.set(arg.getArgNumber());
  (void)func.eraseArguments(erase);
}

namespace {
struct ShardParamsPass
    : public zest::impl::ShardParamsPassBase<ShardParamsPass> {
  using Base::Base;
  void runOnOperation() override;
};
} // namespace

void ShardParamsPass::runOnOperation() {
  ModuleOp module = getOperation();
  FailureOr<ModelContract> contract = ModelContract::analyze(module);
  if (failed(contract))
    return signalPassFailure();

  SmallVector<UnitOp> units(module.getOps<UnitOp>());
  llvm::StringMap<UnitOp> unitOfParam;
  for (UnitOp unit : units) {
    if (worldSize != 0 && unit.getNumRanks() != worldSize) {
      unit.emitError() << "conflicting world size: unit @" << unit.getSymName()
                       << " is laid out for " << unit.getNumRanks()
                       << " ranks but world-size=" << worldSize.getValue()
                       << "; group again with world-size="
                       << worldSize.getValue();
      return signalPassFailure();
    }
    for (auto param : unit.getParams().getAsRange<ParamAttr>())
      unitOfParam[param.getName()] = unit;
  }

  bool failedAny = false;
  for (ModelFunction &info : contract->functions) {
    for (auto [argIndex, fqn] : info.params) {
      UnitOp unit = unitOfParam.lookup(fqn.getValue());
      if (!unit) {
        emitError(info.func.getArgument(argIndex).getLoc())
            << "parameter '" << fqn.getValue() << "' belongs to no "
            << "zest.unit; run --zest-group-units first";
        failedAny = true;
        continue;
      }
      ParamAttr param = unit.lookupParam(fqn.getValue());
      Type argType = info.func.getArgument(argIndex).getType();
      Type declared =
          unit.getExperts() ? unit.getLocalExpertsType() : param.getValueType();
      if (declared != argType) {
        emitError(info.func.getArgument(argIndex).getLoc())
            << "parameter '" << fqn.getValue() << "' has type " << argType
            << " but unit @" << unit.getSymName() << " declares " << declared;
        failedAny = true;
      }
    }
  }
  if (failedAny)
    return signalPassFailure();
  for (ModelFunction &info : contract->functions)
    FunctionSharder(info, units, unitOfParam).run();
}
