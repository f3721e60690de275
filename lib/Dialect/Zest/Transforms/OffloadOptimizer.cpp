//===- OffloadOptimizer.cpp - The optimizer in pinned host memory ---------===//
//
// Marks offloaded units' shard, state and accumulator arguments as host
// memory, gives the device copies of what it reads of them, stages the
// gradients and hyperparameters to the host, and moves the updates to the
// end of the step. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/Passes.h"
#include "zest/Dialect/Zest/Transforms/Transforms.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::zest {
#define GEN_PASS_DEF_OFFLOADOPTIMIZERPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

/// The unit whose shard, optimizer state or accumulator argument `index` of
/// `func` is; empty for any other argument.
static StringRef getArgUnit(func::FuncOp func, unsigned index) {
  if (auto unit = func.getArgAttrOfType<FlatSymbolRefAttr>(
          index, ZestDialect::kUnitArgAttrName))
    return unit.getValue();
  if (auto unit = func.getArgAttrOfType<FlatSymbolRefAttr>(
          index, ZestDialect::kGradAccumAttrName))
    return unit.getValue();
  if (auto state = func.getArgAttrOfType<DictionaryAttr>(
          index, ZestDialect::kOptimizerStateAttrName))
    if (auto unit = state.getAs<FlatSymbolRefAttr>("unit"))
      return unit.getValue();
  return {};
}

namespace {

/// Offloads one entry point: `updates` are its offloaded units' updates.
class FunctionOffload {
public:
  FunctionOffload(func::FuncOp func, ArrayRef<UpdateOp> updates)
      : func(func), block(func.getBody().front()), updates(updates) {}

  /// Gives the device copies of what it reads of host argument `arg`: one
  /// before its first reader, or (`perUse`) one before each.
  void copyDeviceReads(BlockArgument arg, bool perUse);
  /// Stages the updates' gradients and hyperparameters and moves the updates
  /// to the end of the step.
  void moveUpdatesToHost();

private:
  bool isUpdate(Operation *op) const {
    return llvm::is_contained(updates, dyn_cast<UpdateOp>(op));
  }
  /// Starts copying `source` into a new stage argument right after it is
  /// computed; the future, once per source.
  Value startCopyToHost(Value source);

  func::FuncOp func;
  Block &block;
  ArrayRef<UpdateOp> updates;
  /// The copy started for each staged value.
  DenseMap<Value, Value> futures;
};

} // namespace

