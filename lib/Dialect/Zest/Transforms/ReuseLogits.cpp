//===- ReuseLogits.cpp - The logits' gradient over the logits -------------===//
//
// The cross-entropy's backward is the logits' last reader and reads each
// logit before writing its gradient: its fresh destination becomes the
// logits, so bufferization can write the gradient in their place. See
// Passes.td.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/IR/ZestOps.h"
#include "zest/Dialect/Zest/Transforms/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace mlir::zest {
#define GEN_PASS_DEF_REUSELOGITSPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

namespace {

struct ReuseLogitsPass
    : public zest::impl::ReuseLogitsPassBase<ReuseLogitsPass> {
  void runOnOperation() override {
    getOperation().walk([](CrossEntropyBackwardOp backward) {
      if (!backward.hasPureTensorSemantics())
        return;
      OpOperand &init = backward.getGradLogitsMutable();
      Value logits = backward.getLogits();
      if (init.get().getDefiningOp<tensor::EmptyOp>() &&
          init.get().getType() == logits.getType())
        init.set(logits);
    });
  }
};

} // namespace
