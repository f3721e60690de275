//===- FusedLinearTest.cpp - zest_linear_forward against a reference ------===//
//
// Every activation, with and without bias, plain and transposed weights,
// with and without the kept pre-activation, over shapes with odd sizes,
// one row, and outputs spanning several row blocks; each against a double-
// precision reference, with an error bound scaled by the magnitudes summed.
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
