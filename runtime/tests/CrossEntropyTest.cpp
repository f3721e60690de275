//===- CrossEntropyTest.cpp - Fused cross-entropy against a reference -----===//
//
// zest_cross_entropy_forward / _backward (the CPU kernels) or, built with
// ZEST_CROSS_ENTROPY_TEST_CUDA, zest_cuda_cross_entropy_* on device
// buffers, against a double-precision reference: f32, bf16 and f16 logits
// with a row stride wider than a row; i64 and i32 targets with ignored rows
// (and every row ignored: a mean of NaN, zero gradients); reductions none,
// mean and sum; label smoothing 0 and 0.1; one class to a thousand. Then
// zest_linear_cross_entropy (the head fused into the loss, in chunks of
// rows) against the head's product, loss and gradients formed whole.
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
const int64_t kIgnore = -100;

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

/// What the loss computes, in double: each row's log-sum-exp, the loss
/// (every row's for none) and the logits' gradient given gradLoss.
struct LossReference {
  std::vector<double> lse, loss, grad;
};

LossReference referenceLoss(const std::vector<double> &x, int64_t rows,
                            int64_t classes, int64_t ld,
                            const std::vector<int64_t> &target, int reduction,
                            double smoothing,
                            const std::vector<float> &gradLoss) {
  LossReference r;
  r.lse.assign(rows, 0);
  r.grad.assign(rows * ld, 0);
  std::vector<double> rowLoss(rows, 0);
  double sum = 0;
  int64_t kept = 0;
  for (int64_t i = 0; i < rows; ++i) {
    double m = -INFINITY, s = 0, total = 0;
    for (int64_t k = 0; k < classes; ++k)
      m = std::max(m, x[i * ld + k]);
    for (int64_t k = 0; k < classes; ++k) {
      s += std::exp(x[i * ld + k] - m);
      total += x[i * ld + k];
    }
    r.lse[i] = m + std::log(s);
    if (target[i] == kIgnore)
      continue;
    ++kept;
    rowLoss[i] = r.lse[i] - (1 - smoothing) * x[i * ld + target[i]] -
                 smoothing / double(classes) * total;
    sum += rowLoss[i];
  }
  if (reduction == ZEST_LOSS_NONE)
    r.loss = rowLoss;
  else
    r.loss = {reduction == ZEST_LOSS_MEAN ? sum / double(kept) : sum};
  for (int64_t i = 0; i < rows; ++i) {
    if (target[i] == kIgnore)
      continue;
    double g = gradLoss[reduction == ZEST_LOSS_NONE ? i : 0];
    if (reduction == ZEST_LOSS_MEAN)
      g /= double(kept);
    for (int64_t k = 0; k < classes; ++k)
      r.grad[i * ld + k] = g * (std::exp(x[i * ld + k] - r.lse[i]) -
                                (k == target[i] ? 1 - smoothing : 0) -
                                smoothing / double(classes));
  }
  return r;
}

