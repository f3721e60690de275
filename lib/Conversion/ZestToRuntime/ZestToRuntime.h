//===- ZestToRuntime.h - Shared pieces of convert-zest-to-runtime -*- C++ -*-=//
//
// The lowering of Zest ops to runtime calls, one file per op family; this
// header is what they share (internal to lib/Conversion/ZestToRuntime).
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_LIB_CONVERSION_ZESTTORUNTIME_ZESTTORUNTIME_H
#define ZEST_LIB_CONVERSION_ZESTTORUNTIME_ZESTTORUNTIME_H

#include "zest/Dialect/Zest/IR/ZestOps.h"
#include "zest/Dialect/Zest/Transforms/ElementwiseFusion.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/PatternMatch.h"

#include "zest_runtime.h"

namespace mlir::zest::zest_to_runtime {

/// What a collective sends and receives, independent of its sync/async form.
struct CollectiveInfo {
  /// "all_gather", "reduce_scatter" or "all_reduce": the runtime's
  /// zest_<kind>_start.
  StringRef kind;
  Value input;
  RankedTensorType resultType;
  StringRef unit;
  /// The runtime's `count`: per rank for gathers and reduce-scatters.
  int64_t count;
  std::optional<Reduction> reduction;
  bool gathers;
  /// The ranks it runs over, and how many they are.
  zest_group_t group;
  int64_t groupSize;
  /// Mixed precision: the type the f32 buffers are rounded to and travel
  /// as (null: theirs).
  Type wireType = {};
};

/// What collective `op` (sync, or the start of an async pair) moves, over
/// which ranks, and as which type: gathers travel as the layout's
/// gather_type, gradient reductions as its reduce_type (mixed precision).
CollectiveInfo getInfo(Operation *op);

/// Starts the collective: returns the request handle and the result buffer
/// (of the wire type under mixed precision).
FailureOr<std::pair<Value, Value>> startCollective(PatternRewriter &rewriter,
                                                   Operation *op,
                                                   const CollectiveInfo &info);

/// Waits for `request` and returns the result buffer as a tensor of
/// `resultType` (widened from the wire type under mixed precision).
Value finishCollective(PatternRewriter &rewriter, Location loc, Value request,
                       Value result, RankedTensorType resultType);

/// This rank's index in `group`, as an index.
Value getGroupRank(OpBuilder &builder, Location loc, zest_group_t group);

/// The input of `op` if it is a convertElements widening (extf), else null.
Value getWidenedInput(Operation *op);

/// zest.unpack of gathered buckets, before the gathers are lowered.
void lowerGatheredUnpacks(ModuleOp module);

/// The patterns of each op family.
void populateCollectivePatterns(RewritePatternSet &patterns);
void populateViewPatterns(RewritePatternSet &patterns);
void populateGradNormPatterns(RewritePatternSet &patterns);
void populateWideningPatterns(RewritePatternSet &patterns);
/// Offload's copies between device and pinned host memory (HostCopies.cpp).
void populateHostCopyPatterns(RewritePatternSet &patterns);

} // namespace mlir::zest::zest_to_runtime

#endif // ZEST_LIB_CONVERSION_ZESTTORUNTIME_ZESTTORUNTIME_H
