//===- AttentionLayout.h - Where an attention operand's rows lie -*- C++
//-*-===//
//
// zest_attention_forward / _backward take each 4-D operand with its own
// strides between batches, heads and rows (zest_runtime.h's
// ZEST_ATTENTION_STRIDES): q, k and v split from one projection's rows are
// read where they lie and an output is written where its reader wants it,
// with no transposed copy. The CPU kernels (kernels/Attention.cpp) and the
// CUDA ones (cuda-blas/, also built for the emulated device) address rows
// through these types.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_COMMON_ATTENTIONLAYOUT_H
#define ZEST_RUNTIME_COMMON_ATTENTIONLAYOUT_H

#include <cstdint>

#if defined(__CUDACC__)
#define ZEST_HOST_DEVICE __host__ __device__
#else
#define ZEST_HOST_DEVICE
#endif

namespace zest::rt {

/// The strides, in elements, between a 4-D operand's batches, heads and
/// rows; a row's elements are contiguous.
struct RowLayout {
  int64_t batch, head, row;

  /// The offset of row `i` of head `head`, counted over the batches
  /// (b * heads + h with `heads` heads a batch).
  ZEST_HOST_DEVICE int64_t at(int64_t heads, int64_t head, int64_t i) const {
    return head / heads * batch + head % heads * this->head + i * row;
  }
};

/// Where each 4-D operand of one call lies, in the C API's order (the
/// forward's leave the gradients' zero).
struct AttentionLayouts {
  RowLayout q, k, v, out, dout, dq, dk, dv;
};

} // namespace zest::rt

#endif // ZEST_RUNTIME_COMMON_ATTENTIONLAYOUT_H
