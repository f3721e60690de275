//===- FusedLinearTest.cpp - Fused linear kernels against a reference -----===//
//
// zest_linear_forward: every activation, with and without bias, plain and
// transposed weights, with and without the kept pre-activation.
// zest_linear_backward: every activation, plain and transposed weights and
// weight gradients, each gradient alone and all together. Shapes with odd
// sizes, one row, and outputs spanning several row blocks; each against a
// double-precision reference, with an error bound scaled by the magnitudes
// summed. The same cases again with bf16 and f16 storage (the *_bf16 and
// *_f16 kernels), where the bound adds the type's unit roundoff for each
// rounding of a stored tensor: truncating instead of rounding would fail.
// zest_widening_gemm_batched_{bf16,f16}: 16-bit operands into f32, every
// transposition, accumulating or not, padded rows and strided batches.
//
//===----------------------------------------------------------------------===//

#include "zest_runtime.h"

#include "../common/HalfFloat.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

namespace {

double activate(double v, int activation) {
  switch (activation) {
  case ZEST_ACTIVATION_RELU:
    return v > 0 ? v : 0;
  case ZEST_ACTIVATION_GELU_TANH:
    return 0.5 * v *
           (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  case ZEST_ACTIVATION_GELU_ERF:
    return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
  case ZEST_ACTIVATION_SILU:
    return v / (1 + std::exp(-v));
  default:
    return v;
  }
}

double derivative(double v, int activation) {
  switch (activation) {
  case ZEST_ACTIVATION_RELU:
    return v > 0 ? 1 : 0;
  case ZEST_ACTIVATION_GELU_TANH: {
    double b = std::sqrt(2 / M_PI),
           t = std::tanh(b * (v + 0.044715 * v * v * v));
    return 0.5 * (1 + t) +
           0.5 * v * (1 - t * t) * b * (1 + 3 * 0.044715 * v * v);
  }
  case ZEST_ACTIVATION_GELU_ERF:
    return 0.5 * (1 + std::erf(v / std::sqrt(2.0))) +
           v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
  case ZEST_ACTIVATION_SILU: {
    double s = 1 / (1 + std::exp(-v));
    return s * (1 + v * (1 - s));
  }
  default:
    return 1;
  }
}

struct Shape {
  int64_t m, n, k;
};

/// Storage types: f32, bf16 as its bit pattern, or f16 (its bit pattern,
/// wrapped to be a type of its own).
using bf16 = uint16_t;
struct f16 {
  uint16_t bits;
};

float toFloat(float v) { return v; }
float toFloat(bf16 v) { return zest::rt::bf16ToFloat(v); }
float toFloat(f16 v) { return zest::rt::f16ToFloat(v.bits); }

/// Random values in [lo, hi] representable in `T` (bf16 by truncation: the
/// inputs only need to be bf16 values).
template <typename T> T sample(std::mt19937 &rng, float lo, float hi) {
  float v = std::uniform_real_distribution<float>(lo, hi)(rng);
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else if constexpr (std::is_same_v<T, f16>) {
    return f16{zest::rt::floatToF16(v)};
  } else {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    return bf16(bits >> 16);
  }
}

template <typename T>
constexpr const char *kTypeName = std::is_same_v<T, float> ? "f32"
                                  : std::is_same_v<T, f16> ? "f16"
                                                           : "bf16";

/// Relative error of storing a value once: none for f32, the unit roundoff
/// (2^-8 for bf16's 8 significant bits, 2^-11 for f16's 11) otherwise, with
/// a margin for the f32 rounding before it.
template <typename T>
constexpr double kStoreError = std::is_same_v<T, float> ? 0.0
                               : std::is_same_v<T, f16> ? 1.01 / 2048
                                                        : 1.01 / 256;

template <typename T> T poison() {
  if constexpr (std::is_same_v<T, float>)
    return NAN;
  else if constexpr (std::is_same_v<T, f16>)
    return f16{0x7e01};
  else
    return bf16(0x7fc1);
}

void forward(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
             const float *w, int64_t ldw, int32_t wt, const float *b,
             int32_t act, float *pre, int64_t ldpre, float *y, int64_t ldy) {
  zest_linear_forward(m, n, k, x, ldx, w, ldw, wt, b, act, pre, ldpre, y, ldy);
}
void forward(int64_t m, int64_t n, int64_t k, const bf16 *x, int64_t ldx,
             const bf16 *w, int64_t ldw, int32_t wt, const bf16 *b, int32_t act,
             bf16 *pre, int64_t ldpre, bf16 *y, int64_t ldy) {
  zest_linear_forward_bf16(m, n, k, x, ldx, w, ldw, wt, b, act, pre, ldpre, y,
                           ldy);
}
void forward(int64_t m, int64_t n, int64_t k, const f16 *x, int64_t ldx,
             const f16 *w, int64_t ldw, int32_t wt, const f16 *b, int32_t act,
             f16 *pre, int64_t ldpre, f16 *y, int64_t ldy) {
  auto bits = [](auto *p) { return reinterpret_cast<decltype(&p->bits)>(p); };
  zest_linear_forward_f16(m, n, k, bits(x), ldx, bits(w), ldw, wt, bits(b), act,
                          bits(pre), ldpre, bits(y), ldy);
}
void backward(int64_t m, int64_t n, int64_t k, const float *dy, int64_t lddy,
              const float *pre, int64_t ldpre, int32_t act, const float *x,
              int64_t ldx, const float *w, int64_t ldw, int32_t wt, float *dx,
              int64_t lddx, float *dw, int64_t lddw, int32_t dwt, float *db) {
  zest_linear_backward(m, n, k, dy, lddy, pre, ldpre, act, x, ldx, w, ldw, wt,
                       dx, lddx, dw, lddw, dwt, db);
}
void backward(int64_t m, int64_t n, int64_t k, const bf16 *dy, int64_t lddy,
              const bf16 *pre, int64_t ldpre, int32_t act, const bf16 *x,
              int64_t ldx, const bf16 *w, int64_t ldw, int32_t wt, bf16 *dx,
              int64_t lddx, bf16 *dw, int64_t lddw, int32_t dwt, bf16 *db) {
  zest_linear_backward_bf16(m, n, k, dy, lddy, pre, ldpre, act, x, ldx, w, ldw,
                            wt, dx, lddx, dw, lddw, dwt, db);
}
void backward(int64_t m, int64_t n, int64_t k, const f16 *dy, int64_t lddy,
              const f16 *pre, int64_t ldpre, int32_t act, const f16 *x,
              int64_t ldx, const f16 *w, int64_t ldw, int32_t wt, f16 *dx,
              int64_t lddx, f16 *dw, int64_t lddw, int32_t dwt, f16 *db) {
  auto bits = [](auto *p) { return reinterpret_cast<decltype(&p->bits)>(p); };
  zest_linear_backward_f16(m, n, k, bits(dy), lddy, bits(pre), ldpre, act,
                           bits(x), ldx, bits(w), ldw, wt, bits(dx), lddx,
                           bits(dw), lddw, dwt, bits(db));
}

int failures = 0, cases = 0;

template <typename T>
void check(const Shape &s, bool transposed, bool withBias, int activation,
           bool keepPre, std::mt19937 &rng) {
  int64_t ldx = s.k + 3, ldy = s.n + 1; // strides wider than the rows
  int64_t ldw = transposed ? s.k : s.n;
  std::vector<T> x(s.m * ldx), w((transposed ? s.n : s.k) * ldw), bias(s.n),
      y(s.m * ldy, poison<T>()), pre(s.m * ldy, poison<T>());
  for (std::vector<T> *values : {&x, &w, &bias})
    for (T &v : *values)
      v = sample<T>(rng, -1.0f, 1.0f);
  forward(s.m, s.n, s.k, x.data(), ldx, w.data(), ldw, transposed ? 1 : 0,
          withBias ? bias.data() : nullptr, activation,
          keepPre ? pre.data() : nullptr, ldy, y.data(), ldy);
  ++cases;
  int bad = 0;
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      double sum = withBias ? toFloat(bias[j]) : 0.0,
             magnitude = std::fabs(sum);
      for (int64_t l = 0; l < s.k; ++l) {
        double wv = toFloat(transposed ? w[j * ldw + l] : w[l * ldw + j]);
        sum += double(toFloat(x[i * ldx + l])) * wv;
        magnitude += std::fabs(double(toFloat(x[i * ldx + l])) * wv);
      }
      // The pre-activation is stored (rounded) once, then the output.
      double preBound =
          1e-6 * magnitude + 1e-6 + kStoreError<T> * std::fabs(sum);
      double want = activate(sum, activation), got = toFloat(y[i * ldy + j]);
      // The activations' slopes are at most ~1.13 (GELU): scale the bound.
      double bound = 1.2 * preBound + 1e-6 * std::fabs(want) +
                     (activation ? kStoreError<T> * std::fabs(want) : 0.0);
      if (!(std::fabs(want - got) <= bound))
        ++bad;
      if (keepPre && !(std::fabs(sum - toFloat(pre[i * ldy + j])) <= preBound))
        ++bad;
    }
  if (bad) {
    ++failures;
    std::printf("FAIL %s m=%lld n=%lld k=%lld transposed=%d bias=%d act=%d "
                "pre=%d: %d wrong elements\n",
                kTypeName<T>, (long long)s.m, (long long)s.n, (long long)s.k,
                transposed, withBias, activation, keepPre, bad);
  }
}

/// Which gradients a backward case computes.
enum Gradients { kInput = 1, kWeight = 2, kBias = 4 };

template <typename T>
void checkBackward(const Shape &s, bool transposed, bool dwTransposed,
                   int activation, int gradients, std::mt19937 &rng) {
  int64_t lddy = s.n + 2, ldx = s.k + 1, lddx = s.k + 3;
  int64_t ldw = transposed ? s.k : s.n, lddw = dwTransposed ? s.k + 1 : s.n;
  std::vector<T> dy(s.m * lddy), pre(s.m * lddy), x(s.m * ldx),
      w((transposed ? s.n : s.k) * ldw), dx(s.m * lddx, poison<T>()),
      dw((dwTransposed ? s.n : s.k) * lddw, poison<T>()), db(s.n, poison<T>());
  for (std::vector<T> *values : {&dy, &x, &w})
    for (T &v : *values)
      v = sample<T>(rng, -1.0f, 1.0f);
  for (T &v : pre)
    v = sample<T>(rng, -4.0f, 4.0f);
  bool wantDx = gradients & kInput, wantDw = gradients & kWeight,
       wantDb = gradients & kBias;
  backward(s.m, s.n, s.k, dy.data(), lddy, pre.data(), lddy, activation,
           x.data(), ldx, w.data(), ldw, transposed,
           wantDx ? dx.data() : nullptr, lddx, wantDw ? dw.data() : nullptr,
           lddw, dwTransposed, wantDb ? db.data() : nullptr);
  ++cases;
  std::vector<double> g(s.m * s.n);
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j)
      g[i * s.n + j] = double(toFloat(dy[i * lddy + j])) *
                       derivative(toFloat(pre[i * lddy + j]), activation);
  int bad = 0;
  // g carries the approximated derivative's error (~1e-6 relative) and,
  // when stored (an activation), one rounding; the result one more.
  double gError = activation ? kStoreError<T> : 0.0;
  auto expect = [&](double want, double magnitude, T got) {
    if (!(std::fabs(want - toFloat(got)) <=
          (4e-6 + gError) * magnitude + kStoreError<T> * std::fabs(want) +
              1e-6))
      ++bad;
  };
  if (wantDx)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t l = 0; l < s.k; ++l) {
        double sum = 0, magnitude = 0;
        for (int64_t j = 0; j < s.n; ++j) {
          double wv = toFloat(transposed ? w[j * ldw + l] : w[l * ldw + j]);
          sum += g[i * s.n + j] * wv;
          magnitude += std::fabs(g[i * s.n + j] * wv);
        }
        expect(sum, magnitude, dx[i * lddx + l]);
      }
  if (wantDw)
    for (int64_t j = 0; j < s.n; ++j)
      for (int64_t l = 0; l < s.k; ++l) {
        double sum = 0, magnitude = 0;
        for (int64_t i = 0; i < s.m; ++i) {
          sum += g[i * s.n + j] * toFloat(x[i * ldx + l]);
          magnitude += std::fabs(g[i * s.n + j] * toFloat(x[i * ldx + l]));
        }
        expect(sum, magnitude,
               dwTransposed ? dw[j * lddw + l] : dw[l * lddw + j]);
      }
  if (wantDb)
    for (int64_t j = 0; j < s.n; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t i = 0; i < s.m; ++i) {
        sum += g[i * s.n + j];
        magnitude += std::fabs(g[i * s.n + j]);
      }
      expect(sum, magnitude, db[j]);
    }
  if (bad) {
    ++failures;
    std::printf("FAIL %s backward m=%lld n=%lld k=%lld transposed=%d "
                "dw_transposed=%d act=%d gradients=%d: %d wrong elements\n",
                kTypeName<T>, (long long)s.m, (long long)s.n, (long long)s.k,
                transposed, dwTransposed, activation, gradients, bad);
  }
}

