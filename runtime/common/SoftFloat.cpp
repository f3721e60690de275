//===- SoftFloat.cpp - Conversions LLVM may call that libgcc lacks --------===//
//
// zestc expands bf16 conversions into integer arithmetic, but after LLVM
// vectorizes such a loop, x86 may legalize a vector select of bf16 through
// an f32 -> bf16 truncation, which it lowers to `__truncsfbf2`. libgcc 12
// (Debian 12) does not provide it, so the runtime does.
//
//===----------------------------------------------------------------------===//

#include <cstdint>
#include <cstring>

/// f32 -> bf16, rounding to nearest even; NaNs stay (quiet) NaNs.
///
/// The x86-64 ABI returns a bf16 in the low 16 bits of %xmm0, as a float is
/// returned in the low 32 bits: returning a float whose low 16 bits are the
/// bf16 is the same at the machine level, without the `__bf16` type that
/// this compiler may not have.
extern "C" float __truncsfbf2(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  uint32_t rounded;
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    rounded = (bits >> 16) | 0x0040u; // quiet NaN, sign kept
  else
    rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  float result;
  uint32_t resultBits = rounded & 0xffffu;
  std::memcpy(&result, &resultBits, sizeof result);
  return result;
}
