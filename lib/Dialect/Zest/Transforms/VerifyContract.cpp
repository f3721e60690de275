//===- VerifyContract.cpp - Check the model-IR input contract -------------===//

#include "zest/Dialect/Zest/Transforms/ModelContract.h"
#include "zest/Dialect/Zest/Transforms/Passes.h"

namespace mlir::zest {
#define GEN_PASS_DEF_VERIFYCONTRACTPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

namespace {
struct VerifyContractPass
    : public zest::impl::VerifyContractPassBase<VerifyContractPass> {
  void runOnOperation() override {
    if (failed(ModelContract::analyze(getOperation())))
      return signalPassFailure();
    markAllAnalysesPreserved();
  }
};
} // namespace