const Shape kShapes[] = {{1, 1, 1},     {1, 64, 32},    {7, 13, 5},
                         {33, 65, 127}, {300, 257, 31}, {2, 3, 1000},
                         {513, 129, 64}};

template <typename T> void checkAll(std::mt19937 &rng) {
  for (const Shape &s : kShapes)
    for (bool transposed : {true, false})
      for (bool withBias : {true, false})
        for (int activation = ZEST_ACTIVATION_NONE;
             activation <= ZEST_ACTIVATION_SILU; ++activation)
          for (bool keepPre : {false, true})
            check<T>(s, transposed, withBias, activation, keepPre, rng);
  for (const Shape &s : kShapes)
    for (bool transposed : {true, false})
      for (bool dwTransposed : {true, false})
        for (int activation = ZEST_ACTIVATION_NONE;
             activation <= ZEST_ACTIVATION_SILU; ++activation)
          for (int gradients : {int(kInput), int(kWeight), int(kBias),
                                kInput | kWeight | kBias})
            checkBackward<T>(s, transposed, dwTransposed, activation, gradients,
                             rng);
}

void wideningGemm(int32_t ta, int32_t tb, int64_t batch, int64_t m, int64_t n,
                  int64_t k, const bf16 *a, int64_t lda, int64_t sa,
                  const bf16 *b, int64_t ldb, int64_t sb, float *c, int64_t ldc,
                  int64_t sc, int32_t acc) {
  zest_widening_gemm_batched_bf16(ta, tb, batch, m, n, k, a, lda, sa, b, ldb,
                                  sb, c, ldc, sc, acc);
}
void wideningGemm(int32_t ta, int32_t tb, int64_t batch, int64_t m, int64_t n,
                  int64_t k, const f16 *a, int64_t lda, int64_t sa,
                  const f16 *b, int64_t ldb, int64_t sb, float *c, int64_t ldc,
                  int64_t sc, int32_t acc) {
  auto bits = [](auto *p) { return reinterpret_cast<decltype(&p->bits)>(p); };
  zest_widening_gemm_batched_f16(ta, tb, batch, m, n, k, bits(a), lda, sa,
                                 bits(b), ldb, sb, c, ldc, sc, acc);
}

