//===- ModelDescriptor.cpp - The text record of a sharded model -----------===//
//
// Writes the format of runtime/include/zest_model_descriptor.h (the training
// program reads it with the same names).
//
//===----------------------------------------------------------------------===//

#include "zest/Conversion/ModelDescriptor.h"
#include "zest/Dialect/Zest/IR/ZestOps.h"
#include "zest/Dialect/Zest/Transforms/CostModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/Support/raw_ostream.h"

#include "zest_model_descriptor.h"

using namespace mlir;
using namespace mlir::zest;

void mlir::zest::setEntryPointRecords(ModuleOp module,
                                      ArrayRef<EntryPointRecord> entries) {
  Builder builder(module.getContext());
  SmallVector<Attribute> records;
  for (const EntryPointRecord &entry : entries)
    records.push_back(builder.getDictionaryAttr(
        {builder.getNamedAttr("name", builder.getStringAttr(entry.name)),
         builder.getNamedAttr("c_interface_args", builder.getI64IntegerAttr(
                                                      entry.cInterfaceArgs))}));
  module->setAttr(ZestDialect::kEntryPointsAttrName,
                  builder.getArrayAttr(records));
}

FailureOr<SmallVector<EntryPointRecord>>
mlir::zest::getEntryPointRecords(ModuleOp module) {
  SmallVector<EntryPointRecord> records;
  auto entries =
      module->getAttrOfType<ArrayAttr>(ZestDialect::kEntryPointsAttrName);
  if (!entries)
    return records;
  for (Attribute attr : entries) {
    auto entry = dyn_cast<DictionaryAttr>(attr);
    auto name = entry ? entry.getAs<StringAttr>("name") : StringAttr();
    auto arity =
        entry ? entry.getAs<IntegerAttr>("c_interface_args") : IntegerAttr();
    if (!name || !arity)
      return emitError(module.getLoc())
             << "malformed '" << ZestDialect::kEntryPointsAttrName
             << "' record " << attr << ": expected {name, c_interface_args}";
    records.push_back({name.getValue().str(), arity.getInt()});
  }
  return records;
}

static void printShape(llvm::raw_ostream &os, RankedTensorType type) {
  os << getDTypeName(type.getElementType()) << " " << type.getRank();
  for (int64_t dim : type.getShape())
    os << " " << dim;
}

/// The `arg` record of argument `i` of entry point `func`.
static void printArg(llvm::raw_ostream &os, func::FuncOp func, unsigned i) {
  if (auto unit = func.getArgAttrOfType<FlatSymbolRefAttr>(
          i, ZestDialect::kUnitArgAttrName)) {
    os << ZEST_RECORD_ARG " " ZEST_ARG_UNIT " " << unit.getValue() << "\n";
    return;
  }
  if (auto state = func.getArgAttrOfType<DictionaryAttr>(
          i, ZestDialect::kOptimizerStateAttrName)) {
    os << ZEST_RECORD_ARG " " ZEST_ARG_STATE " "
       << state.getAs<FlatSymbolRefAttr>("unit").getValue() << " "
       << state.getAs<StringAttr>("name").getValue() << "\n";
    return;
  }
  if (auto unit = func.getArgAttrOfType<FlatSymbolRefAttr>(
          i, ZestDialect::kGradAccumAttrName)) {
    os << ZEST_RECORD_ARG " " ZEST_ARG_ACCUM " " << unit.getValue() << "\n";
    return;
  }
  if (auto unit = func.getArgAttrOfType<FlatSymbolRefAttr>(
          i, ZestDialect::kGradSumAttrName)) {
    os << ZEST_RECORD_ARG " " ZEST_ARG_GRAD_SUM " " << unit.getValue() << "\n";
    return;
  }
  auto type = cast<RankedTensorType>(func.getArgumentTypes()[i]);
  if (func.getArgAttr(i, ZestDialect::kHyperAttrName)) {
    os << ZEST_RECORD_ARG " " ZEST_ARG_HYPER " " << type.getNumElements()
       << "\n";
    return;
  }
  if (func.getArgAttr(i, ZestDialect::kRngAttrName)) {
    os << ZEST_RECORD_ARG " " ZEST_ARG_RNG "\n";
    return;
  }
  os << ZEST_RECORD_ARG " "
     << (func.getArgAttr(i, ZestDialect::kStageArgAttrName) ? ZEST_ARG_STAGE
                                                            : ZEST_ARG_DATA)
     << " ";
  printShape(os, type);
  os << "\n";
}

