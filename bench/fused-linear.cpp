//===- fused-linear.cpp - Fused linear kernels vs the runtime's sgemm
//------===//
//
// GFLOP/s (2 M N K per call) of the fused linear forward with bias and
// tanh-GELU, next to the runtime's bare sgemm (zest_sgemm: oneDNN or
// OpenBLAS, -DZEST_GEMM; no epilogue) and to the unfused form
// (sgemm, then a separate pass for bias and activation), on the same shapes.
// Then the backward (4 M N K: input and weight gradients) with the GELU
// backward and the bias gradient, next to the two bare sgemms and to the
// unfused form (a pass for the activation backward, one for the bias
// gradient, two sgemms).
// Medians over repetitions, one thread: run with OMP_NUM_THREADS=1
// OPENBLAS_NUM_THREADS=1.
//   zest-bench-fused-linear [reps]
//
//===----------------------------------------------------------------------===//

#include "zest_runtime.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

double medianSeconds(int reps, const auto &run) {
  std::vector<double> times;
  run(); // warm-up
  for (int i = 0; i < reps; ++i) {
    auto start = std::chrono::steady_clock::now();
    run();
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

/// One table row: GFLOP/s of each variant and the fused one's ratios.
void printRow(int64_t m, int64_t n, int64_t k, double flops, double sgemm,
              double fused, double unfused) {
  char name[32];
  std::snprintf(name, sizeof name, "%lldx%lldx%lld", (long long)m, (long long)n,
                (long long)k);
  std::printf("%-18s %10.1f %10.1f %10.1f %8.2f %8.2f\n", name,
              flops / sgemm / 1e9, flops / fused / 1e9, flops / unfused / 1e9,
              sgemm / fused, unfused / fused);
}

} // namespace

int main(int argc, char **argv) {
  zest_select_blas_kernels(argv);
  int reps = argc > 1 ? std::atoi(argv[1]) : 7;
  struct Shape {
    int64_t m, n, k;
  } shapes[] = {{1024, 1024, 1024}, {128, 1024, 256}, {256, 2048, 512},
                {256, 512, 2048},   {16, 4096, 1024}, {4096, 256, 256}};
  std::printf("%-18s %10s %10s %10s %8s %8s\n", "M x N x K", "sgemm", "fused",
              "unfused", "f/sgemm", "f/unf");
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (const Shape &s : shapes) {
    std::vector<float> x(s.m * s.k), w(s.n * s.k), b(s.n), y(s.m * s.n),
        pre(s.m * s.n);
    for (float &v : x)
      v = dist(rng);
    for (float &v : w)
      v = dist(rng);
    for (float &v : b)
      v = dist(rng);
    double flops = 2.0 * s.m * s.n * s.k;
    double sgemm = medianSeconds(reps, [&] {
      zest_sgemm(0, 1, s.m, s.n, s.k, x.data(), s.k, w.data(), s.k, y.data(),
                 s.n, 0);
    });
    double fused = medianSeconds(reps, [&] {
      zest_linear_forward(s.m, s.n, s.k, x.data(), s.k, w.data(), s.k, 1,
                          b.data(), ZEST_ACTIVATION_GELU_TANH, pre.data(), s.n,
                          y.data(), s.n);
    });
    double unfused = medianSeconds(reps, [&] {
      zest_sgemm(0, 1, s.m, s.n, s.k, x.data(), s.k, w.data(), s.k, pre.data(),
                 s.n, 0);
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) {
          float v = pre[i * s.n + j] + b[j];
          pre[i * s.n + j] = v;
        }
      for (int64_t i = 0; i < s.m * s.n; ++i) {
        float v = pre[i];
        y[i] = 0.5f * v *
               (1.0f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
      }
    });
    printRow(s.m, s.n, s.k, flops, sgemm, fused, unfused);
  }
  std::printf("\nbackward (dx, dw, db with tanh-GELU backward)\n");
  std::printf("%-18s %10s %10s %10s %8s %8s\n", "M x N x K", "2 sgemm", "fused",
              "unfused", "f/sgemm", "f/unf");
  for (const Shape &s : shapes) {
    std::vector<float> x(s.m * s.k), w(s.n * s.k), dy(s.m * s.n),
        pre(s.m * s.n), g(s.m * s.n), dx(s.m * s.k), dw(s.n * s.k), db(s.n);
    for (std::vector<float> *v : {&x, &w, &dy, &pre})
      for (float &e : *v)
        e = dist(rng);
    double flops = 4.0 * s.m * s.n * s.k;
    auto products = [&] {
      zest_sgemm(0, 0, s.m, s.k, s.n, g.data(), s.n, w.data(), s.k, dx.data(),
                 s.k, 0);
      zest_sgemm(1, 0, s.n, s.k, s.m, g.data(), s.n, x.data(), s.k, dw.data(),
                 s.k, 0);
    };
    double sgemm = medianSeconds(reps, products);
    double fused = medianSeconds(reps, [&] {
      zest_linear_backward(s.m, s.n, s.k, dy.data(), s.n, pre.data(), s.n,
                           ZEST_ACTIVATION_GELU_TANH, x.data(), s.k, w.data(),
                           s.k, 1, dx.data(), s.k, dw.data(), s.k, 1,
                           db.data());
    });
    double unfused = medianSeconds(reps, [&] {
      const float beta = 0.7978845608f, kappa = 0.044715f;
      for (int64_t i = 0; i < s.m * s.n; ++i) {
        float v = pre[i], t = std::tanh(beta * (v + kappa * v * v * v));
        g[i] = dy[i] * (0.5f * (1 + t) + 0.5f * v * (1 - t * t) * beta *
                                             (1 + 3 * kappa * v * v));
      }
      std::fill(db.begin(), db.end(), 0.0f);
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j)
          db[j] += g[i * s.n + j];
      products();
    });
    printRow(s.m, s.n, s.k, flops, sgemm, fused, unfused);
  }
  return 0;
}
