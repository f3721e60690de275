//===- DropUpdatedResults.cpp - In-place updates leave the signature ------===//
//
// After bufferization, a training step's updated shards, optimizer state and
// gradient accumulators (results marked `zest.updated = <arg>`) are returned
// as their argument buffers. Upstream's drop-equivalent-buffer-results skips
// public functions, which entry points are; this pass drops exactly the marked
// results that are their argument (modulo memref.cast) and leaves any other
// so that the driver's signature check reports it.
//
//===----------------------------------------------------------------------===//

#include "zest/Conversion/Passes.h"
#include "zest/Dialect/Zest/IR/ZestOps.h"

#include "llvm/ADT/BitVector.h"

namespace mlir::zest {
#define GEN_PASS_DEF_DROPUPDATEDRESULTSPASS
#include "zest/Conversion/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

namespace {
struct DropUpdatedResultsPass
    : public zest::impl::DropUpdatedResultsPassBase<DropUpdatedResultsPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal() || func.getBlocks().size() != 1)
        continue;
      auto ret = cast<func::ReturnOp>(func.front().getTerminator());
      llvm::BitVector drop(func.getNumResults());
      for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
        auto arg = func.getResultAttrOfType<IntegerAttr>(
            i, ZestDialect::kUpdatedAttrName);
        if (!arg || arg.getInt() >= func.getNumArguments())
          continue;
        Value value = ret.getOperand(i);
        while (auto cast = value.getDefiningOp<memref::CastOp>())
          value = cast.getSource();
        if (value == func.getArgument(arg.getInt()))
          drop.set(i);
      }
      ret->eraseOperands(drop);
      if (failed(func.eraseResults(drop)))
        return signalPassFailure();
    }
  }
};
} // namespace
