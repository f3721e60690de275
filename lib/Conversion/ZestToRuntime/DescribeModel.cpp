//===- DescribeModel.cpp - What the host driver learns of the model -------===//
//
// The roles of a sharded entry point's arguments and results (unit shard,
// optimizer state, data, loss, ...) are `zest.*` attributes that the
// lowering does not carry. This pass writes them into the model descriptor
// first, records each entry point's C-interface arity for
// zest-verify-lowering and each unit's optimizer state and accumulator bytes
// for the report, and drops them.
//
//===----------------------------------------------------------------------===//

#include "zest/Conversion/ModelDescriptor.h"
#include "zest/Conversion/Passes.h"
#include "zest/Dialect/Zest/IR/ZestOps.h"
#include "zest/Dialect/Zest/Transforms/MemoryPlan.h"

#include <array>

namespace mlir::zest {
#define GEN_PASS_DEF_DESCRIBEMODELPASS
#include "zest/Conversion/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

static bool isStaticTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.hasStaticShape();
}

/// Checks what the host driver can call: tensors in, tensors out, and no
/// name that clashes with the driver's own symbols.
static LogicalResult checkEntryPoint(func::FuncOp func) {
  bool ok = true;
  if (func.getSymName() == "main" || func.getSymName().starts_with("zest_")) {
    func.emitError() << "entry point name '" << func.getSymName()
                     << "' clashes with the runtime; rename the function";
    ok = false;
  }
  for (auto [i, type] : llvm::enumerate(func.getArgumentTypes()))
    if (!isStaticTensor(type)) {
      func.emitError() << "argument #" << i << " of entry point @"
                       << func.getSymName() << " has type " << type
                       << "; entry points take statically shaped tensors";
      ok = false;
    }
  for (auto [i, type] : llvm::enumerate(func.getResultTypes()))
    if (!isStaticTensor(type)) {
      func.emitError() << "result #" << i << " of entry point @"
                       << func.getSymName() << " has type " << type
                       << "; entry points return statically shaped tensors";
      ok = false;
    }
  return success(ok);
}

/// What the entry point's C interface takes once in-place updates are
/// dropped: one descriptor per argument and per remaining result.
static int64_t getCInterfaceArity(func::FuncOp func) {
  unsigned updated = 0;
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    updated += bool(func.getResultAttr(i, ZestDialect::kUpdatedAttrName));
  return func.getNumArguments() + func.getNumResults() - updated;
}

/// Drops the `zest.*` argument, result and function attributes of `func`
/// but `zest.updated`, `zest.host` (where a buffer lives) and, with
/// `keepUnits`, `zest.unit`.
static void stripRoleAttributes(func::FuncOp func, bool keepUnits) {
  auto isRole = [&](NamedAttribute attr) {
    return attr.getName().getValue().starts_with("zest.") &&
           attr.getName() != ZestDialect::kUpdatedAttrName &&
           attr.getName() != ZestDialect::kHostArgAttrName &&
           !(keepUnits && attr.getName() == ZestDialect::kUnitArgAttrName);
  };
  auto strip = [&](DictionaryAttr attrs) {
    SmallVector<NamedAttribute> kept;
    if (attrs)
      llvm::copy_if(attrs.getValue(), std::back_inserter(kept),
                    [&](NamedAttribute attr) { return !isRole(attr); });
    return DictionaryAttr::get(func.getContext(), kept);
  };
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    func.setArgAttrs(i, strip(func.getArgAttrDict(i)));
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    func.setResultAttrs(i, strip(func.getResultAttrDict(i)));
  func->removeAttr(ZestDialect::kOptimizerAttrName);
}

/// The unit an argument of `func` holds optimizer state (first) or a
/// gradient accumulator (second) of, if it does.
static std::pair<StringRef, bool> getStateOrAccumulatorUnit(func::FuncOp func,
                                                            unsigned i) {
  if (auto state = func.getArgAttrOfType<DictionaryAttr>(
          i, ZestDialect::kOptimizerStateAttrName))
    return {state.getAs<FlatSymbolRefAttr>("unit").getValue(), false};
  for (StringRef name :
       {ZestDialect::kGradAccumAttrName, ZestDialect::kGradSumAttrName})
    if (auto unit = func.getArgAttrOfType<FlatSymbolRefAttr>(i, name))
      return {unit.getValue(), true};
  return {};
}

/// Records on each unit the bytes of its optimizer state and gradient
/// accumulators (the most any entry point takes), which the step's
/// arguments hold outside the pool, for the report's unit table.
static void recordUnitArgumentBytes(ModuleOp module,
                                    ArrayRef<func::FuncOp> entries) {
  // Per unit: optimizer state, accumulators.
  llvm::StringMap<std::array<int64_t, 2>> most;
  for (func::FuncOp func : entries) {
    llvm::StringMap<std::array<int64_t, 2>> bytes;
    for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
      auto [unit, accumulator] = getStateOrAccumulatorUnit(func, i);
      if (!unit.empty())
        bytes[unit][accumulator] += getStaticBufferBytes(type).value_or(0);
    }
    for (auto &[unit, kinds] : bytes)
      for (int k = 0; k < 2; ++k)
        most[unit][k] = std::max(most[unit][k], kinds[k]);
  }
  Builder builder(module.getContext());
  for (UnitOp unit : module.getOps<UnitOp>()) {
    std::array<int64_t, 2> kinds = most.lookup(unit.getSymName());
    unit->setAttr(
        ZestDialect::kArgumentBytesAttrName,
        builder.getDictionaryAttr(
            {builder.getNamedAttr("optimizer_state",
                                  builder.getI64IntegerAttr(kinds[0])),
             builder.getNamedAttr("accumulators",
                                  builder.getI64IntegerAttr(kinds[1]))}));
  }
}

namespace {
struct DescribeModelPass
    : public zest::impl::DescribeModelPassBase<DescribeModelPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> entries;
    for (auto func : module.getOps<func::FuncOp>())
      if (isEntryPoint(func))
        entries.push_back(func);
    if (entries.empty()) {
      emitError(module.getLoc())
          << "the module has no entry point: zestc compiles the public "
          << "functions with a body";
      return signalPassFailure();
    }
    bool ok = true;
    for (func::FuncOp func : entries)
      ok &= succeeded(checkEntryPoint(func));
    if (!ok)
      return signalPassFailure();

    module->setAttr(
        ZestDialect::kModelDescriptorAttrName,
        StringAttr::get(module.getContext(), buildModelDescriptor(module)));
    SmallVector<EntryPointRecord> records;
    for (func::FuncOp func : entries)
      records.push_back({func.getSymName().str(), getCInterfaceArity(func)});
    setEntryPointRecords(module, records);
    recordUnitArgumentBytes(module, entries);
    for (auto func : module.getOps<func::FuncOp>())
      stripRoleAttributes(func, keepUnits);
  }
};
} // namespace
