//===- VerifyLowering.cpp - Only translatable IR leaves the lowering ------===//
//
// A model can use an op the lowering does not handle, and bufferization can
// fail to update a parameter in place; both would otherwise surface as a
// translation error far from their cause, or as silently stale training.
//
//===----------------------------------------------------------------------===//

#include "zest/Conversion/ModelDescriptor.h"
#include "zest/Conversion/Passes.h"
#include "zest/Dialect/Zest/IR/ZestOps.h"

namespace mlir::zest {
#define GEN_PASS_DEF_VERIFYLOWERINGPASS
#include "zest/Conversion/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

/// Names the first op not in the LLVM dialect where the model wrote it.
static LogicalResult checkOnlyLLVMLeft(ModuleOp module) {
  WalkResult leftover = module.walk([](Operation *op) {
    if (isa<ModuleOp>(op) || isa<LLVM::LLVMDialect>(op->getDialect()))
      return WalkResult::advance();
    if (isa<UnrealizedConversionCastOp>(op))
      return WalkResult::advance(); // reported through its operand's producer
    // --target=cuda: serialized kernels and their launches, which the GPU
    // dialect's translation turns into LLVM IR.
    if (isa<gpu::BinaryOp, gpu::LaunchFuncOp>(op))
      return WalkResult::skip();
    op->emitError() << "zestc cannot lower '" << op->getName()
                    << "' to machine code: the operation is not supported by "
                    << "the lowering pipeline (zestc --print-pipeline)";
    return WalkResult::interrupt();
  });
  return failure(leftover.wasInterrupted());
}

/// A shard, optimizer state or accumulator that bufferization could not
/// update in place comes back as an extra result the host does not expect:
/// refuse rather than silently train on stale values.
static LogicalResult checkCInterfaces(ModuleOp module) {
  FailureOr<SmallVector<EntryPointRecord>> entries =
      getEntryPointRecords(module);
  if (failed(entries))
    return failure();
  for (const EntryPointRecord &entry : *entries) {
    auto cInterface =
        module.lookupSymbol<LLVM::LLVMFuncOp>("_mlir_ciface_" + entry.name);
    if (cInterface && cInterface.getNumArguments() != entry.cInterfaceArgs)
      return emitError(cInterface.getLoc())
             << "entry point @" << entry.name << " could not update its "
             << "parameters and optimizer state in place (internal error: "
             << "please report it with the model)";
  }
  return success();
}

namespace {
struct VerifyLoweringPass
    : public zest::impl::VerifyLoweringPassBase<VerifyLoweringPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(checkOnlyLLVMLeft(module)) || failed(checkCInterfaces(module)))
      signalPassFailure();
  }
};
} // namespace
