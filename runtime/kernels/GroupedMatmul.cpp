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

namespace {

void clear(void *memory, size_t bytes) { std::memset(memory, 0, bytes); }

} // namespace

extern "C" {
ZEST_GROUPED_PRODUCT_ENTRIES(_, , float, zest::rt::getGroupBounds, clear)
ZEST_GROUPED_PRODUCT_ENTRIES(_, _bf16, uint16_t, zest::rt::getGroupBounds,
                             clear)
ZEST_GROUPED_PRODUCT_ENTRIES(_, _f16, uint16_t, zest::rt::getGroupBounds, clear)
}
