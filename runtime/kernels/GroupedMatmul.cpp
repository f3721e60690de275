//===- GroupedMatmul.cpp - Grouped products on the CPU --------------------===//
//
// zest_grouped_matmul and its weights' gradient (zest_runtime.h): a
// mixture-of-experts layer's rows come sorted by expert, and each expert's
// rows are one product on the runtime's sgemm; the group bounds are read
// from the offsets at run time. 16-bit storage is widened to f32 per group
// (HalfMatrix.h's scratch), multiplied and rounded once.
//
//===----------------------------------------------------------------------===//

#include "HalfMatrix.h"
#include "zest_runtime.h"

#include <algorithm>
#include <cstring>

using namespace zest::kernels;

namespace {

/// The shape and grouping both kernels share.
struct Groups {
  int64_t rows, n, k, groups;
  const void *offsets;
  int32_t offsetBits;

  /// Group g's rows [begin, end): ends clamped to [previous end, rows].
  std::pair<int64_t, int64_t> bounds(int64_t g, int64_t begin) const {
    int64_t end = offsetBits == 32 ? static_cast<const int32_t *>(offsets)[g]
                                   : static_cast<const int64_t *>(offsets)[g];
    return {begin, std::clamp(end, begin, rows)};
  }
};

/// f32 storage: operands are read in place.
struct F32 {
  static const float *widen(const float *src, int64_t, unsigned) { return src; }
  static float *result(float *dst, int64_t, unsigned) { return dst; }
  static void store(const float *, float *, int64_t) {}
};

/// bf16 / f16 storage: operands widened into scratch, results rounded.
template <typename Format> struct Half {
  static const float *widen(const uint16_t *src, int64_t elements,
                            unsigned slot) {
    float *dst = scratch(slot, elements);
    widenInto<Format>(src, 1, elements, elements, dst);
    return dst;
  }
  static float *result(uint16_t *, int64_t elements, unsigned slot) {
    return scratch(slot, elements);
  }
  static void store(const float *src, uint16_t *dst, int64_t elements) {
    for (int64_t i = 0; i < elements; ++i)
      dst[i] = Format::narrow(src[i]);
  }
};

template <typename Storage, typename T>
void groupedMatmul(const Groups &s, const T *x, const T *w, bool wTransposed,
                   T *y) {
  int64_t begin = 0, matrix = s.k * s.n;
  for (int64_t g = 0; g < s.groups; ++g) {
    auto [first, end] = s.bounds(g, begin);
    begin = end;
    int64_t m = end - first;
    if (m == 0)
      continue;
    const float *a = Storage::widen(x + first * s.k, m * s.k, 0);
    const float *b = Storage::widen(w + g * matrix, matrix, 1);
    float *c = Storage::result(y + first * s.n, m * s.n, 2);
    zest_sgemm(0, wTransposed, m, s.n, s.k, a, s.k, b, wTransposed ? s.k : s.n,
               c, s.n, 0);
    Storage::store(c, y + first * s.n, m * s.n);
  }
  std::memset(static_cast<void *>(y + begin * s.n), 0,
              (s.rows - begin) * s.n * sizeof(T));
}

template <typename Storage, typename T>
void groupedWeightGrad(const Groups &s, const T *x, const T *dy, T *dw,
                       bool dwTransposed) {
  int64_t begin = 0, matrix = s.k * s.n;
  for (int64_t g = 0; g < s.groups; ++g) {
    auto [first, end] = s.bounds(g, begin);
    begin = end;
    int64_t m = end - first;
    T *grad = dw + g * matrix;
    if (m == 0) {
      std::memset(static_cast<void *>(grad), 0, matrix * sizeof(T));
      continue;
    }
    const float *a = Storage::widen(x + first * s.k, m * s.k, 0);
    const float *b = Storage::widen(dy + first * s.n, m * s.n, 1);
    float *c = Storage::result(grad, matrix, 2);
    // dw[g] = x^T dy ([k, n]) or dy^T x ([n, k]).
    if (dwTransposed)
      zest_sgemm(1, 0, s.n, s.k, m, b, s.n, a, s.k, c, s.k, 0);
    else
      zest_sgemm(1, 0, s.k, s.n, m, a, s.k, b, s.n, c, s.n, 0);
    Storage::store(c, grad, matrix);
  }
}

} // namespace

extern "C" {

void zest_grouped_matmul(ZEST_grouped_matmul_PARAMS(float)) {
  groupedMatmul<F32>({rows, n, k, groups, offsets, offset_bits}, x, w,
                     w_transposed, y);
}

void zest_grouped_matmul_bf16(ZEST_grouped_matmul_PARAMS(uint16_t)) {
  groupedMatmul<Half<BF16>>({rows, n, k, groups, offsets, offset_bits}, x, w,
                            w_transposed, y);
}

void zest_grouped_matmul_f16(ZEST_grouped_matmul_PARAMS(uint16_t)) {
  groupedMatmul<Half<F16>>({rows, n, k, groups, offsets, offset_bits}, x, w,
                           w_transposed, y);
}

void zest_grouped_matmul_weight_grad(
    ZEST_grouped_matmul_weight_grad_PARAMS(float)) {
  groupedWeightGrad<F32>({rows, n, k, groups, offsets, offset_bits}, x, dy, dw,
                         dw_transposed);
}

void zest_grouped_matmul_weight_grad_bf16(
    ZEST_grouped_matmul_weight_grad_PARAMS(uint16_t)) {
  groupedWeightGrad<Half<BF16>>({rows, n, k, groups, offsets, offset_bits}, x,
                                dy, dw, dw_transposed);
}

void zest_grouped_matmul_weight_grad_f16(
    ZEST_grouped_matmul_weight_grad_PARAMS(uint16_t)) {
  groupedWeightGrad<Half<F16>>({rows, n, k, groups, offsets, offset_bits}, x,
                               dy, dw, dw_transposed);
}

} // extern "C"
