//===- FusedLinearTest.cpp - Fused linear kernels against a reference -----===//
//
// zest_linear_forward: every activation, with and without bias, plain and
// transposed weights, with and without the kept pre-activation.
// zest_linear_backward: every activation, plain and transposed weights and
// weight gradients, each gradient alone and all together. Shapes with odd
// sizes, one row, and outputs spanning several row blocks; each against a
// double-precision reference, with an error bound scaled by the magnitudes
// summed.
//
//===----------------------------------------------------------------------===//

#include "zest_runtime.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
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

int failures = 0, cases = 0;

void check(const Shape &s, bool transposed, bool withBias, int activation,
           bool keepPre, std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  int64_t ldx = s.k + 3, ldy = s.n + 1; // strides wider than the rows
  int64_t ldw = transposed ? s.k : s.n;
  std::vector<float> x(s.m * ldx), w((transposed ? s.n : s.k) * ldw), bias(s.n),
      y(s.m * ldy, NAN), pre(s.m * ldy, NAN);
  for (float &v : x)
    v = dist(rng);
  for (float &v : w)
    v = dist(rng);
  for (float &v : bias)
    v = dist(rng);
  zest_linear_forward(s.m, s.n, s.k, x.data(), ldx, w.data(), ldw,
                      transposed ? 1 : 0, withBias ? bias.data() : nullptr,
                      activation, keepPre ? pre.data() : nullptr, ldy, y.data(),
                      ldy);
  ++cases;
  int bad = 0;
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      double sum = withBias ? bias[j] : 0.0, magnitude = std::fabs(sum);
      for (int64_t l = 0; l < s.k; ++l) {
        double wv = transposed ? w[j * ldw + l] : w[l * ldw + j];
        sum += double(x[i * ldx + l]) * wv;
        magnitude += std::fabs(double(x[i * ldx + l]) * wv);
      }
      double bound = 1e-6 * magnitude + 1e-6;
      double want = activate(sum, activation), got = y[i * ldy + j];
      // The activations' slopes are at most ~1.13 (GELU): scale the bound.
      if (!(std::fabs(want - got) <= 1.2 * bound + 1e-6 * std::fabs(want)))
        ++bad;
      if (keepPre && !(std::fabs(sum - pre[i * ldy + j]) <= bound))
        ++bad;
    }
  if (bad) {
    ++failures;
    std::printf("FAIL m=%lld n=%lld k=%lld transposed=%d bias=%d act=%d "
                "pre=%d: %d wrong elements\n",
                (long long)s.m, (long long)s.n, (long long)s.k, transposed,
                withBias, activation, keepPre, bad);
  }
}

/// Which gradients a backward case computes.
enum Gradients { kInput = 1, kWeight = 2, kBias = 4 };

void checkBackward(const Shape &s, bool transposed, bool dwTransposed,
                   int activation, int gradients, std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::uniform_real_distribution<float> preDist(-4.0f, 4.0f);
  int64_t lddy = s.n + 2, ldx = s.k + 1, lddx = s.k + 3;
  int64_t ldw = transposed ? s.k : s.n, lddw = dwTransposed ? s.k + 1 : s.n;
  std::vector<float> dy(s.m * lddy), pre(s.m * lddy), x(s.m * ldx),
      w((transposed ? s.n : s.k) * ldw), dx(s.m * lddx, NAN),
      dw((dwTransposed ? s.n : s.k) * lddw, NAN), db(s.n, NAN);
  for (float &v : dy)
    v = dist(rng);
  for (float &v : pre)
    v = preDist(rng);
  for (float &v : x)
    v = dist(rng);
  for (float &v : w)
    v = dist(rng);
  bool wantDx = gradients & kInput, wantDw = gradients & kWeight,
       wantDb = gradients & kBias;
  zest_linear_backward(s.m, s.n, s.k, dy.data(), lddy, pre.data(), lddy,
                       activation, x.data(), ldx, w.data(), ldw, transposed,
                       wantDx ? dx.data() : nullptr, lddx,
                       wantDw ? dw.data() : nullptr, lddw, dwTransposed,
                       wantDb ? db.data() : nullptr);
  ++cases;
  std::vector<double> g(s.m * s.n);
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j)
      g[i * s.n + j] =
          double(dy[i * lddy + j]) * derivative(pre[i * lddy + j], activation);
  int bad = 0;
  auto expect = [&](double want, double magnitude, float got) {
    // g carries the approximated derivative's error (~1e-6 relative).
    if (!(std::fabs(want - got) <= 4e-6 * magnitude + 1e-6))
      ++bad;
  };
  if (wantDx)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t l = 0; l < s.k; ++l) {
        double sum = 0, magnitude = 0;
        for (int64_t j = 0; j < s.n; ++j) {
          double wv = transposed ? w[j * ldw + l] : w[l * ldw + j];
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
          sum += g[i * s.n + j] * x[i * ldx + l];
          magnitude += std::fabs(g[i * s.n + j] * x[i * ldx + l]);
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
    std::printf("FAIL backward m=%lld n=%lld k=%lld transposed=%d "
                "dw_transposed=%d act=%d gradients=%d: %d wrong elements\n",
                (long long)s.m, (long long)s.n, (long long)s.k, transposed,
                dwTransposed, activation, gradients, bad);
  }
}

} // namespace

int main() {
  std::mt19937 rng(7);
  const Shape shapes[] = {{1, 1, 1},     {1, 64, 32},    {7, 13, 5},
                          {33, 65, 127}, {300, 257, 31}, {2, 3, 1000},
                          {513, 129, 64}};
  for (const Shape &s : shapes)
    for (bool transposed : {true, false})
      for (bool withBias : {true, false})
        for (int activation = ZEST_ACTIVATION_NONE;
             activation <= ZEST_ACTIVATION_SILU; ++activation)
          for (bool keepPre : {false, true})
            check(s, transposed, withBias, activation, keepPre, rng);
  // An output of more than one row block (8 MiB): 2 blocks and a partial.
  for (int activation :
       {int(ZEST_ACTIVATION_NONE), int(ZEST_ACTIVATION_GELU_TANH)})
    for (bool keepPre : {false, true})
      check({4500, 1025, 3}, true, true, activation, keepPre, rng);
  for (const Shape &s : shapes)
    for (bool transposed : {true, false})
      for (bool dwTransposed : {true, false})
        for (int activation = ZEST_ACTIVATION_NONE;
             activation <= ZEST_ACTIVATION_SILU; ++activation)
          for (int gradients : {int(kInput), int(kWeight), int(kBias),
                                kInput | kWeight | kBias})
            checkBackward(s, transposed, dwTransposed, activation, gradients,
                          rng);
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
