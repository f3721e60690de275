//===- PrepareEntryPoints.cpp - Entry point calling convention ------------===//

#include "zest/Conversion/Passes.h"

namespace mlir::zest {
#define GEN_PASS_DEF_PREPAREENTRYPOINTSPASS
#include "zest/Conversion/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;

namespace {
struct PrepareEntryPointsPass
    : public zest::impl::PrepareEntryPointsPassBase<PrepareEntryPointsPass> {
  void runOnOperation() override {
    Builder builder(&getContext());
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal() || !func.isPublic())
        continue;
      func->setAttr("llvm.emit_c_interface", builder.getUnitAttr());
      for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
        if (isa<TensorType>(func.getArgumentTypes()[i]))
          func.setArgAttr(i, "bufferization.writable",
                          builder.getBoolAttr(false));
    }
  }
};
} // namespace
