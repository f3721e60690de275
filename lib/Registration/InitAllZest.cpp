//===- InitAllZest.cpp - Register Zest with a tool ------------------------===//

#include "zest/InitAllZest.h"
#include "zest/Conversion/Passes.h"
#include "zest/Dialect/Zest/IR/ZestDialect.h"
#include "zest/Dialect/Zest/Transforms/BufferizableOpInterfaceImpl.h"
#include "zest/Dialect/Zest/Transforms/Passes.h"
#include "zest/Pipelines/Pipelines.h"

#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"

void mlir::zest::registerAllZestDialects(DialectRegistry &registry) {
  registry.insert<ZestDialect>();
  registerBufferizableOpInterfaceExternalModels(registry);
  // Upstream dialects, their interface models and extensions, so zest-opt
  // can run any upstream pass on Zest programs like mlir-opt does.
  registerAllDialects(registry);
  registerAllExtensions(registry);
  // --target=cuda: serializing gpu.modules for NVVM targets (which
  // translates them to LLVM IR first), and launching the serialized kernels
  // from LLVM IR.
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  gpu::registerOffloadingLLVMTranslationInterfaceExternalModels(registry);
}

void mlir::zest::registerAllZestPasses() {
  registerZestPasses();
  registerZestConversionPasses();
  registerZestPipelines();
  registerAllPasses();
}
