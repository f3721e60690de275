//===- CudaLinearTest.cpp - cuBLASLt products against the CPU kernels -----===//
//
// zest_cuda_linear_forward / _backward (f32, bf16 and f16), zest_cuda_sgemm
// (_batched) and zest_cuda_widening_gemm(_batched) on device buffers against
// the CPU kernels of zest_runtime.h on the same inputs: every activation (each
// forward epilogue and the elementwise fallbacks), with and without bias, with
// and without the kept pre-activation, plain and transposed weights and weight
// gradients, shapes with odd sizes, one row, and K not a multiple of any tile.
// f32 results agree within a bound scaled by the summed magnitudes; bf16 and
// f16 results within four unit roundoffs of the f32 result. Run under
// ZEST_BACKEND=nccl; prints "cuda-linear: N cases, M failures"
// (test/Runtime/cuda-linear.test).
//
//===----------------------------------------------------------------------===//

#include "../common/HalfFloat.h"
#include "DeviceBuffers.h"
#include "zest_runtime.h"
#include "zest_runtime_cuda.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

int cases = 0, failures = 0;

std::vector<float> randomMatrix(size_t n, std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

/// Compares `got` with `want` within `tolerance` per unit of magnitude.
void compare(const char *what, const std::vector<float> &got,
             const std::vector<float> &want, double scale, double tolerance,
             const char *shape) {
  ++cases;
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
  if (!(worst <= tolerance * scale)) {
    ++failures;
    std::printf("FAIL %s %s: max difference %g (allowed %g)\n", what, shape,
                worst, tolerance * scale);
  }
}

/// A 16-bit storage type: its conversions, its forward layer on the GPU and
/// its unit roundoff.
struct Format {
  const char *name;
  float (*widen)(uint16_t);
  uint16_t (*narrow)(float); // to nearest even
  decltype(&zest_cuda_linear_forward_bf16) forward;
  double unit;
};
const Format kFormats[] = {{"bf16", zest::rt::bf16ToFloat,
                            zest::rt::floatToBf16,
                            zest_cuda_linear_forward_bf16, 1.0 / 256},
                           {"f16", zest::rt::f16ToFloat, zest::rt::floatToF16,
                            zest_cuda_linear_forward_f16, 1.0 / 2048}};

std::vector<float> widen(const Format &f, const std::vector<uint16_t> &v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = f.widen(v[i]);
  return out;
}

std::vector<uint16_t> narrow(const Format &f, const std::vector<float> &v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = f.narrow(v[i]);
  return out;
}

struct Shape {
  int64_t m, n, k;
};

/// One forward and backward case in f32, and again with bf16 and f16
/// storage (the CPU reference computing on the rounded inputs in f32).
void checkLayer(const Shape &s, int activation, bool bias, bool keepPre,
                bool wTransposed, bool dwTransposed, std::mt19937 &rng) {
  char shape[128];
  std::snprintf(shape, sizeof shape,
                "%lldx%lldx%lld act %d bias %d pre %d wT %d dwT %d",
                (long long)s.m, (long long)s.n, (long long)s.k, activation,
                bias, keepPre, wTransposed, dwTransposed);
  int64_t m = s.m, n = s.n, k = s.k;
  int64_t ldw = wTransposed ? k : n, lddw = dwTransposed ? k : n;
  std::vector<float> x = randomMatrix(m * k, rng), w = randomMatrix(n * k, rng),
                     b = randomMatrix(n, rng), dy = randomMatrix(m * n, rng);
  // The CPU reference.
  std::vector<float> pre(m * n), y(m * n), dx(m * k), dw(n * k), db(n);
  zest_linear_forward(m, n, k, x.data(), k, w.data(), ldw, wTransposed,
                      bias ? b.data() : nullptr, activation, pre.data(), n,
                      y.data(), n);
  zest_linear_backward(m, n, k, dy.data(), n, pre.data(), n, activation,
                       x.data(), k, w.data(), ldw, wTransposed, dx.data(), k,
                       dw.data(), lddw, dwTransposed, db.data());
  double scale = double(k) + 1;

  // f32 on the GPU.
  float *dX = toDevice(x), *dW = toDevice(w), *dB = toDevice(b),
        *dDy = toDevice(dy), *dPre = toDevice(std::vector<float>(m * n)),
        *dY = toDevice(std::vector<float>(m * n)),
        *dDx = toDevice(std::vector<float>(m * k)),
        *dDw = toDevice(std::vector<float>(n * k)),
        *dDb = toDevice(std::vector<float>(n));
  zest_cuda_linear_forward(m, n, k, dX, k, dW, ldw, wTransposed,
                           bias ? dB : nullptr, activation,
                           keepPre ? dPre : nullptr, n, dY, n);
  compare("forward f32 y", toHost(dY, m * n), y, scale, 1e-5, shape);
  if (keepPre) {
    compare("forward f32 pre", toHost(dPre, m * n), pre, scale, 1e-5, shape);
    zest_cuda_linear_backward(m, n, k, dDy, n, dPre, n, activation, dX, k, dW,
                              ldw, wTransposed, dDx, k, dDw, lddw, dwTransposed,
                              dDb);
    compare("backward f32 dx", toHost(dDx, m * k), dx, double(n) + 1, 1e-5,
            shape);
    compare("backward f32 dw", toHost(dDw, n * k), dw, double(m) + 1, 1e-5,
            shape);
    compare("backward f32 db", toHost(dDb, n), db, double(m) + 1, 1e-5, shape);
  }
  for (void *p : {(void *)dX, (void *)dW, (void *)dB, (void *)dDy, (void *)dPre,
                  (void *)dY, (void *)dDx, (void *)dDw, (void *)dDb})
    cudaFree(p);

  // 16-bit storage: the reference on the rounded inputs; each stored result
  // may differ by a rounding or two.
  for (const Format &f : kFormats) {
    std::vector<uint16_t> xh = narrow(f, x), wh = narrow(f, w),
                          bh = narrow(f, b);
    std::vector<float> xr = widen(f, xh), wr = widen(f, wh), br = widen(f, bh);
    zest_linear_forward(m, n, k, xr.data(), k, wr.data(), ldw, wTransposed,
                        bias ? br.data() : nullptr, activation, pre.data(), n,
                        y.data(), n);
    uint16_t *hX = toDevice(xh), *hW = toDevice(wh), *hB = toDevice(bh),
             *hPre = toDevice(std::vector<uint16_t>(m * n)),
             *hY = toDevice(std::vector<uint16_t>(m * n));
    f.forward(m, n, k, hX, k, hW, ldw, wTransposed, bias ? hB : nullptr,
              activation, keepPre ? hPre : nullptr, n, hY, n);
    double magnitude = 0;
    for (float v : y)
      magnitude = std::max(magnitude, double(std::fabs(v)));
    std::string what = std::string("forward ") + f.name + " y";
    compare(what.c_str(), widen(f, toHost(hY, m * n)), y, magnitude + 1,
            4 * f.unit, shape);
    for (void *p :
         {(void *)hX, (void *)hW, (void *)hB, (void *)hPre, (void *)hY})
      cudaFree(p);
  }
}

void checkSgemm(const Shape &s, bool transA, bool transB, bool accumulate,
                int64_t batch, std::mt19937 &rng) {
  char shape[96];
  std::snprintf(shape, sizeof shape, "%lldx%lldx%lld tA %d tB %d acc %d b %lld",
                (long long)s.m, (long long)s.n, (long long)s.k, transA, transB,
                accumulate, (long long)batch);
  int64_t lda = transA ? s.m : s.k, ldb = transB ? s.k : s.n;
  int64_t sa = s.m * s.k, sb = s.k * s.n, sc = s.m * s.n;
  std::vector<float> a = randomMatrix(batch * sa, rng),
                     b = randomMatrix(batch * sb, rng),
                     c = randomMatrix(batch * sc, rng), want = c;
  zest_sgemm_batched(transA, transB, batch, s.m, s.n, s.k, a.data(), lda, sa,
                     b.data(), ldb, sb, want.data(), s.n, sc, accumulate);
  float *da = toDevice(a), *db = toDevice(b), *dc = toDevice(c);
  zest_cuda_sgemm_batched(transA, transB, batch, s.m, s.n, s.k, da, lda, sa, db,
                          ldb, sb, dc, s.n, sc, accumulate);
  compare("sgemm", toHost(dc, batch * sc), want, double(s.k) + 1, 1e-5, shape);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
}

/// zest_cuda_widening_gemm_batched_{bf16,f16} (cuBLASLt's 16-bit A and B
/// into f32 C) against the CPU's on the same 16-bit values.
void checkWideningGemm(const Format &f, const Shape &s, bool transA,
                       bool transB, bool accumulate, int64_t batch,
                       std::mt19937 &rng) {
  char shape[96];
  std::snprintf(shape, sizeof shape,
                "%s %lldx%lldx%lld tA %d tB %d acc %d b %lld", f.name,
                (long long)s.m, (long long)s.n, (long long)s.k, transA, transB,
                accumulate, (long long)batch);
  int64_t lda = transA ? s.m : s.k, ldb = transB ? s.k : s.n;
  int64_t sa = s.m * s.k, sb = s.k * s.n, sc = s.m * s.n;
  std::vector<uint16_t> a = narrow(f, randomMatrix(batch * sa, rng)),
                        b = narrow(f, randomMatrix(batch * sb, rng));
  std::vector<float> c = randomMatrix(batch * sc, rng), want = c;
  bool bf16 = std::strcmp(f.name, "bf16") == 0;
  (bf16 ? zest_widening_gemm_batched_bf16 : zest_widening_gemm_batched_f16)(
      transA, transB, batch, s.m, s.n, s.k, a.data(), lda, sa, b.data(), ldb,
      sb, want.data(), s.n, sc, accumulate);
  uint16_t *da = toDevice(a), *db = toDevice(b);
  float *dc = toDevice(c);
  (bf16 ? zest_cuda_widening_gemm_batched_bf16
        : zest_cuda_widening_gemm_batched_f16)(transA, transB, batch, s.m, s.n,
                                               s.k, da, lda, sa, db, ldb, sb,
                                               dc, s.n, sc, accumulate);
  compare("widening_gemm", toHost(dc, batch * sc), want, double(s.k) + 1, 1e-5,
          shape);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
}

} // namespace