/// zest_widening_gemm_batched_*: 16-bit operands with padded rows, into an
/// f32 C (padded too, accumulated into or overwritten), against a double
/// reference on the same 16-bit values; only f32 rounding is allowed.
template <typename T>
void checkWideningGemm(const Shape &s, bool transA, bool transB,
                       bool accumulate, int64_t batch, std::mt19937 &rng) {
  int64_t aRows = transA ? s.k : s.m, aCols = transA ? s.m : s.k;
  int64_t bRows = transB ? s.n : s.k, bCols = transB ? s.k : s.n;
  int64_t lda = aCols + 3, ldb = bCols + 1, ldc = s.n + 2;
  int64_t sa = aRows * lda, sb = bRows * ldb, sc = s.m * ldc;
  std::vector<T> a(batch * sa), b(batch * sb);
  for (T &v : a)
    v = sample<T>(rng, -1, 1);
  for (T &v : b)
    v = sample<T>(rng, -1, 1);
  std::vector<float> c(batch * sc);
  for (float &v : c)
    v = sample<float>(rng, -1, 1);
  std::vector<float> got = c;
  wideningGemm(transA, transB, batch, s.m, s.n, s.k, a.data(), lda, sa,
               b.data(), ldb, sb, got.data(), ldc, sc, accumulate);
  ++cases;
  double worst = 0;
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double want = accumulate ? c[p * sc + i * ldc + j] : 0, magnitude = 1;
        for (int64_t l = 0; l < s.k; ++l) {
          double x = toFloat(a[p * sa + (transA ? l * lda + i : i * lda + l)]);
          double y = toFloat(b[p * sb + (transB ? j * ldb + l : l * ldb + j)]);
          want += x * y;
          magnitude += std::fabs(x * y);
        }
        worst = std::max(worst, std::fabs(got[p * sc + i * ldc + j] - want) /
                                    magnitude);
      }
  if (!(worst <= 1e-5)) {
    ++failures;
    std::printf("FAIL widening_gemm %s %lldx%lldx%lld tA %d tB %d acc %d "
                "batch %lld: relative error %g\n",
                kTypeName<T>, (long long)s.m, (long long)s.n, (long long)s.k,
                transA, transB, accumulate, (long long)batch, worst);
  }
}

