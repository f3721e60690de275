//===- HalfMatrix.h - 16-bit matrices widened to f32 and back -*- C++ -*-===//
//
// The CPU kernels compute 16-bit (bf16, f16) products in f32: operands are
// widened exactly, results rounded to nearest even once, as arith.truncf
// and PyTorch do (a NaN stays a quiet NaN); common/HalfFloat.h's
// conversions.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_KERNELS_HALFMATRIX_H
#define ZEST_RUNTIME_KERNELS_HALFMATRIX_H

#include "../common/HalfFloat.h"

#include <cstdint>
#include <vector>

namespace zest::kernels {

struct BF16 {
  static float widen(uint16_t value) { return zest::rt::bf16ToFloat(value); }
  static uint16_t narrow(float value) { return zest::rt::floatToBf16(value); }
};

struct F16 {
  static float widen(uint16_t value) { return zest::rt::f16ToFloat(value); }
  static uint16_t narrow(float value) { return zest::rt::floatToF16(value); }
};

/// Writes the [rows, cols] 16-bit matrix `src` (row stride `ld`) densely
/// into `dst` as f32.
template <typename Format>
void widenInto(const uint16_t *src, int64_t rows, int64_t cols, int64_t ld,
               float *dst) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      dst[i * cols + j] = Format::widen(src[i * ld + j]);
}

/// Per-thread f32 scratch, one buffer per `slot`, grown and never shrunk:
/// a steady-state step allocates (and faults) nothing.
inline float *scratch(unsigned slot, int64_t elements) {
  thread_local std::vector<float> buffers[16];
  std::vector<float> &buffer = buffers[slot];
  if (int64_t(buffer.size()) < elements)
    buffer.resize(elements);
  return buffer.data();
}

} // namespace zest::kernels

#endif // ZEST_RUNTIME_KERNELS_HALFMATRIX_H