int main(int argc, char **argv) {
  zest_init(&argc, &argv);
  if (!zest_cuda_compute_stream()) {
    std::printf("run with ZEST_BACKEND=nccl or staged\n");
    return 2;
  }
  std::mt19937 rng(11);
  const Shape shapes[] = {
      {1, 7, 5}, {8, 32, 16}, {33, 65, 17}, {128, 96, 77}, {257, 64, 129}};
  for (const Shape &s : shapes) {
    for (int activation = ZEST_ACTIVATION_NONE;
         activation <= ZEST_ACTIVATION_SILU; ++activation)
      for (bool bias : {false, true})
        for (bool keepPre : {false, true})
          checkLayer(s, activation, bias, keepPre, true, true, rng);
    checkLayer(s, ZEST_ACTIVATION_GELU_TANH, true, true, false, false, rng);
    for (bool transA : {false, true})
      for (bool transB : {false, true})
        checkSgemm(s, transA, transB, transA && transB, transA ? 3 : 1, rng);
    for (const Format &f : kFormats)
      for (bool transA : {false, true})
        checkWideningGemm(f, s, transA, !transA, transA, transA ? 2 : 1, rng);
  }
  std::printf("cuda-linear: %d cases, %d failures\n", cases, failures);
  zest_finalize();
  return failures ? 1 : 0;
}
