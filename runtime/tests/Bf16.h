//===- Bf16.h - bf16 encodings for the runtime tests ------------*- C++ -*-===//

#ifndef ZEST_RUNTIME_TESTS_BF16_H
#define ZEST_RUNTIME_TESTS_BF16_H

#include <cstdint>
#include <cstring>

/// Truncating: exact for the small integers the tests use.
inline uint16_t toBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return uint16_t(bits >> 16);
}

inline float fromBf16(uint16_t half) {
  uint32_t bits = uint32_t(half) << 16;
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

#endif // ZEST_RUNTIME_TESTS_BF16_H
