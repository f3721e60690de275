//===- AttentionToRuntime.h - Fused attention to kernels --------*- C++ -*-===//

#ifndef ZEST_LIB_CONVERSION_LINALGTORUNTIME_ATTENTIONTORUNTIME_H
#define ZEST_LIB_CONVERSION_LINALGTORUNTIME_ATTENTIONTORUNTIME_H

#include "mlir/IR/PatternMatch.h"

namespace mlir::zest {

/// zest.attention and zest.attention_backward on memrefs to the runtime's
/// zest_attention_forward / _backward (zest_cuda_* when `cuda`).
void populateAttentionToRuntimePatterns(RewritePatternSet &patterns, bool cuda);

} // namespace mlir::zest

#endif // ZEST_LIB_CONVERSION_LINALGTORUNTIME_ATTENTIONTORUNTIME_H
