//===- WideningGemm.cpp - 16-bit products into f32 on the CPU -------------===//
//
// zest_widening_gemm(_batched)_{bf16,f16}: this machine has no 16-bit
// product instructions, so each operand is widened into a per-thread f32
// scratch (kept across calls: a steady-state step allocates and faults
// nothing) and multiplied by the build's sgemm. The widened values are
// exact, so the result is the f32 product of the 16-bit operands.
//
//===----------------------------------------------------------------------===//

#include "zest_runtime.h"

#include "HalfMatrix.h"
#include "Sgemm.h"

using namespace zest::kernels;

namespace {

/// HalfMatrix.h scratch slots, apart from the fused layers'.
constexpr unsigned kWideningA = 8, kWideningB = 9;

template <typename Format>
void wideningGemm(ZEST_widening_gemm_batched_PARAMS(uint16_t)) {
  zest_progress();
  // The stored matrices: A is [k, m] when transposed, B [n, k].
  int64_t aRows = trans_a ? k : m, aCols = trans_a ? m : k;
  int64_t bRows = trans_b ? n : k, bCols = trans_b ? k : n;
  float *a32 = scratch(kWideningA, aRows * aCols);
  float *b32 = scratch(kWideningB, bRows * bCols);
  for (int64_t i = 0; i < batch; ++i) {
    widenInto<Format>(a + i * stride_a, aRows, aCols, lda, a32);
    widenInto<Format>(b + i * stride_b, bRows, bCols, ldb, b32);
    sgemm(trans_a, trans_b, m, n, k, a32, aCols, b32, bCols,
          accumulate ? 1.0f : 0.0f, c + i * stride_c, ldc);
  }
}

} // namespace

extern "C" {

void zest_widening_gemm_bf16(ZEST_widening_gemm_PARAMS(uint16_t)) {
  wideningGemm<BF16>(ZEST_gemm_AS_BATCHED_ARGS);
}

void zest_widening_gemm_batched_bf16(
    ZEST_widening_gemm_batched_PARAMS(uint16_t)) {
  wideningGemm<BF16>(ZEST_widening_gemm_batched_ARGS);
}

void zest_widening_gemm_f16(ZEST_widening_gemm_PARAMS(uint16_t)) {
  wideningGemm<F16>(ZEST_gemm_AS_BATCHED_ARGS);
}

void zest_widening_gemm_batched_f16(
    ZEST_widening_gemm_batched_PARAMS(uint16_t)) {
  wideningGemm<F16>(ZEST_widening_gemm_batched_ARGS);
}

} // extern "C"
