//===- FinalizeLLVM.cpp - Last touches before translation to LLVM IR ------===//
//
// What the lowering learned on functions and buffers, moved to where LLVM
// sees it; and what only the compiler needed, dropped.
//
//===----------------------------------------------------------------------===//

#include "zest/Conversion/Passes.h"
#include "zest/Dialect/Zest/IR/ZestOps.h"

namespace mlir::zest {
#define GEN_PASS_DEF_FINALIZELLVMPASS
#include "zest/Conversion/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

/// Kernels whose buffers never overlap: marks the pointers LLVM accesses
/// them through (convert-func-to-llvm does not carry `llvm.noalias` over).
static void markNoAliasPointers(LLVM::LLVMFuncOp func) {
  func->removeAttr(ZestDialect::kKernelAttrName);
  func->removeAttr(ZestDialect::kHostKernelAttrName);
  auto positions = func->getAttrOfType<DenseI64ArrayAttr>(
      ZestDialect::kNoAliasPointersAttrName);
  if (!positions)
    return;
  for (int64_t position : positions.asArrayRef())
    func.setArgAttr(position, LLVM::LLVMDialect::getNoAliasAttrName(),
                    UnitAttr::get(func.getContext()));
  func->removeAttr(ZestDialect::kNoAliasPointersAttrName);
}

/// Where an entry point's buffers live (offload) matters only until the
/// kernels are placed; LLVM has no such parameter attribute.
static void dropHostArgAttrs(LLVM::LLVMFuncOp func) {
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    func.removeArgAttr(i, ZestDialect::kHostArgAttrName);
}

namespace {
struct FinalizeLLVMPass
    : public zest::impl::FinalizeLLVMPassBase<FinalizeLLVMPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    module.walk(markNoAliasPointers);
    module.walk(dropHostArgAttrs);
    // Units are compile-time metadata; the descriptor carries them on.
    for (Operation &op : llvm::make_early_inc_range(module.getOps()))
      if (isa<UnitOp, BucketOp>(op))
        op.erase();
  }
};
} // namespace