template <typename T> void checkWideningGemms(std::mt19937 &rng) {
  for (const Shape &s : kShapes)
    for (bool transA : {false, true})
      for (bool transB : {false, true})
        for (bool accumulate : {false, true})
          checkWideningGemm<T>(s, transA, transB, accumulate,
                               s.m * s.n * s.k < 100000 ? 3 : 1, rng);
}

} // namespace

int main(int argc, char **argv) {
  // The BLAS kernels first: an AVX2 CPU that OpenBLAS did not recognise
  // must run AVX2 kernels after this (by a re-execution).
  zest_select_blas_kernels(argv);
  int matchesCpu = 0;
  const char *blas = zest_blas_kernels(&matchesCpu);
  std::printf("blas kernels: %s, %s\n", blas ? blas : "(not OpenBLAS)",
              matchesCpu ? "match the CPU" : "slower than the CPU allows");
  if (argc > 1 && std::strcmp(argv[1], "--blas-only") == 0)
    return 0;
  std::mt19937 rng(7);
  checkAll<float>(rng);
  checkAll<bf16>(rng);
  checkAll<f16>(rng);
  checkWideningGemms<bf16>(rng);
  checkWideningGemms<f16>(rng);
  // An output of more than one row block (8 MiB): 2 blocks and a partial.
  for (int activation :
       {int(ZEST_ACTIVATION_NONE), int(ZEST_ACTIVATION_GELU_TANH)})
    for (bool keepPre : {false, true})
      check<float>({4500, 1025, 3}, true, true, activation, keepPre, rng);
  // The pre-activation may be the output itself when there is none.
  {
    std::vector<float> x = {1, 2, 3, 4}, w = {1, 0, 0, 1}, b = {0.5f, -1},
                       y(4, NAN);
    zest_linear_forward(2, 2, 2, x.data(), 2, w.data(), 2, 1, b.data(),
                        ZEST_ACTIVATION_NONE, y.data(), 2, y.data(), 2);
    ++cases;
    if (y[0] != 1.5f || y[1] != 1 || y[2] != 3.5f || y[3] != 3) {
      ++failures;
      std::printf("FAIL pre == y: %g %g %g %g\n", y[0], y[1], y[2], y[3]);
    }
  }
  std::printf("fused-linear: %d cases, %d failures\n", cases, failures);
  return failures ? 1 : 0;
}
