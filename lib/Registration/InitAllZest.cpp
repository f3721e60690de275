//===- InitAllZest.cpp - Register Zest with a tool ------------------------===//

#include "zest/InitAllZest.h"
#include "zest/Conversion/Passes.h"
#include "zest/Dialect/Zest/IR/ZestDialect.h"
#include "zest/Dialect/Zest/Transforms/BufferizableOpInterfaceImpl.h"
#include "zest/Dialect/Zest/Transforms/Passes.h"

#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"

void mlir::zest::registerAllZestDialects(DialectRegistry &registry) {
  registry.insert<ZestDialect>();
  registerBufferizableOpInterfaceExternalModels(registry);
  // Upstream dialects, their interface models and extensions, so zest-opt
  // can run any upstream pass on Zest programs like mlir-opt does.
  registerAllDialects(registry);
  registerAllExtensions(registry);
}

void mlir::zest::registerAllZestPasses() {
  registerZestPasses();
  registerZestConversionPasses();
  registerZestPipelines();
  registerAllPasses();
}