/// The `index_bound` record of data argument `i`, if it indexes a table.
static void printIndexBound(llvm::raw_ostream &os, func::FuncOp func,
                            unsigned i) {
  auto bound = func.getArgAttrOfType<DictionaryAttr>(
      i, ZestDialect::kIndexBoundAttrName);
  if (!bound)
    return;
  auto table = bound.getAs<StringAttr>("table");
  auto ignore = bound.getAs<IntegerAttr>("ignore");
  os << ZEST_RECORD_INDEX_BOUND " "
     << bound.getAs<IntegerAttr>("bound").getInt() << " "
     << (table ? table.getValue() : "-") << " ";
  if (ignore)
    os << ignore.getInt();
  else
    os << "-";
  os << "\n";
}

std::string mlir::zest::buildModelDescriptor(ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  SmallVector<UnitOp> units(module.getOps<UnitOp>());
  os << ZEST_DESCRIPTOR_HEADER "\n";
  DeviceMesh mesh = getModuleMesh(module);
  os << ZEST_RECORD_WORLD_SIZE " " << mesh.getWorldSize() << "\n";
  if (mesh.replicas > 1)
    os << ZEST_RECORD_MESH " " << mesh.replicas << " " << mesh.shards << "\n";
  if (mesh.expertGroup > 1)
    os << ZEST_RECORD_EXPERT_GROUPS " " << mesh.expertGroup << "\n";
  for (UnitOp unit : units) {
    os << ZEST_RECORD_UNIT " " << unit.getSymName() << " "
       << (unit.getExperts()  ? ZEST_UNIT_EXPERTS
           : unit.isSharded() ? ZEST_UNIT_SHARDED
                              : ZEST_UNIT_REPLICATED)
       << " " << getDTypeName(unit.getElementType()) << " "
       << unit.getNumElements() << " " << unit.getPaddedSize() << " "
       << unit.getShardSize() << " " << unit.getParams().size() << "\n";
    for (auto param : unit.getParams().getAsRange<ParamAttr>()) {
      os << ZEST_RECORD_PARAM " " << param.getName() << " "
         << getDTypeName(unit.getElementType()) << " " << param.getOffset()
         << " " << param.getValueType().getRank();
      for (int64_t dim : param.getValueType().getShape())
        os << " " << dim;
      os << "\n";
    }
  }
  for (auto func : module.getOps<func::FuncOp>()) {
    if (!isEntryPoint(func))
      continue;
    SmallVector<unsigned> results;
    for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
      if (!func.getResultAttr(i, ZestDialect::kUpdatedAttrName))
        results.push_back(i);
    os << ZEST_RECORD_FUNCTION " " << func.getSymName() << " "
       << func.getNumArguments() << " " << results.size() << "\n";
    if (auto optimizer =
            func->getAttrOfType<StringAttr>(ZestDialect::kOptimizerAttrName))
      os << ZEST_RECORD_OPTIMIZER " " << optimizer.getValue() << "\n";
    if (auto step = func->getAttrOfType<FlatSymbolRefAttr>(
            ZestDialect::kAccumulateForAttrName))
      os << ZEST_RECORD_ACCUMULATE_FOR " " << step.getValue() << "\n";
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
      printArg(os, func, i);
      // Offload: the argument lives in pinned host memory.
      if (func.getArgAttr(i, ZestDialect::kHostArgAttrName))
        os << ZEST_RECORD_HOST "\n";
      printIndexBound(os, func, i);
    }
    for (unsigned i : results) {
      if (auto unit = func.getResultAttrOfType<FlatSymbolRefAttr>(
              i, ZestDialect::kUnitGradAttrName)) {
        os << ZEST_RECORD_RESULT " " ZEST_RESULT_GRAD " " << unit.getValue()
           << "\n";
        continue;
      }
      os << ZEST_RECORD_RESULT " "
         << (func.getResultAttr(i, ZestDialect::kLossAttrName)
                 ? ZEST_RESULT_LOSS
             : func.getResultAttr(i, ZestDialect::kGradNormAttrName)
                 ? ZEST_RESULT_GRAD_NORM
                 : ZEST_RESULT_OUTPUT)
         << " ";
      printShape(os, cast<RankedTensorType>(func.getResultTypes()[i]));
      os << "\n";
    }
  }
  os << ZEST_RECORD_END "\n";
  return text;
}
