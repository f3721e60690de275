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

#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::zest {
#define GEN_PASS_DEF_LOWERASSERTSPASS
#include "zest/Conversion/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;

namespace {

constexpr StringLiteral kCheckFailed = "zest_check_failed";

/// `zest_check_failed(const char *message)`, declared once.
void declareCheckFailed(ModuleOp module) {
  if (module.lookupSymbol(kCheckFailed))
    return;
  OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
  auto type = builder.getFunctionType(
      {LLVM::LLVMPointerType::get(module.getContext())}, {});
  auto declaration =
      func::FuncOp::create(builder, module.getLoc(), kCheckFailed, type);
  declaration.setPrivate();
}

/// `assertOp` as `if (!condition) zest_check_failed(message)`; the message
/// is a string global named after its position (one per assert).
void lowerAssert(cf::AssertOp assertOp, unsigned index) {
  OpBuilder builder(assertOp);
  Location loc = assertOp.getLoc();
  Value isTrue =
      arith::ConstantOp::create(builder, loc, builder.getBoolAttr(true));
  Value failed = arith::XOrIOp::create(builder, loc, assertOp.getArg(), isTrue);
  auto branch = scf::IfOp::create(builder, loc, failed);
  builder.setInsertionPointToStart(&branch.getThenRegion().front());
  std::string text = assertOp.getMsg().str();
  text.push_back('\0');
  Value message = LLVM::createGlobalString(
      loc, builder, "zest.check." + std::to_string(index), text,
      LLVM::Linkage::Internal);
  func::CallOp::create(builder, loc, kCheckFailed, TypeRange{},
                       ValueRange{message});
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
    if (asserts.empty())
      return;
    declareCheckFailed(module);
    for (auto [index, op] : llvm::enumerate(asserts))
      lowerAssert(op, unsigned(index));
  }
};

} // namespace
