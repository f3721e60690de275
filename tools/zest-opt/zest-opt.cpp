//===- zest-opt.cpp - Zest optimizer driver -------------------------------===//
//
// mlir-opt with the Zest dialect and passes: runs any Zest or upstream pass
// on model IR.
//
//===----------------------------------------------------------------------===//

#include "zest/InitAllZest.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::zest::registerAllZestPasses();
  mlir::DialectRegistry registry;
  mlir::zest::registerAllZestDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Zest optimizer driver\n", registry));
}
