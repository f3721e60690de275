//===- FusedLinear.cpp - Linear layers with fused epilogues ---------------===//
//
// A linear layer as one product and one vectorized pass over its output:
// OpenBLAS computes a block of rows starting from the broadcast bias, then
// the activation is applied to that block in a single pass (DeepSpeed's
// fused linear; Inductor's GEMM epilogues do the same inside the GEMM).
// OpenBLAS packs the weight again for every call, so blocks are large:
// cache-sized blocks (64 Ki elements) measured 10-25% slower than one product
// plus one pass on layer-sized outputs; only outputs beyond a few MiB are
// split. The backward forms g = dy * act'(pre) once, summing the bias gradient
// in the same pass, and runs the input and weight gradients as two products.
//
//===----------------------------------------------------------------------===//

#include "zest_runtime.h"

#include "../common/HalfFloat.h"
#include "HalfMatrix.h"
#include "Sgemm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

using zest::kernels::BF16;
using zest::kernels::F16;

namespace {

// The row loops are compiled once per target clone (AVX2+FMA, baseline):
// everything they call must be inlined into each clone, or the clone would
// call a baseline-compiled body.
#define ZEST_ALWAYS_INLINE inline __attribute__((always_inline))
#define ZEST_ALWAYS_INLINE_LAMBDA __attribute__((always_inline))

/// Output elements per block (8 MiB): a layer's output is one block.
constexpr int64_t kBlockElements = 2 * 1024 * 1024;

/// e^y for y in [-87, 88], within a few ULP: e^y = 2^n e^r with
/// |r| <= ln2/2 and e^r from its Taylor series to degree 7 (relative error
/// below 1e-8 there). Plain arithmetic, so the epilogue loops vectorize
/// (libm's expf/tanhf calls would not).
ZEST_ALWAYS_INLINE float expApprox(float y) {
  y = std::min(88.0f, std::max(-87.0f, y));
  const float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;
  float t = y * kLog2e;
  int32_t n = static_cast<int32_t>(t + std::copysign(0.5f, t));
  float r = y - float(n) * kLn2;
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t bits = (n + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

/// tanh(v) = sign(v) (1 - 2 / (e^{2|v|} + 1)); absolute error ~1e-7, which
/// is what GELU's 0.5 v (1 + tanh(.)) needs. |v| > 9 gives 1 in f32.
ZEST_ALWAYS_INLINE float tanhApprox(float v) {
  float a = std::min(std::fabs(v), 9.0f);
  float t = 1.0f - 2.0f / (expApprox(2.0f * a) + 1.0f);
  return std::copysign(t, v);
}

ZEST_ALWAYS_INLINE float activate(float v, int32_t activation) {
  switch (activation) {
  case ZEST_ACTIVATION_RELU:
    return std::max(v, 0.0f);
  case ZEST_ACTIVATION_GELU_TANH: {
    const float kBeta = 0.7978845608028654f; // sqrt(2 / pi)
    return 0.5f * v * (1.0f + tanhApprox(kBeta * (v + 0.044715f * v * v * v)));
  }
  case ZEST_ACTIVATION_GELU_ERF:
    return 0.5f * v * (1.0f + std::erf(v * 0.7071067811865476f));
  case ZEST_ACTIVATION_SILU:
    return v / (1.0f + expApprox(-v));
  default:
    return v;
  }
}

/// Calls `fn` with the activation as a compile-time constant
/// (`std::integral_constant`), so every row loop is specialized for one
/// activation and vectorizes.
template <typename Fn>
ZEST_ALWAYS_INLINE void withActivation(int32_t activation, Fn &&fn) {
  switch (activation) {
  case ZEST_ACTIVATION_RELU:
    return fn(std::integral_constant<int32_t, ZEST_ACTIVATION_RELU>());
  case ZEST_ACTIVATION_GELU_TANH:
    return fn(std::integral_constant<int32_t, ZEST_ACTIVATION_GELU_TANH>());
  case ZEST_ACTIVATION_GELU_ERF:
    return fn(std::integral_constant<int32_t, ZEST_ACTIVATION_GELU_ERF>());
  case ZEST_ACTIVATION_SILU:
    return fn(std::integral_constant<int32_t, ZEST_ACTIVATION_SILU>());
  default:
    return fn(std::integral_constant<int32_t, ZEST_ACTIVATION_NONE>());
  }
}

/// One row of the forward epilogue: `out[j] = act(pre[j])` (the bias is
/// already in `pre`, the product's starting value). Compiled for x86-64-v3
/// (AVX2, FMA) and for the baseline, chosen at load time: the runtime
/// library is built for any x86-64.
__attribute__((target_clones("arch=x86-64-v3", "default"))) void
activateRow(int32_t activation, const float *pre, float *out, int64_t n) {
  withActivation(activation, [&](auto act) ZEST_ALWAYS_INLINE_LAMBDA {
    for (int64_t j = 0; j < n; ++j)
      out[j] = activate(pre[j], decltype(act)::value);
  });
}

/// act'(v), as PyTorch's backward kernels compute it.
ZEST_ALWAYS_INLINE float derivative(float v, int32_t activation) {
  switch (activation) {
  case ZEST_ACTIVATION_RELU:
    return v > 0.0f ? 1.0f : 0.0f;
  case ZEST_ACTIVATION_GELU_TANH: {
    const float kBeta = 0.7978845608028654f, kKappa = 0.044715f;
    float t = tanhApprox(kBeta * (v + kKappa * v * v * v));
    return 0.5f * (1.0f + t) +
           0.5f * v * (1.0f - t * t) * kBeta * (1.0f + 3.0f * kKappa * v * v);
  }
  case ZEST_ACTIVATION_GELU_ERF: {
    const float kInvSqrt2Pi = 0.3989422804014327f;
    return 0.5f * (1.0f + std::erf(v * 0.7071067811865476f)) +
           v * kInvSqrt2Pi * expApprox(-0.5f * v * v);
  }
  case ZEST_ACTIVATION_SILU: {
    float s = 1.0f / (1.0f + expApprox(-v));
    return s * (1.0f + v * (1.0f - s));
  }
  default:
    return 1.0f;
  }
}

/// One row of the backward prologue: `g[j] = dy[j] * act'(pre[j])` and,
/// when `db` is given, `db[j] += g[j]`.
__attribute__((target_clones("arch=x86-64-v3", "default"))) void
gradientRow(int32_t activation, const float *dy, const float *pre, float *g,
            float *db, int64_t n) {
  withActivation(activation, [&](auto act) ZEST_ALWAYS_INLINE_LAMBDA {
    if (db)
      for (int64_t j = 0; j < n; ++j) {
        float v = dy[j] * derivative(pre[j], decltype(act)::value);
        g[j] = v;
        db[j] += v;
      }
    else
      for (int64_t j = 0; j < n; ++j)
        g[j] = dy[j] * derivative(pre[j], decltype(act)::value);
  });
}

__attribute__((target_clones("arch=x86-64-v3", "default"))) void
addRow(const float *row, float *sum, int64_t n) {
  for (int64_t j = 0; j < n; ++j)
    sum[j] += row[j];
}

template <typename Format>
void narrowMatrix(const float *dense, int64_t rows, int64_t cols, uint16_t *dst,
                  int64_t ld) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      dst[i * ld + j] = Format::narrow(dense[i * cols + j]);
}

/// Rounds each value to the 16-bit format: what storing it would keep.
template <typename Format> void roundTo(float *values, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    values[i] = Format::widen(Format::narrow(values[i]));
}

} // namespace

extern "C" void zest_linear_backward(ZEST_linear_backward_PARAMS(float)) {
  zest_progress();
  if (db)
    std::fill(db, db + n, 0.0f);
  // g: dy itself, or formed once into a per-thread scratch buffer that is
  // reused across calls (no allocation per layer).
  const float *g = dy;
  int64_t ldg = lddy;
  if (activation != ZEST_ACTIVATION_NONE) {
    static thread_local std::vector<float> scratch;
    if (scratch.size() < static_cast<size_t>(m * n))
      scratch.resize(m * n);
    for (int64_t i = 0; i < m; ++i)
      gradientRow(activation, dy + i * lddy, pre + i * ldpre,
                  scratch.data() + i * n, db, n);
    g = scratch.data();
    ldg = n;
  } else if (db) {
    for (int64_t i = 0; i < m; ++i)
      addRow(dy + i * lddy, db, n);
  }
  if (dx && m && k)
    zest::kernels::sgemm(false, !w_transposed, m, k, n, g, ldg, w, ldw, 0.0f,
                         dx, lddx);
  zest_progress();
  if (dw && k && n) {
    if (dw_transposed)
      zest::kernels::sgemm(true, false, n, k, m, g, ldg, x, ldx, 0.0f, dw,
                           lddw);
    else
      zest::kernels::sgemm(true, false, k, n, m, x, ldx, g, ldg, 0.0f, dw,
                           lddw);
  }
}

extern "C" void zest_linear_forward(ZEST_linear_forward_PARAMS(float)) {
  zest_progress();
  // The product goes where the pre-activation is kept, or straight to y.
  float *product = pre ? pre : y;
  int64_t ldproduct = pre ? ldpre : ldy;
  // Blocks of rows keep the epilogue's reads in cache; a plain product has
  // no epilogue and runs as one call (blocks would repack the weight each
  // time: a head over 50257 classes would take 41 rows at a time).
  bool plain = !bias && activation == ZEST_ACTIVATION_NONE && product == y;
  int64_t rows =
      plain ? std::max<int64_t>(1, m)
            : std::max<int64_t>(1, kBlockElements / std::max<int64_t>(1, n));
  for (int64_t row = 0; row < m; row += rows) {
    int64_t count = std::min(rows, m - row);
    float *block = product + row * ldproduct;
    // The bias is the product's starting value: OpenBLAS would otherwise
    // make a pass to zero the output (beta = 0) and the epilogue another to
    // add it.
    if (bias)
      for (int64_t i = 0; i < count; ++i)
        std::memcpy(block + i * ldproduct, bias, n * sizeof(float));
    zest::kernels::sgemm(false, w_transposed, count, n, k, x + row * ldx, ldx,
                         w, ldw, bias ? 1.0f : 0.0f, block, ldproduct);
    if (activation == ZEST_ACTIVATION_NONE && product == y)
      continue; // product and bias only
    for (int64_t i = 0; i < count; ++i)
      activateRow(activation, block + i * ldproduct, y + (row + i) * ldy, n);
  }
}

// 16-bit storage (bf16, f16): f32 products and epilogues on widened copies,
// each stored tensor rounded once. A stored intermediate (the pre-activation
// forward, g backward) is rounded before it is used, as when PyTorch
// materializes it in 16 bits between its kernels.

namespace {

/// HalfMatrix.h scratch slots of the 16-bit layers.
enum Slot : unsigned { kX, kW, kBias, kOut, kG, kPre, kDx, kDw, kDb };

/// `src` ([rows, cols], row stride `ld`) widened into scratch `slot`.
template <typename Format>
float *widened(unsigned slot, const uint16_t *src, int64_t rows, int64_t cols,
               int64_t ld) {
  float *dense = zest::kernels::scratch(slot, rows * cols);
  zest::kernels::widenInto<Format>(src, rows, cols, ld, dense);
  return dense;
}

template <typename Format>
void linearForward16(ZEST_linear_forward_PARAMS(uint16_t)) {
  int64_t wRows = w_transposed ? n : k, wCols = w_transposed ? k : n;
  float *x32 = widened<Format>(kX, x, m, k, ldx);
  float *w32 = widened<Format>(kW, w, wRows, wCols, ldw);
  float *bias32 = bias ? widened<Format>(kBias, bias, 1, n, n) : nullptr;
  float *out = zest::kernels::scratch(kOut, m * n);
  zest_linear_forward(m, n, k, x32, k, w32, wCols, w_transposed, bias32,
                      ZEST_ACTIVATION_NONE, nullptr, 0, out, n);
  roundTo<Format>(out, m * n);
  if (pre)
    narrowMatrix<Format>(out, m, n, pre, ldpre);
  if (activation != ZEST_ACTIVATION_NONE)
    for (int64_t i = 0; i < m; ++i)
      activateRow(activation, out + i * n, out + i * n, n);
  narrowMatrix<Format>(out, m, n, y, ldy);
}

template <typename Format>
void linearBackward16(ZEST_linear_backward_PARAMS(uint16_t)) {
  float *g = widened<Format>(kG, dy, m, n, lddy);
  if (activation != ZEST_ACTIVATION_NONE) {
    float *pre32 = widened<Format>(kPre, pre, m, n, ldpre);
    for (int64_t i = 0; i < m; ++i)
      gradientRow(activation, g + i * n, pre32 + i * n, g + i * n, nullptr, n);
    roundTo<Format>(g, m * n);
  }
  int64_t wRows = w_transposed ? n : k, wCols = w_transposed ? k : n;
  int64_t dwRows = dw_transposed ? n : k, dwCols = dw_transposed ? k : n;
  float *w32 = dx ? widened<Format>(kW, w, wRows, wCols, ldw) : nullptr;
  float *x32 = dw ? widened<Format>(kX, x, m, k, ldx) : nullptr;
  float *dx32 = dx ? zest::kernels::scratch(kDx, m * k) : nullptr;
  float *dw32 = dw ? zest::kernels::scratch(kDw, dwRows * dwCols) : nullptr;
  float *db32 = db ? zest::kernels::scratch(kDb, n) : nullptr;
  zest_linear_backward(m, n, k, g, n, nullptr, 0, ZEST_ACTIVATION_NONE, x32, k,
                       w32, wCols, w_transposed, dx32, k, dw32, dwCols,
                       dw_transposed, db32);
  if (dx)
    narrowMatrix<Format>(dx32, m, k, dx, lddx);
  if (dw)
    narrowMatrix<Format>(dw32, dwRows, dwCols, dw, lddw);
  if (db)
    narrowMatrix<Format>(db32, 1, n, db, n);
}

} // namespace

extern "C" {

void zest_linear_forward_bf16(ZEST_linear_forward_PARAMS(uint16_t)) {
  linearForward16<BF16>(ZEST_linear_forward_ARGS);
}

void zest_linear_backward_bf16(ZEST_linear_backward_PARAMS(uint16_t)) {
  linearBackward16<BF16>(ZEST_linear_backward_ARGS);
}

void zest_linear_forward_f16(ZEST_linear_forward_PARAMS(uint16_t)) {
  linearForward16<F16>(ZEST_linear_forward_ARGS);
}

void zest_linear_backward_f16(ZEST_linear_backward_PARAMS(uint16_t)) {
  linearBackward16<F16>(ZEST_linear_backward_ARGS);
}

} // extern "C"
