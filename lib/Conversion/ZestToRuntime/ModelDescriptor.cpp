//===- ModelDescriptor.cpp - The text record of a sharded model -----------===//
//
// One record per line, fields separated by single spaces (names never hold
// spaces: they are FQNs and symbols):
//
//   zest-model 1
//   world_size <W>
//   mesh <replicas> <shards>                (hybrid sharding only)
//   unit <name> <sharded|replicated> <dtype> <numel> <padded> <shard> <n>
//   param <fqn> <dtype> <offset> <rank> <dim>...        (n per unit)
//   function <name> <num_args> <num_results>
//   optimizer sgd|adamw                               (training steps only)
//   accumulate_for <name>          (no-sync: accumulates for that step)
//   arg unit <unit> | arg data <dtype> <rank> <dim>...
//   arg state <unit> <name> | arg accum <unit> | arg hyper <count>
//   arg grad_sum <unit> | arg rng
//   result loss|output <dtype> <rank> <dim>... | result grad <unit>
//
// Results updated in place (`zest.updated`) are not results of the compiled
// entry point and are not listed.
//   end
//
//===----------------------------------------------------------------------===//

#include "zest/Conversion/ModelDescriptor.h"
#include "zest/Dialect/Zest/IR/ZestOps.h"
#include "zest/Dialect/Zest/Transforms/CostModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::zest;

static void printShape(llvm::raw_ostream &os, RankedTensorType type) {
  os << getDTypeName(type.getElementType()) << " " << type.getRank();
  for (int64_t dim : type.getShape())
    os << " " << dim;
}

std::string mlir::zest::buildModelDescriptor(ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  SmallVector<UnitOp> units(module.getOps<UnitOp>());
  os << "zest-model 1\n";
  DeviceMesh mesh = getModuleMesh(module);
  os << "world_size " << mesh.getWorldSize() << "\n";
  if (mesh.replicas > 1)
    os << "mesh " << mesh.replicas << " " << mesh.shards << "\n";
  for (UnitOp unit : units) {
    os << "unit " << unit.getSymName() << " "
       << stringifyUnitKind(unit.getKind()) << " "
       << getDTypeName(unit.getElementType()) << " " << unit.getNumElements()
       << " " << unit.getPaddedSize() << " " << unit.getShardSize() << " "
       << unit.getParams().size() << "\n";
    for (auto param : unit.getParams().getAsRange<ParamAttr>()) {
      os << "param " << param.getName() << " "
         << getDTypeName(unit.getElementType()) << " " << param.getOffset()
         << " " << param.getValueType().getRank();
      for (int64_t dim : param.getValueType().getShape())
        os << " " << dim;
      os << "\n";
    }
  }
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal() || !func.isPublic())
      continue;
    SmallVector<unsigned> results;
    for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
      if (!func.getResultAttr(i, ZestDialect::kUpdatedAttrName))
        results.push_back(i);
    os << "function " << func.getSymName() << " " << func.getNumArguments()
       << " " << results.size() << "\n";
    if (auto optimizer =
            func->getAttrOfType<StringAttr>(ZestDialect::kOptimizerAttrName))
      os << "optimizer " << optimizer.getValue() << "\n";
    if (auto step = func->getAttrOfType<FlatSymbolRefAttr>(
            ZestDialect::kAccumulateForAttrName))
      os << "accumulate_for " << step.getValue() << "\n";
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
      if (auto unit = func.getArgAttrOfType<FlatSymbolRefAttr>(
              i, ZestDialect::kUnitArgAttrName)) {
        os << "arg unit " << unit.getValue() << "\n";
        continue;
      }
      if (auto state = func.getArgAttrOfType<DictionaryAttr>(
              i, ZestDialect::kOptimizerStateAttrName)) {
        os << "arg state " << state.getAs<FlatSymbolRefAttr>("unit").getValue()
           << " " << state.getAs<StringAttr>("name").getValue() << "\n";
        continue;
      }
      if (auto unit = func.getArgAttrOfType<FlatSymbolRefAttr>(
              i, ZestDialect::kGradAccumAttrName)) {
        os << "arg accum " << unit.getValue() << "\n";
        continue;
      }
      if (auto unit = func.getArgAttrOfType<FlatSymbolRefAttr>(
              i, ZestDialect::kGradSumAttrName)) {
        os << "arg grad_sum " << unit.getValue() << "\n";
        continue;
      }
      if (func.getArgAttr(i, ZestDialect::kHyperAttrName)) {
        os << "arg hyper "
           << cast<RankedTensorType>(func.getArgumentTypes()[i])
                  .getNumElements()
           << "\n";
        continue;
      }
      if (func.getArgAttr(i, ZestDialect::kRngAttrName)) {
        os << "arg rng\n";
        continue;
      }
      os << "arg data ";
      printShape(os, cast<RankedTensorType>(func.getArgumentTypes()[i]));
      os << "\n";
    }
    for (unsigned i : results) {
      if (auto unit = func.getResultAttrOfType<FlatSymbolRefAttr>(
              i, ZestDialect::kUnitGradAttrName)) {
        os << "result grad " << unit.getValue() << "\n";
        continue;
      }
      os << (func.getResultAttr(i, ZestDialect::kLossAttrName)
                 ? "result loss "
                 : "result output ");
      printShape(os, cast<RankedTensorType>(func.getResultTypes()[i]));
      os << "\n";
    }
  }
  os << "end\n";
  return text;
}
