//===- PrepareEntryPoints.cpp - Entry point calling convention ------------===//

#include "zest/Conversion/ModelDescriptor.h"
#include "zest/Conversion/Passes.h"
#include "zest/Dialect/Zest/IR/ZestOps.h"

#include "mlir/IR/Builders.h"

namespace mlir::zest {
#define GEN_PASS_DEF_PREPAREENTRYPOINTSPASS
#include "zest/Conversion/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

/// Scalars cross the host boundary as 0-d tensors (one memref descriptor
/// each), so a `f32 {zest.loss}` result needs no special calling convention.
static void scalarsToTensors(func::FuncOp func) {
  OpBuilder builder(func.getContext());
  Block &entry = func.front();
  SmallVector<Type> argTypes(func.getArgumentTypes());
  builder.setInsertionPointToStart(&entry);
  for (BlockArgument arg : entry.getArguments()) {
    Type type = arg.getType();
    if (!type.isIntOrIndexOrFloat())
      continue;
    auto tensorType = RankedTensorType::get({}, type);
    arg.setType(tensorType);
    argTypes[arg.getArgNumber()] = tensorType;
    auto extract =
        tensor::ExtractOp::create(builder, arg.getLoc(), arg, ValueRange{});
    arg.replaceAllUsesExcept(extract.getResult(), extract.getOperation());
  }
  SmallVector<Type> resultTypes(func.getResultTypes());
  for (Type &type : resultTypes)
    if (type.isIntOrIndexOrFloat())
      type = RankedTensorType::get({}, type);
  func.walk([&](func::ReturnOp ret) {
    builder.setInsertionPoint(ret);
    for (OpOperand &operand : ret->getOpOperands()) {
      Value value = operand.get();
      if (value.getType().isIntOrIndexOrFloat())
        operand.set(tensor::FromElementsOp::create(
            builder, ret.getLoc(), RankedTensorType::get({}, value.getType()),
            value));
    }
  });
  func.setType(FunctionType::get(func.getContext(), argTypes, resultTypes));
}

namespace {
struct PrepareEntryPointsPass
    : public zest::impl::PrepareEntryPointsPassBase<PrepareEntryPointsPass> {
  void runOnOperation() override {
    Builder builder(&getContext());
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (!isEntryPoint(func))
        continue;
      scalarsToTensors(func);
      func->setAttr("llvm.emit_c_interface", builder.getUnitAttr());
      // Training steps with an optimizer update their unit shards, optimizer
      // state and gradient accumulators in place; everything else (data,
      // unit shards of forward-only functions) is the host's, read only.
      bool updates = func->hasAttr(ZestDialect::kOptimizerAttrName);
      for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
        // Gradient sums (no-sync) are also summed into by the accumulate
        // entry points, which have no optimizer; offload's stages receive
        // copies.
        bool inPlace =
            func.getArgAttr(i, ZestDialect::kGradSumAttrName) ||
            func.getArgAttr(i, ZestDialect::kStageArgAttrName) ||
            (updates &&
             (func.getArgAttr(i, ZestDialect::kUnitArgAttrName) ||
              func.getArgAttr(i, ZestDialect::kOptimizerStateAttrName) ||
              func.getArgAttr(i, ZestDialect::kGradAccumAttrName)));
        func.setArgAttr(i, "bufferization.writable",
                        builder.getBoolAttr(inPlace));
      }
    }
  }
};
} // namespace
