//===- SplitEntryBlock.cpp - A function's body behind a branch ------------===//
//
// Keeps the conversion of function signatures to the LLVM dialect linear in
// the size of the body. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/Passes.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"

namespace mlir::zest {
#define GEN_PASS_DEF_SPLITENTRYBLOCKPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;

namespace {
struct SplitEntryBlockPass
    : public zest::impl::SplitEntryBlockPassBase<SplitEntryBlockPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || func.getNumArguments() == 0)
      return;
    Block &entry = func.getBody().front();
    Block *body = entry.splitBlock(entry.begin());
    OpBuilder builder = OpBuilder::atBlockEnd(&entry);
    cf::BranchOp::create(builder, func.getLoc(), body);
  }
};
} // namespace
