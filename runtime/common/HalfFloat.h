//===- HalfFloat.h - bf16 and f16 conversions on the host -------*- C++ -*-===//
//
// For the MPI backend's 16-bit reductions (summed in float), the f16
// linear layers' storage and the emulated device's tensor-core products.
// Widening uses no library call: it is on the emulator's hot path.
// Rounding is to nearest even; NaNs stay NaNs.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_COMMON_HALFFLOAT_H
#define ZEST_RUNTIME_COMMON_HALFFLOAT_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace zest::rt {

inline float bf16ToFloat(uint16_t bits) {
  uint32_t word = uint32_t(bits) << 16;
  float value;
  std::memcpy(&value, &word, sizeof(value));
  return value;
}

inline uint16_t floatToBf16(float value) {
  uint32_t word;
  std::memcpy(&word, &value, sizeof(word));
  if (std::isnan(value))
    return 0x7fc0;
  word += 0x7fff + ((word >> 16) & 1); // round to nearest even
  return uint16_t(word >> 16);
}

inline float f16ToFloat(uint16_t bits) {
  uint32_t sign = uint32_t(bits & 0x8000) << 16, magnitude = bits & 0x7fff;
  float value;
  if (magnitude >= 0x7c00) {
    value = magnitude > 0x7c00 ? NAN : INFINITY;
  } else if (magnitude < 0x400) { // subnormal: mantissa * 2^-24, exactly
    value = float(magnitude) * 0x1p-24f;
  } else { // normal: the exponent rebiased from 15 to 127
    uint32_t word = (magnitude << 13) + (uint32_t(127 - 15) << 23);
    std::memcpy(&value, &word, sizeof(value));
  }
  uint32_t word;
  std::memcpy(&word, &value, sizeof(word));
  word |= sign;
  std::memcpy(&value, &word, sizeof(value));
  return value;
}

inline uint16_t floatToF16(float value) {
  uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  float magnitude = std::fabs(value);
  if (std::isnan(value))
    return sign | 0x7e00;
  if (magnitude >= 65520.0f)
    return sign | 0x7c00;
  if (magnitude < std::ldexp(1.0f, -24) / 2)
    return sign;
  int exponent;
  std::frexp(magnitude, &exponent); // magnitude = m * 2^exponent, m in [.5,1)
  int biased = exponent + 14;
  if (biased <= 0) // subnormal
    return sign | uint16_t(std::nearbyint(std::ldexp(magnitude, 24)));
  uint32_t mantissa =
      uint32_t(std::nearbyint(std::ldexp(magnitude, 11 - exponent))) - 0x400;
  if (mantissa == 0x400) { // rounding carried into the exponent
    mantissa = 0;
    ++biased;
  }
  return sign | uint16_t(biased << 10) | uint16_t(mantissa);
}

} // namespace zest::rt

#endif // ZEST_RUNTIME_COMMON_HALFFLOAT_H
