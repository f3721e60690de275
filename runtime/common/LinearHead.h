//===- LinearHead.h - The head of the fused linear cross-entropy -*- C++
//-*-===//
//
// What zest_linear_cross_entropy (CPU) and zest_cuda_linear_cross_entropy
// (GPU, emulated device) ask of the head around the loss, chunk by chunk of
// rows: its logits before the loss, its two gradients after it. Each
// runtime supplies its own products; the arithmetic of the chunks is here,
// once.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_COMMON_LINEARHEAD_H
#define ZEST_RUNTIME_COMMON_LINEARHEAD_H

#include "zest_runtime.h"

#include <cstdint>

namespace zest::rt {

/// The head in storage C (float, or the bits of bf16 / f16): its input x
/// [rows, k], its weight W ([classes, k] when wTransposed, else [k,
/// classes]) and its f32 gradients (dx, dw null when not wanted), with the
/// runtime's products for C: `forward` rounds the logits to C (a
/// zest_linear_forward*), `gemm` accumulates the gradients in f32 (a
/// zest_sgemm or zest_widening_gemm*, or their CUDA twins).
template <typename C> struct LinearHead {
  using Forward = void (*)(ZEST_linear_forward_PARAMS(C));
  using Gemm = void (*)(ZEST_widening_gemm_PARAMS(C));
  Forward forward;
  Gemm gemm;
  int64_t classes, k;
  const C *x;
  int64_t ldx;
  const C *w;
  int64_t ldw;
  int32_t wTransposed;
  float *dx;
  int64_t lddx;
  float *dw;
  int64_t lddw;
  int32_t dwTransposed;

  /// logits[n, classes] (row stride ld) = x[begin:begin+n] op(W).
  void logitsOf(int64_t begin, int64_t n, C *logits, int64_t ld) const {
    forward(n, classes, k, x + begin * ldx, ldx, w, ldw, wTransposed, nullptr,
            ZEST_ACTIVATION_NONE, nullptr, 0, logits, ld);
  }

  /// The chunk's share of both gradients from its logits' gradient g: its
  /// rows of dx, and dw written by the first chunk, added to by the others.
  void addGradients(int64_t begin, int64_t n, const C *g, int64_t ld) const {
    const C *xc = x + begin * ldx;
    if (dx)
      gemm(0, !wTransposed, n, k, classes, g, ld, w, ldw, dx + begin * lddx,
           lddx, 0);
    if (dw && dwTransposed)
      gemm(1, 0, classes, k, n, g, ld, xc, ldx, dw, lddw, begin > 0);
    else if (dw)
      gemm(1, 0, k, classes, n, xc, ldx, g, ld, dw, lddw, begin > 0);
  }
};

} // namespace zest::rt

/// Inside a function with ZEST_linear_cross_entropy_PARAMS(C): its head,
/// computed with the products FORWARD and GEMM.
#define ZEST_LINEAR_HEAD(C, FORWARD, GEMM)                                     \
  ::zest::rt::LinearHead<C> {                                                  \
    FORWARD, GEMM, classes, k, x, ldx, w, ldw, w_transposed, dx, lddx, dw,     \
        lddw, dw_transposed                                                    \
  }

#endif // ZEST_RUNTIME_COMMON_LINEARHEAD_H
