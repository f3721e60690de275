//===- ReservePool.cpp - Each entry point hands the pool its plan ---------===//
//
// zest-plan-memory places every buffer of a step at an offset of one arena;
// the step starts by handing that arena's size and the placement to the
// runtime's pool, which then puts each allocation where the plan did. See
// Passes.td.
//
//===----------------------------------------------------------------------===//

#include "zest/Conversion/Passes.h"
#include "zest/Conversion/RuntimeCalls.h"
#include "zest/Dialect/Zest/Transforms/MemoryPlan.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace mlir::zest {
#define GEN_PASS_DEF_RESERVEPOOLPASS
#include "zest/Conversion/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

namespace {

/// A private constant global of `func`'s placement: offset and bytes per
/// allocation, in order.
memref::GlobalOp createPlacementGlobal(func::FuncOp func,
                                       const MemoryPlan &plan) {
  SmallVector<int64_t> values;
  for (auto [offset, bytes] : plan.placement) {
    values.push_back(offset);
    values.push_back(bytes);
  }
  OpBuilder builder(func);
  auto type = MemRefType::get({int64_t(values.size())}, builder.getI64Type());
  auto data = DenseIntElementsAttr::get(
      RankedTensorType::get(type.getShape(), type.getElementType()),
      ArrayRef<int64_t>(values));
  auto global = memref::GlobalOp::create(
      builder, func.getLoc(),
      ("__zest_pool_placement_" + func.getSymName()).str(),
      builder.getStringAttr("private"), type, data, /*constant=*/true,
      /*alignment=*/builder.getI64IntegerAttr(8));
  SymbolTable(func->getParentOp()).insert(global);
  return global;
}

struct ReservePoolPass
    : public zest::impl::ReservePoolPassBase<ReservePoolPass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(verifyArenaAlignment(arenaAlignment, getOperation().getLoc())))
      return signalPassFailure();
    SmallVector<func::FuncOp> entries;
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal() && !func.isPrivate())
        entries.push_back(func);
    for (func::FuncOp func : entries) {
      std::optional<MemoryPlan> plan = planFunctionMemory(func, arenaAlignment);
      if (!plan || plan->placement.empty())
        continue;
      memref::GlobalOp global = createPlacementGlobal(func, *plan);
      OpBuilder builder = OpBuilder::atBlockBegin(&func.front());
      Location loc = func.getLoc();
      auto i64 = [&](int64_t value) -> Value {
        return arith::ConstantIntOp::create(builder, loc, builder.getI64Type(),
                                            value);
      };
      Value table = memref::GetGlobalOp::create(builder, loc, global.getType(),
                                                global.getSymName());
      Value bytes = i64(plan->arenaBytes);
      Value pointer = getElementPointer(builder, loc, table);
      Value count = i64(plan->placement.size());
      callRuntime(builder, loc, "zest_pool_reserve", {},
                  ValueRange{bytes, pointer, count});
    }
  }
};

} // namespace
