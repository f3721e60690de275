//===- CrossEntropyTest.cpp - Fused cross-entropy against a reference -----===//
//
// zest_cross_entropy_forward / _backward (the CPU kernels) or, built with
// ZEST_CROSS_ENTROPY_TEST_CUDA, zest_cuda_cross_entropy_* on device
// buffers, against a double-precision reference: f32, bf16 and f16 logits
// with a row stride wider than a row; i64 and i32 targets with ignored rows
// (and every row ignored: a mean of NaN, zero gradients); reductions none,
// mean and sum; label smoothing 0 and 0.1; one class to a thousand.
// Prints "cross-entropy: N cases, M failures"
// (test/Runtime/cross-entropy.test).
//
//===----------------------------------------------------------------------===//

#include "../common/HalfFloat.h"
#include "ReferenceCheck.h"
#include "zest_runtime.h"
#ifdef ZEST_CROSS_ENTROPY_TEST_CUDA
#include "DeviceBuffers.h"
#include "zest_runtime_cuda.h"
#endif

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

ReferenceCheck checks;

struct Config {
  int64_t rows, classes, ld;
  int targetBits;
  int reduction;
  float smoothing;
  int storage; // 0 f32, 1 bf16, 2 f16
  bool allIgnored;
};

double toDouble(uint16_t bits, int storage) {
  return storage == 1 ? zest::rt::bf16ToFloat(bits)
                      : zest::rt::f16ToFloat(bits);
}

