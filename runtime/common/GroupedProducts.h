//===- GroupedProducts.h - One product per group ---------------*- C++ -*-===//
//
// What zest_grouped_matmul and its weights' gradient compute, on the CPU
// and on CUDA alike: the group ends read on the host, then each non-empty
// group's rows multiplied by its matrix (its weight gradient formed) by the
// runtime's own fused linear products (zest_linear_forward and
// zest_linear_backward, or their CUDA twins on cuBLASLt), which accumulate
// in f32 and round 16-bit storage once. Rows past the last end and the
// gradients of empty groups are cleared. Each runtime supplies its products
// and how it clears memory; the bounds are decided here, once.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_COMMON_GROUPEDPRODUCTS_H
#define ZEST_RUNTIME_COMMON_GROUPEDPRODUCTS_H

#include "zest_runtime.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace zest::rt {

/// Each group's first row and end, from the cumulative `ends` (int32 or
/// int64 as `offsetBits` says, already on the host) clamped as the C API
/// specifies: to [the previous end, rows].
inline std::vector<std::pair<int64_t, int64_t>>
getGroupBounds(const void *ends, int32_t offsetBits, int64_t groups,
               int64_t rows) {
  std::vector<std::pair<int64_t, int64_t>> bounds;
  int64_t begin = 0;
  for (int64_t g = 0; g < groups; ++g) {
    int64_t end = offsetBits == 32 ? static_cast<const int32_t *>(ends)[g]
                                   : static_cast<const int64_t *>(ends)[g];
    end = std::clamp(end, begin, rows);
    bounds.push_back({begin, end});
    begin = end;
  }
  return bounds;
}

/// A grouped product in storage C with the runtime's linear products for
/// C and `clear(pointer, bytes)`, which zeroes memory where the products
/// write it.
template <typename C> struct GroupedProducts {
  using Forward = void (*)(ZEST_linear_forward_PARAMS(C));
  using Backward = void (*)(ZEST_linear_backward_PARAMS(C));
  using Clear = void (*)(void *, size_t);
  Forward forward;
  Backward backward;
  Clear clear;
  int64_t rows, n, k;
  std::vector<std::pair<int64_t, int64_t>> bounds;

  /// y = x w[g] (w [groups, k, n]) or x w[g]^T (w [groups, n, k],
  /// wTransposed) on each group's rows; rows past the last end 0.
  void matmul(const C *x, const C *w, int32_t wTransposed, C *y) const {
    int64_t matrix = k * n;
    for (size_t g = 0; g < bounds.size(); ++g) {
      auto [first, last] = bounds[g];
      if (first < last)
        forward(last - first, n, k, x + first * k, k, w + g * matrix,
                wTransposed ? k : n, wTransposed, nullptr, ZEST_ACTIVATION_NONE,
                nullptr, 0, y + first * n, n);
    }
    int64_t end = bounds.empty() ? 0 : bounds.back().second;
    if (end < rows)
      clear(y + end * n, (rows - end) * n * sizeof(C));
  }

  /// dw[g] = x[rows of g]^T dy[rows of g] ([k, n]), or its transpose
  /// ([n, k], dwTransposed); 0 for an empty group.
  void weightGrad(const C *x, const C *dy, C *dw, int32_t dwTransposed) const {
    int64_t matrix = k * n;
    for (size_t g = 0; g < bounds.size(); ++g) {
      auto [first, last] = bounds[g];
      if (first == last) {
        clear(dw + g * matrix, matrix * sizeof(C));
        continue;
      }
      // The layer y = x op(w) of zest_linear_backward: m rows, n outputs,
      // k inputs; only its weight gradient is asked for.
      backward(last - first, n, k, dy + first * n, n, nullptr, 0,
               ZEST_ACTIVATION_NONE, x + first * k, k, nullptr, 0, 0, nullptr,
               0, dw + g * matrix, dwTransposed ? k : n, dwTransposed, nullptr);
    }
  }
};

} // namespace zest::rt

/// Inside an entry point of the C API (ZEST_grouped_matmul*_PARAMS): the
/// GroupedProducts of storage C on that runtime's zest<RUNTIME>
/// linear_forward / _backward<SUFFIX>, with `bounds(offsets, offset_bits,
/// groups, rows)` the groups' bounds read on the host and `clear` the
/// runtime's memset.
#define ZEST_GROUPED_PRODUCTS(RUNTIME, SUFFIX, C, bounds, clear)               \
  zest::rt::GroupedProducts<C> {                                               \
    zest##RUNTIME##linear_forward##SUFFIX,                                     \
        zest##RUNTIME##linear_backward##SUFFIX, clear, rows, n, k,             \
        bounds(offsets, offset_bits, groups, rows)                             \
  }
/// The C API's zest<RUNTIME>grouped_matmul<SUFFIX> and its weights'
/// gradient.
#define ZEST_GROUPED_PRODUCT_ENTRIES(RUNTIME, SUFFIX, C, bounds, clear)        \
  void zest##RUNTIME##grouped_matmul##SUFFIX(ZEST_grouped_matmul_PARAMS(C)) {  \
    ZEST_GROUPED_PRODUCTS(RUNTIME, SUFFIX, C, bounds, clear)                   \
        .matmul(x, w, w_transposed, y);                                        \
  }                                                                            \
  void zest##RUNTIME##grouped_matmul_weight_grad##SUFFIX(                      \
      ZEST_grouped_matmul_weight_grad_PARAMS(C)) {                             \
    ZEST_GROUPED_PRODUCTS(RUNTIME, SUFFIX, C, bounds, clear)                   \
        .weightGrad(x, dy, dw, dw_transposed);                                 \
  }

#endif // ZEST_RUNTIME_COMMON_GROUPEDPRODUCTS_H
