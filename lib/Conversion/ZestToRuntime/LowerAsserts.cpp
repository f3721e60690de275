//===- LowerAsserts.cpp - Failed checks of the step as runtime errors -----===//
//
// torch-mlir guards index inputs with cf.assert (an embedding's ids, a
// gather's indices); lowered by upstream, a failed one prints its message
// and calls abort(), so each rank dies of SIGABRT with Open MPI's stack
// dump. Each host cf.assert becomes a call to zest_check_failed, which says
// what failed, on which rank and in which data, and stops every rank with
// status 1. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "zest/Conversion/Passes.h"
#include "zest/Conversion/RuntimeCalls.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::zest {
#define GEN_PASS_DEF_LOWERASSERTSPASS
#include "zest/Conversion/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;

namespace {

/// `assertOp` as `if (!condition) zest_check_failed(message)`. Each
/// distinct message is one string global (`messages`: text to symbol):
/// torch-mlir repeats the same few at every embedding and gather.
void lowerAssert(cf::AssertOp assertOp,
                 llvm::StringMap<std::string> &messages) {
  OpBuilder builder(assertOp);
  Location loc = assertOp.getLoc();
  Value isTrue =
      arith::ConstantOp::create(builder, loc, builder.getBoolAttr(true));
  Value failed = arith::XOrIOp::create(builder, loc, assertOp.getArg(), isTrue);
  auto branch = scf::IfOp::create(builder, loc, failed);
  builder.setInsertionPointToStart(&branch.getThenRegion().front());
  auto [symbol, created] = messages.try_emplace(
      assertOp.getMsg(), "zest.check." + std::to_string(messages.size()));
  Value message;
  if (created) {
    std::string text = assertOp.getMsg().str();
    text.push_back('\0');
    message = LLVM::createGlobalString(loc, builder, symbol->second, text,
                                       LLVM::Linkage::Internal);
  } else
    message = LLVM::AddressOfOp::create(
        builder, loc, LLVM::LLVMPointerType::get(builder.getContext()),
        symbol->second);
  zest::callRuntime(builder, loc, "zest_check_failed", {}, message);
  assertOp.erase();
}

struct LowerAssertsPass
    : public zest::impl::LowerAssertsPassBase<LowerAssertsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Kernels compiled for a GPU keep theirs: device code cannot call the
    // host's runtime.
    SmallVector<cf::AssertOp> asserts;
    module.walk([&](cf::AssertOp op) {
      if (!op->getParentOfType<gpu::GPUModuleOp>() &&
          !op->getParentOfType<gpu::LaunchOp>())
        asserts.push_back(op);
    });
    llvm::StringMap<std::string> messages;
    for (cf::AssertOp op : asserts)
      lowerAssert(op, messages);
  }
};

} // namespace