void check(const Config &c, std::mt19937 &rng) {
  const int64_t ignore = -100;
  std::uniform_real_distribution<double> dist(-4, 4);
  std::uniform_int_distribution<int64_t> cls(0, c.classes - 1);
  std::bernoulli_distribution ignored(0.25);
  size_t n = c.rows * c.ld;
  std::vector<float> f32(n);
  std::vector<uint16_t> bits(n);
  std::vector<double> x(n);
  for (size_t i = 0; i < n; ++i) {
    float v = float(dist(rng));
    if (c.storage == 0) {
      f32[i] = v;
      x[i] = v;
    } else {
      bits[i] =
          c.storage == 1 ? zest::rt::floatToBf16(v) : zest::rt::floatToF16(v);
      x[i] = toDouble(bits[i], c.storage);
    }
  }
  std::vector<int64_t> t64(c.rows);
  std::vector<int32_t> t32(c.rows);
  for (int64_t i = 0; i < c.rows; ++i) {
    t64[i] = c.allIgnored || ignored(rng) ? ignore : cls(rng);
    t32[i] = int32_t(t64[i]);
  }
  // The reference.
  std::vector<double> lse(c.rows), rowLoss(c.rows), grad(c.rows * c.ld, 0);
  double sum = 0;
  int64_t kept = 0;
  for (int64_t i = 0; i < c.rows; ++i) {
    double m = -INFINITY, s = 0, total = 0;
    for (int64_t k = 0; k < c.classes; ++k)
      m = std::max(m, x[i * c.ld + k]);
    for (int64_t k = 0; k < c.classes; ++k) {
      s += std::exp(x[i * c.ld + k] - m);
      total += x[i * c.ld + k];
    }
    lse[i] = m + std::log(s);
    if (t64[i] == ignore)
      continue;
    ++kept;
    rowLoss[i] = lse[i] - (1 - double(c.smoothing)) * x[i * c.ld + t64[i]] -
                 double(c.smoothing) / double(c.classes) * total;
    sum += rowLoss[i];
  }
  std::vector<double> loss;
  if (c.reduction == ZEST_LOSS_NONE)
    loss = rowLoss;
  else
    loss = {c.reduction == ZEST_LOSS_MEAN ? sum / double(kept) : sum};
  std::vector<float> gradLoss(loss.size());
  for (float &g : gradLoss)
    g = float(dist(rng));
  for (int64_t i = 0; i < c.rows; ++i) {
    if (t64[i] == ignore)
      continue;
    double g = gradLoss[c.reduction == ZEST_LOSS_NONE ? i : 0];
    if (c.reduction == ZEST_LOSS_MEAN)
      g /= double(kept);
    for (int64_t k = 0; k < c.classes; ++k)
      grad[i * c.ld + k] = g * (std::exp(x[i * c.ld + k] - lse[i]) -
                                (k == t64[i] ? 1 - double(c.smoothing) : 0) -
                                double(c.smoothing) / double(c.classes));
  }
  // The kernels.
  size_t eb = c.storage == 0 ? 4 : 2;
  std::vector<char> logits(n * eb), dx(n * eb, 0);
  std::memcpy(logits.data(), c.storage == 0 ? (void *)f32.data() : bits.data(),
              n * eb);
  const void *target =
      c.targetBits == 32 ? (const void *)t32.data() : (const void *)t64.data();
  size_t targetBytes = c.rows * (c.targetBits / 8);
  std::vector<float> gotLoss(loss.size()), gotLse(c.rows);
#ifdef ZEST_CROSS_ENTROPY_TEST_CUDA
  auto upload = [](const void *host, size_t bytes) -> char * {
    std::vector<char> copy(static_cast<const char *>(host),
                           static_cast<const char *>(host) + bytes);
    return toDevice(copy);
  };
  char *dLogits = upload(logits.data(), logits.size()),
       *dTarget = upload(target, targetBytes),
       *dDx = upload(dx.data(), dx.size());
  float *dLoss = toDevice(gotLoss), *dLse = toDevice(gotLse),
        *dGrad = toDevice(gradLoss);
#define ZEST_TEST_ENTRY(NAME) zest_cuda_##NAME
#else
  char *dLogits = logits.data(), *dDx = dx.data();
  const void *dTarget = target;
  float *dLoss = gotLoss.data(), *dLse = gotLse.data(),
        *dGrad = gradLoss.data();
  (void)targetBytes;
#define ZEST_TEST_ENTRY(NAME) zest_##NAME
#endif
#define ZEST_TEST_CALLS(SUFFIX, T)                                             \
  ZEST_TEST_ENTRY(cross_entropy_forward##SUFFIX)                               \
  (c.rows, c.classes, reinterpret_cast<const T *>(dLogits), c.ld, dTarget,     \
   c.targetBits, ignore, c.smoothing, c.reduction, dLoss, dLse);               \
  ZEST_TEST_ENTRY(cross_entropy_backward##SUFFIX)                              \
  (c.rows, c.classes, reinterpret_cast<const T *>(dLogits), c.ld, dTarget,     \
   c.targetBits, ignore, c.smoothing, c.reduction, dGrad, dLse,                \
   reinterpret_cast<T *>(dDx), c.ld)
  if (c.storage == 0) {
    ZEST_TEST_CALLS(, float);
  } else if (c.storage == 1) {
    ZEST_TEST_CALLS(_bf16, uint16_t);
  } else {
    ZEST_TEST_CALLS(_f16, uint16_t);
  }
#ifdef ZEST_CROSS_ENTROPY_TEST_CUDA
  gotLoss = toHost(dLoss, gotLoss.size());
  gotLse = toHost(dLse, gotLse.size());
  dx = toHost(dDx, dx.size());
#endif
  std::vector<double> gotGrad(n, 0);
  for (int64_t i = 0; i < c.rows; ++i)
    for (int64_t k = 0; k < c.classes; ++k) {
      size_t at = i * c.ld + k;
      if (c.storage == 0) {
        float v;
        std::memcpy(&v, dx.data() + at * 4, 4);
        gotGrad[at] = v;
      } else {
        uint16_t b;
        std::memcpy(&b, dx.data() + at * 2, 2);
        gotGrad[at] = toDouble(b, c.storage);
      }
    }
  double tolerance = c.storage == 0 ? 1e-5 : c.storage == 1 ? 2e-2 : 3e-3;
  char name[128];
  std::snprintf(name, sizeof name,
                "rows %lld classes %lld ld %lld i%d reduction %d smoothing "
                "%g storage %d%s",
                (long long)c.rows, (long long)c.classes, (long long)c.ld,
                c.targetBits, c.reduction, c.smoothing, c.storage,
                c.allIgnored ? " all ignored" : "");
  checks.compare("loss", std::vector<double>(gotLoss.begin(), gotLoss.end()),
                 loss, 1e-5, name);
  checks.compare("lse", std::vector<double>(gotLse.begin(), gotLse.end()), lse,
                 1e-5, name);
  checks.compare("grad", gotGrad, grad, tolerance, name);
}

} // namespace

int main(int argc, char **argv) {
#ifdef ZEST_CROSS_ENTROPY_TEST_CUDA
  // The mean's scratch comes from the runtime's pool.
  zest_init(&argc, &argv);
  if (!zest_cuda_compute_stream()) {
    std::printf("run with ZEST_BACKEND=nccl or staged\n");
    return 2;
  }
#endif
  std::mt19937 rng(11);
  const int64_t shapes[][2] = {{1, 1}, {5, 3}, {37, 50}, {9, 1000}};
  for (int storage = 0; storage < 3; ++storage)
    for (auto [rows, classes] : shapes)
      for (int reduction = 0; reduction < 3; ++reduction)
        for (float smoothing : {0.0f, 0.1f})
          for (int bits : {64, 32})
            check({rows, classes, classes + 3, bits, reduction, smoothing,
                   storage, false},
                  rng);
  for (int reduction = 0; reduction < 3; ++reduction)
    check({4, 7, 7, 64, reduction, 0.0f, 0, true}, rng);
  int status = checks.report("cross-entropy");
#ifdef ZEST_CROSS_ENTROPY_TEST_CUDA
  zest_finalize();
#endif
  return status;
}
