//===- SoftFloat.cpp - Conversions LLVM may call that libgcc lacks --------===//
//
// zestc expands bf16 conversions into integer arithmetic, but after LLVM
// vectorizes such a loop, x86 may legalize a vector select of bf16 through
// an f32 -> bf16 truncation, which it lowers to `__truncsfbf2`; an f64 ->
// bf16 truncation that LLVM cannot fold (torch-mlir's f64 constants of a
// GELU under autocast, passed into an emulated GPU kernel) becomes
// `__truncdfbf2`. libgcc 12 (Debian 12) provides neither, so the runtime
// does.
//
//===----------------------------------------------------------------------===//

#include <cmath>
#include <cstdint>
#include <cstring>

/// f32 -> bf16, rounding to nearest even; NaNs stay (quiet) NaNs.
///
/// The x86-64 ABI returns a bf16 in the low 16 bits of %xmm0, as a float is
/// returned in the low 32 bits: returning a float whose low 16 bits are the
/// bf16 is the same at the machine level, without the `__bf16` type that
/// this compiler may not have.
extern "C" float __truncsfbf2(float value);

/// f64 -> bf16, rounding once to nearest even (as the GPU's
/// `cvt.rn.bf16.f64`): f64 -> f32 rounded to odd keeps the information
/// the second rounding needs (f32 has more than two bits beyond bf16's),
/// so rounding that to bf16 equals rounding the f64 directly.
extern "C" float __truncdfbf2(double value) {
  float nearest = static_cast<float>(value);
  if (std::isnan(value) || static_cast<double>(nearest) == value)
    return __truncsfbf2(nearest);
  uint32_t bits;
  std::memcpy(&bits, &nearest, sizeof bits);
  // Inexact: the f32 below |value| (toward zero), its last bit set.
  if (std::fabs(static_cast<double>(nearest)) > std::fabs(value))
    --bits;
  bits |= 1u;
  float odd;
  std::memcpy(&odd, &bits, sizeof odd);
  return __truncsfbf2(odd);
}

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