void FunctionOffload::copyDeviceReads(BlockArgument arg, bool perUse) {
  // The device's reads, by the op of the body holding each, in order.
  llvm::MapVector<Operation *, SmallVector<OpOperand *>> reads;
  for (OpOperand &use : arg.getUses()) {
    Operation *user = block.findAncestorOpInBlock(*use.getOwner());
    if (!isUpdate(user))
      reads[user].push_back(&use);
  }
  if (reads.empty())
    return;
  auto users = llvm::to_vector(llvm::make_first_range(reads));
  llvm::sort(users,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  Value copy;
  for (Operation *user : users) {
    if (!copy || perUse) {
      OpBuilder builder(user);
      copy = CopyToDeviceOp::create(builder, arg.getLoc(), arg.getType(), arg);
    }
    for (OpOperand *read : reads[user])
      read->set(copy);
  }
}

Value FunctionOffload::startCopyToHost(Value source) {
  auto [it, inserted] = futures.try_emplace(source);
  if (!inserted)
    return it->second;
  MLIRContext *ctx = func.getContext();
  Builder attrs(ctx);
  unsigned index = func.getNumArguments();
  DictionaryAttr stageAttrs = attrs.getDictionaryAttr(
      {attrs.getNamedAttr(ZestDialect::kHostArgAttrName, attrs.getUnitAttr()),
       attrs.getNamedAttr(ZestDialect::kStageArgAttrName,
                          attrs.getUnitAttr())});
  (void)func.insertArgument(index, source.getType(), stageAttrs,
                            source.getLoc());
  OpBuilder builder(ctx);
  builder.setInsertionPointAfterValue(source);
  it->second = CopyToHostStartOp::create(
      builder, source.getLoc(),
      FutureType::get(ctx, cast<RankedTensorType>(source.getType())), source,
      func.getArgument(index));
  return it->second;
}

void FunctionOffload::moveUpdatesToHost() {
  // Every stage starts where its source is ready, before any update moves.
  for (UpdateOp update : updates) {
    startCopyToHost(update.getGrad());
    startCopyToHost(update.getHyper());
  }
  Operation *terminator = block.getTerminator();
  DenseMap<Value, Value> waited; // the host's copy of each staged value
  for (UpdateOp update : updates) {
    update->moveBefore(terminator);
    OpBuilder builder(update);
    for (OpOperand *operand :
         {&update.getGradMutable(), &update.getHyperMutable()}) {
      Value source = operand->get();
      auto [it, inserted] = waited.try_emplace(source);
      if (inserted)
        it->second = CopyWaitOp::create(
            builder, update.getLoc(), source.getType(), futures.lookup(source));
      operand->set(it->second);
    }
  }
}

namespace {
struct OffloadOptimizerPass
    : public zest::impl::OffloadOptimizerPassBase<OffloadOptimizerPass> {
  using Base::Base;
  void runOnOperation() override;

private:
  LogicalResult offload(func::FuncOp func, const llvm::StringSet<> &units);
  /// Whether `arg` of `func` is a unit's shard (copied per use with
  /// `params`).
  static bool isShard(func::FuncOp func, BlockArgument arg) {
    return bool(
        func.getArgAttr(arg.getArgNumber(), ZestDialect::kUnitArgAttrName));
  }
};
} // namespace

LogicalResult OffloadOptimizerPass::offload(func::FuncOp func,
                                            const llvm::StringSet<> &units) {
  Block &block = func.getBody().front();
  SmallVector<BlockArgument> hostArgs;
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    StringRef unit = getArgUnit(func, i);
    if (unit.empty() || !units.contains(unit))
      continue;
    func.setArgAttr(i, ZestDialect::kHostArgAttrName,
                    UnitAttr::get(func.getContext()));
    hostArgs.push_back(func.getArgument(i));
  }
  SmallVector<UpdateOp> updates;
  for (auto update : block.getOps<UpdateOp>()) {
    if (!units.contains(update.getUnit()))
      continue;
    // The update's shard, state and accumulator are what the host keeps.
    SmallVector<Value> kept = {update.getParam()};
    llvm::append_range(kept, update.getState());
    if (update.getAccum())
      kept.push_back(update.getAccum());
    for (Value value : kept)
      if (!llvm::is_contained(hostArgs, value))
        return update.emitOpError()
               << "cannot be offloaded: its shard, state and accumulator must "
               << "be arguments of the entry point";
    updates.push_back(update);
  }
  FunctionOffload offload(func, updates);
  for (BlockArgument arg : hostArgs)
    offload.copyDeviceReads(arg, params && isShard(func, arg));
  offload.moveUpdatesToHost();
  return success();
}

void OffloadOptimizerPass::runOnOperation() {
  ModuleOp module = getOperation();
  FailureOr<SmallVector<UnitOp>> chosen =
      selectUnits(module, units, "--offload-units", /*rootByDefault=*/true);
  if (failed(chosen))
    return signalPassFailure();
  llvm::StringSet<> names;
  for (UnitOp unit : *chosen) {
    unit->setAttr(
        ZestDialect::kOffloadAttrName,
        StringAttr::get(module.getContext(), params ? "params" : "optimizer"));
    names.insert(unit.getSymName());
  }
  for (auto func : module.getOps<func::FuncOp>())
    if (!func.isExternal() && failed(offload(func, names)))
      return signalPassFailure();
}
