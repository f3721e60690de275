//===- FusedOpsToRuntime.h - Fused compute ops to kernels -------*- C++ -*-===//
//
// The patterns zest-matmul-to-blas adds for Zest's fused compute ops on
// memrefs, one file each.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_LIB_CONVERSION_LINALGTORUNTIME_FUSEDOPSTORUNTIME_H
#define ZEST_LIB_CONVERSION_LINALGTORUNTIME_FUSEDOPSTORUNTIME_H

#include "mlir/IR/PatternMatch.h"

namespace mlir::zest {

/// zest.attention and zest.attention_backward to the runtime's
/// zest_attention_forward / _backward (zest_cuda_* when `cuda`).
void populateAttentionToRuntimePatterns(RewritePatternSet &patterns, bool cuda);

/// zest.cross_entropy and zest.cross_entropy_backward to the runtime's
/// zest_cross_entropy_forward / _backward (zest_cuda_* when `cuda`).
void populateCrossEntropyToRuntimePatterns(RewritePatternSet &patterns,
                                           bool cuda);

/// zest.grouped_matmul and zest.grouped_matmul_weight_grad to the
/// runtime's zest_grouped_matmul / _weight_grad (zest_cuda_* when `cuda`).
void populateGroupedMatmulToRuntimePatterns(RewritePatternSet &patterns,
                                            bool cuda);

/// zest.expert_routing, zest.expert_dispatch and zest.expert_combine to
/// the runtime's blocking zest_expert_* exchanges.
void populateExpertExchangeToRuntimePatterns(RewritePatternSet &patterns);

} // namespace mlir::zest

#endif // ZEST_LIB_CONVERSION_LINALGTORUNTIME_FUSEDOPSTORUNTIME_H
