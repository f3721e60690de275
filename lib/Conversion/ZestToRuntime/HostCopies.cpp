//===- HostCopies.cpp - Offload copies to runtime calls -------------------===//
//
// zest.copy_to_device becomes a device buffer filled by
// zest_copy_to_device_async; a zest.copy_to_host_start / zest.copy_wait pair
// becomes zest_copy_to_host_start into the stage's buffer where the start
// is and zest_copy_wait on that buffer where the wait is (docs/Runtime.md,
// offload).
//
//===----------------------------------------------------------------------===//

#include "ZestToRuntime.h"
#include "zest/Conversion/RuntimeCalls.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::zest;
using namespace mlir::zest::zest_to_runtime;

namespace {

/// `tensor`'s buffer (identity layout), and its size in bytes as an i64.
std::pair<Value, Value> getBufferAndBytes(OpBuilder &builder, Location loc,
                                          Value tensor, bool readOnly) {
  auto type = cast<RankedTensorType>(tensor.getType());
  Value buffer = bufferization::ToBufferOp::create(
      builder, loc, MemRefType::get(type.getShape(), type.getElementType()),
      tensor, readOnly);
  int64_t bytes = type.getNumElements() * type.getElementTypeBitWidth() / 8;
  return {buffer, arith::ConstantIntOp::create(builder, loc, bytes, 64)};
}

struct LowerCopyToDevice : public OpRewritePattern<CopyToDeviceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CopyToDeviceOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto [host, bytes] =
        getBufferAndBytes(rewriter, loc, op.getSource(), /*readOnly=*/true);
    Value device = memref::AllocOp::create(rewriter, loc,
                                           cast<MemRefType>(host.getType()));
    callRuntime(rewriter, loc, "zest_copy_to_device_async", {},
                {getElementPointer(rewriter, loc, device),
                 getElementPointer(rewriter, loc, host), bytes});
    rewriter.replaceOpWithNewOp<bufferization::ToTensorOp>(
        op, op.getType(), device, /*restrict=*/true, /*writable=*/true);
    return success();
  }
};

/// The start call where the start op is, the wait where the wait op is.
struct LowerCopyToHost : public OpRewritePattern<CopyWaitOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CopyWaitOp wait,
                                PatternRewriter &rewriter) const override {
    auto start = wait.getFuture().getDefiningOp<CopyToHostStartOp>();
    if (!start)
      return rewriter.notifyMatchFailure(wait, "future is not a copy");
    Location loc = start.getLoc();
    rewriter.setInsertionPoint(start);
    auto [device, bytes] =
        getBufferAndBytes(rewriter, loc, start.getSource(), /*readOnly=*/true);
    Value stage =
        getBufferAndBytes(rewriter, loc, start.getStage(), /*readOnly=*/false)
            .first;
    // The wait names the stage, not the copy: the device buffer is not
    // kept alive until the wait (the copy is ordered before any later reuse).
    callRuntime(rewriter, loc, "zest_copy_to_host_start", {},
                {getElementPointer(rewriter, loc, stage),
                 getElementPointer(rewriter, loc, device), bytes});
    rewriter.setInsertionPoint(wait);
    callRuntime(rewriter, wait.getLoc(), "zest_copy_wait", {},
                getElementPointer(rewriter, wait.getLoc(), stage));
    rewriter.replaceOpWithNewOp<bufferization::ToTensorOp>(
        wait, wait.getType(), stage, /*restrict=*/true, /*writable=*/true);
    rewriter.eraseOp(start);
    return success();
  }
};

} // namespace

void zest_to_runtime::populateHostCopyPatterns(RewritePatternSet &patterns) {
  patterns.add<LowerCopyToDevice, LowerCopyToHost>(patterns.getContext());
}