void check(const Config &c, std::mt19937 &rng) {
  const int64_t ignore = kIgnore;
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
  std::vector<float> gradLoss(c.reduction == ZEST_LOSS_NONE ? c.rows : 1);
  for (float &g : gradLoss)
    g = float(dist(rng));
  LossReference want = referenceLoss(x, c.rows, c.classes, c.ld, t64,
                                     c.reduction, c.smoothing, gradLoss);
  const std::vector<double> &lse = want.lse, &loss = want.loss,
                            &grad = want.grad;
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

/// A case of zest_linear_cross_entropy: the head's sizes, the rows per
/// chunk, its layouts, which gradients it computes, the loss and the
/// storage (0 f32, 1 bf16, 2 f16).
struct LinearConfig {
  int64_t rows, classes, k, chunk;
  bool wTransposed, dwTransposed, withDx, withDw;
  int reduction, targetBits;
  float smoothing;
  int storage;
  bool allIgnored;
};

/// `v` rounded to `storage` (0 f32, 1 bf16, 2 f16), and its bits.
double roundTo(double v, int storage) {
  if (storage == 0)
    return float(v);
  return toDouble(storage == 1 ? zest::rt::floatToBf16(float(v))
                               : zest::rt::floatToF16(float(v)),
                  storage);
}
uint16_t bitsOf(float v, int storage) {
  return storage == 1 ? zest::rt::floatToBf16(v) : zest::rt::floatToF16(v);
}

/// `rows` x `cols` values in [-1, 1], representable in `storage`, with row
/// stride `ld` (the padding 0).
std::vector<double> randomMatrix(int64_t rows, int64_t cols, int64_t ld,
                                 int storage, std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<double> m(rows * ld, 0.0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      m[i * ld + j] = roundTo(dist(rng), storage);
  return m;
}

/// A host vector as the kernels take it: itself on the CPU, a device copy
/// for the CUDA runtime (read back by `fromKernel`).
template <typename T> T *forKernel(std::vector<T> &host) {
#ifdef ZEST_CROSS_ENTROPY_TEST_CUDA
  return toDevice(host);
#else
  return host.data();
#endif
}
template <typename T> std::vector<double> fromKernel(const T *data, size_t n) {
#ifdef ZEST_CROSS_ENTROPY_TEST_CUDA
  std::vector<T> host = toHost(data, n);
#else
  std::vector<T> host(data, data + n);
#endif
  return std::vector<double>(host.begin(), host.end());
}

/// The [rows, cols] part of a matrix with row stride ld.
std::vector<double> packed(const std::vector<double> &m, int64_t rows,
                           int64_t cols, int64_t ld) {
  std::vector<double> out(rows * cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      out[i * cols + j] = m[i * ld + j];
  return out;
}

/// The head's inputs in the kernels' storage: f32, or 16-bit patterns.
struct Stored {
  std::vector<float> f32;
  std::vector<uint16_t> bits;

  Stored(const std::vector<double> &values, int storage) {
    for (double v : values)
      storage == 0 ? f32.push_back(float(v))
                   : bits.push_back(bitsOf(float(v), storage));
  }
  void *forKernel() {
    return f32.empty() ? (void *)::forKernel(bits) : (void *)::forKernel(f32);
  }
};

/// The reference: the whole logits (rounded to the storage, as the kernel
/// stores them), their loss, the gradient rounded likewise, and the head's
/// gradients from it, in double.
struct LinearReference {
  LossReference loss;
  std::vector<double> dx, dw;
};

LinearReference referenceHead(const LinearConfig &c,
                              const std::vector<double> &x, int64_t ldx,
                              const std::vector<double> &w, int64_t ldw,
                              const std::vector<int64_t> &target,
                              const std::vector<float> &gradLoss) {
  auto weight = [&](int64_t cls, int64_t q) {
    return c.wTransposed ? w[cls * ldw + q] : w[q * ldw + cls];
  };
  std::vector<double> logits(c.rows * c.classes, 0);
  for (int64_t i = 0; i < c.rows; ++i)
    for (int64_t j = 0; j < c.classes; ++j) {
      double sum = 0;
      for (int64_t q = 0; q < c.k; ++q)
        sum += x[i * ldx + q] * weight(j, q);
      logits[i * c.classes + j] = roundTo(sum, c.storage);
    }
  LinearReference r;
  r.loss = referenceLoss(logits, c.rows, c.classes, c.classes, target,
                         c.reduction, c.smoothing, gradLoss);
  r.dx.assign(c.rows * c.k, 0);
  r.dw.assign(c.classes * c.k, 0);
  for (int64_t i = 0; i < c.rows; ++i)
    for (int64_t j = 0; j < c.classes; ++j) {
      double g = roundTo(r.loss.grad[i * c.classes + j], c.storage);
      for (int64_t q = 0; q < c.k; ++q) {
        r.dx[i * c.k + q] += g * weight(j, q);
        r.dw[c.dwTransposed ? j * c.k + q : q * c.classes + j] +=
            g * x[i * ldx + q];
      }
    }
  return r;
}

/// zest_linear_cross_entropy against the head's product, the loss and the
/// head's gradients computed whole in double.
void checkLinear(const LinearConfig &c, std::mt19937 &rng) {
  int64_t ldx = c.k + 2, wCols = c.wTransposed ? c.k : c.classes,
          ldw = wCols + 1;
  std::vector<double> x = randomMatrix(c.rows, c.k, ldx, c.storage, rng),
                      w = randomMatrix(c.wTransposed ? c.classes : c.k, wCols,
                                       ldw, c.storage, rng);
  std::uniform_int_distribution<int64_t> cls(0, c.classes - 1);
  std::bernoulli_distribution ignored(0.25);
  std::vector<int64_t> t64(c.rows);
  std::vector<int32_t> t32(c.rows);
  for (int64_t i = 0; i < c.rows; ++i) {
    t64[i] = c.allIgnored || ignored(rng) ? kIgnore : cls(rng);
    t32[i] = int32_t(t64[i]);
  }
  std::vector<float> gradLoss = {
      std::uniform_real_distribution<float>(-2, 2)(rng)};
  LinearReference want = referenceHead(c, x, ldx, w, ldw, t64, gradLoss);
  // The kernel, with every destination's row stride wider than its rows
  // and the gradients' old contents NaN (written, never read).
  int64_t dwRows = c.dwTransposed ? c.classes : c.k,
          dwCols = c.dwTransposed ? c.k : c.classes;
  int64_t ldLogits = c.classes + 3, lddx = c.k + 1, lddw = dwCols + 2;
  Stored storedX(x, c.storage), storedW(w, c.storage),
      workspace(std::vector<double>(c.chunk * ldLogits), c.storage);
  std::vector<float> lse(c.rows), loss(1), gotDx(c.rows * lddx, NAN),
      gotDw(dwRows * lddw, NAN);
  void *dX = storedX.forKernel(), *dW = storedW.forKernel(),
       *dWork = workspace.forKernel();
  float *dGrad = forKernel(gradLoss), *dLse = forKernel(lse),
        *dLoss = forKernel(loss), *dDx = forKernel(gotDx),
        *dDw = forKernel(gotDw);
  void *dTarget =
      c.targetBits == 32 ? (void *)forKernel(t32) : (void *)forKernel(t64);
#define ZEST_TEST_LINEAR_CALL(SUFFIX, T)                                       \
  ZEST_TEST_ENTRY(linear_cross_entropy##SUFFIX)                                \
  (c.rows, c.classes, c.k, static_cast<const T *>(dX), ldx,                    \
   static_cast<const T *>(dW), ldw, c.wTransposed, dTarget, c.targetBits,      \
   kIgnore, c.smoothing, c.reduction, dGrad, c.chunk, static_cast<T *>(dWork), \
   ldLogits, dLse, dLoss, c.withDx ? dDx : nullptr, lddx,                      \
   c.withDw ? dDw : nullptr, lddw, c.dwTransposed)
  if (c.storage == 0)
    ZEST_TEST_LINEAR_CALL(, float);
  else if (c.storage == 1)
    ZEST_TEST_LINEAR_CALL(_bf16, uint16_t);
  else
    ZEST_TEST_LINEAR_CALL(_f16, uint16_t);
  char name[160];
  std::snprintf(name, sizeof name,
                "linear rows %lld classes %lld k %lld chunk %lld w%s dw%s "
                "reduction %d smoothing %g i%d storage %d%s",
                (long long)c.rows, (long long)c.classes, (long long)c.k,
                (long long)c.chunk, c.wTransposed ? "^T" : "",
                c.dwTransposed ? "^T" : "", c.reduction, c.smoothing,
                c.targetBits, c.storage, c.allIgnored ? " all ignored" : "");
  // 16-bit: a logit or gradient may round the other way than the
  // reference's (f32 vs double sums before rounding).
  double tolerance = c.storage == 0 ? 1e-5 : c.storage == 1 ? 2e-2 : 3e-3;
  checks.compare("loss", fromKernel(dLoss, 1), want.loss.loss, tolerance, name);
  checks.compare("lse", fromKernel(dLse, c.rows), want.loss.lse, tolerance,
                 name);
  if (c.withDx)
    checks.compare("dx",
                   packed(fromKernel(dDx, gotDx.size()), c.rows, c.k, lddx),
                   want.dx, tolerance, name);
  if (c.withDw)
    checks.compare("dw",
                   packed(fromKernel(dDw, gotDw.size()), dwRows, dwCols, lddw),
                   want.dw, tolerance, name);
}

/// Heads of one chunk, of several with a partial last one, of a chunk per
/// row; both weight layouts, both gradient layouts, either gradient alone;
/// f32, then bf16 and f16 (autocast's) on fewer shapes.
void checkLinearCases(std::mt19937 &rng) {
  const int64_t shapes[][4] = {{1, 1, 1, 1},
                               {7, 5, 3, 3},
                               {16, 50, 8, 16},
                               {37, 50, 9, 8},
                               {33, 300, 17, 1}};
  for (int storage = 0; storage < 3; ++storage)
    for (auto [rows, classes, k, chunk] : shapes)
      for (bool wT : {true, false})
        for (bool dwT : {true, false})
          for (int reduction : {ZEST_LOSS_MEAN, ZEST_LOSS_SUM})
            for (float smoothing : {0.0f, 0.1f})
              for (int grads : {3, 1, 2})
                if (storage == 0 || (smoothing == 0.0f && grads == 3))
                  checkLinear({rows, classes, k, chunk, wT, dwT,
                               bool(grads & 1), bool(grads & 2), reduction,
                               rows % 2 ? 64 : 32, smoothing, storage, false},
                              rng);
  checkLinear(
      {6, 4, 3, 4, true, true, true, true, ZEST_LOSS_MEAN, 64, 0.0f, 0, true},
      rng);
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
  checkLinearCases(rng);
  int status = checks.report("cross-entropy");
#ifdef ZEST_CROSS_ENTROPY_TEST_CUDA
  zest_finalize();
#endif
  return status;
}
