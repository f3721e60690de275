//===- GroupedMatmul.cpp - Grouped products on the CPU --------------------===//
//
// zest_grouped_matmul and its weights' gradient (zest_runtime.h): a
// mixture-of-experts layer's rows come sorted by expert, and each expert's
// rows are one product of the runtime's fused linear layer
// (common/GroupedProducts.h), the group bounds read from the offsets at run
// time.
//
//===----------------------------------------------------------------------===//

#include "../common/GroupedProducts.h"
#include "zest_runtime.h"

#include <cstring>

using zest::rt::getGroupBounds;
using zest::rt::GroupedProducts;

namespace {

void clear(void *memory, size_t bytes) { std::memset(memory, 0, bytes); }

template <typename C>
GroupedProducts<C, void (*)(void *, size_t)>
makeProducts(void (*forward)(ZEST_linear_forward_PARAMS(C)),
             void (*backward)(ZEST_linear_backward_PARAMS(C)), int64_t rows,
             int64_t n, int64_t k, int64_t groups, const void *offsets,
             int32_t offsetBits) {
  return {forward,
          backward,
          clear,
          rows,
          n,
          k,
          getGroupBounds(offsets, offsetBits, groups, rows)};
}

} // namespace

#define ZEST_GROUPED_MATMUL_ENTRIES(SUFFIX, C)                                 \
  void zest_grouped_matmul##SUFFIX(ZEST_grouped_matmul_PARAMS(C)) {            \
    makeProducts<C>(zest_linear_forward##SUFFIX, zest_linear_backward##SUFFIX, \
                    rows, n, k, groups, offsets, offset_bits)                  \
        .matmul(x, w, w_transposed, y);                                        \
  }                                                                            \
  void zest_grouped_matmul_weight_grad##SUFFIX(                                \
      ZEST_grouped_matmul_weight_grad_PARAMS(C)) {                             \
    makeProducts<C>(zest_linear_forward##SUFFIX, zest_linear_backward##SUFFIX, \
                    rows, n, k, groups, offsets, offset_bits)                  \
        .weightGrad(x, dy, dw, dw_transposed);                                 \
  }

extern "C" {
ZEST_GROUPED_MATMUL_ENTRIES(, float)
ZEST_GROUPED_MATMUL_ENTRIES(_bf16, uint16_t)
ZEST_GROUPED_MATMUL_ENTRIES(_f16, uint16_t)
}
