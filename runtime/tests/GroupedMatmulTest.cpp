//===- GroupedMatmulTest.cpp - Grouped products against a reference -------===//
//
// zest_grouped_matmul and zest_grouped_matmul_weight_grad (the CPU kernels)
// or, built with ZEST_GROUPED_MATMUL_TEST_CUDA, zest_cuda_grouped_matmul_*
// on device buffers, against a double-precision reference: f32, bf16 and
// f16 storage; both weight layouts; i32 and i64 offsets; groups covering
// every row, empty groups (first, middle, last), rows past the last end
// (written 0), and ends out of order or past the rows (clamped). The
// destinations start as NaN, so a row or slice left unwritten fails.
// Prints "grouped-matmul: N cases, M failures"
// (test/Runtime/grouped-matmul.test).
//
//===----------------------------------------------------------------------===//

#include "../common/HalfFloat.h"
#include "ReferenceCheck.h"
#include "zest_runtime.h"
#ifdef ZEST_GROUPED_MATMUL_TEST_CUDA
#include "DeviceBuffers.h"
#include "zest_runtime_cuda.h"
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace {

ReferenceCheck checks;
std::mt19937 rng(7);

enum Storage { F32, BF16, F16 };

/// A value of `storage` as the kernel stores it (f32 bits, or 16-bit).
struct Stored {
  std::vector<float> f32;
  std::vector<uint16_t> half;
};

double widen(const Stored &s, Storage storage, size_t i) {
  if (storage == F32)
    return s.f32[i];
  return storage == BF16 ? zest::rt::bf16ToFloat(s.half[i])
                         : zest::rt::f16ToFloat(s.half[i]);
}

/// `n` random values in [-1, 1] stored in `storage` (NaN with `nan`).
Stored randomStored(size_t n, Storage storage, bool nan = false) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Stored s;
  for (size_t i = 0; i < n; ++i) {
    float v = nan ? NAN : dist(rng);
    if (storage == F32)
      s.f32.push_back(v);
    else
      s.half.push_back(storage == BF16 ? zest::rt::floatToBf16(v)
                                       : zest::rt::floatToF16(v));
  }
  return s;
}

std::vector<double> widenAll(const Stored &s, Storage storage, size_t n) {
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i)
    out[i] = widen(s, storage, i);
  return out;
}

struct Case {
  int64_t rows, n, k;
  std::vector<int64_t> offsets;
  int offsetBits;
  bool transposed;
  Storage storage;

  int64_t groups() const { return int64_t(offsets.size()); }
  /// Group bounds as the kernels clamp them.
  std::vector<std::pair<int64_t, int64_t>> bounds() const {
    std::vector<std::pair<int64_t, int64_t>> b;
    int64_t begin = 0;
    for (int64_t end : offsets) {
      end = std::clamp(end, begin, rows);
      b.push_back({begin, end});
      begin = end;
    }
    return b;
  }
  std::string name() const {
    std::string s = "rows=" + std::to_string(rows) + " n=" + std::to_string(n) +
                    " k=" + std::to_string(k) + " ends=";
    for (int64_t e : offsets)
      s += std::to_string(e) + ",";
    return s + " bits=" + std::to_string(offsetBits) +
           (transposed ? " transposed" : "") +
           " storage=" + std::to_string(int(storage));
  }
};

/// The weight element (g, i, j) of the [k, n] matrix of group g.
double weightAt(const Case &c, const std::vector<double> &w, int64_t g,
                int64_t i, int64_t j) {
  int64_t base = g * c.k * c.n;
  return c.transposed ? w[base + j * c.k + i] : w[base + i * c.n + j];
}

std::vector<double> referenceForward(const Case &c,
                                     const std::vector<double> &x,
                                     const std::vector<double> &w) {
  std::vector<double> y(c.rows * c.n, 0.0);
  auto bounds = c.bounds();
  for (int64_t g = 0; g < c.groups(); ++g)
    for (int64_t r = bounds[g].first; r < bounds[g].second; ++r)
      for (int64_t j = 0; j < c.n; ++j) {
        double sum = 0;
        for (int64_t i = 0; i < c.k; ++i)
          sum += x[r * c.k + i] * weightAt(c, w, g, i, j);
        y[r * c.n + j] = sum;
      }
  return y;
}

std::vector<double> referenceWeightGrad(const Case &c,
                                        const std::vector<double> &x,
                                        const std::vector<double> &dy) {
  std::vector<double> dw(c.groups() * c.k * c.n, 0.0);
  auto bounds = c.bounds();
  for (int64_t g = 0; g < c.groups(); ++g)
    for (int64_t i = 0; i < c.k; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double sum = 0;
        for (int64_t r = bounds[g].first; r < bounds[g].second; ++r)
          sum += x[r * c.k + i] * dy[r * c.n + j];
        int64_t at = c.transposed ? j * c.k + i : i * c.n + j;
        dw[g * c.k * c.n + at] = sum;
      }
  return dw;
}

#ifdef ZEST_GROUPED_MATMUL_TEST_CUDA
/// Runs `kernel` on device copies of the operands; the destination's
/// elements back.
template <typename T, typename Kernel>
std::vector<T> run(const std::vector<T> &a, const std::vector<T> &b,
                   const void *offsets, size_t offsetBytes, std::vector<T> out,
                   Kernel kernel) {
  std::vector<char> hostOffsets(static_cast<const char *>(offsets),
                                static_cast<const char *>(offsets) +
                                    offsetBytes);
  T *da = toDevice(a), *db = toDevice(b), *dout = toDevice(out);
  char *doff = toDevice(hostOffsets);
  kernel(da, db, static_cast<const void *>(doff), dout);
  std::vector<T> result = toHost(dout, out.size());
  for (void *p : {(void *)da, (void *)db, (void *)dout, (void *)doff})
    cudaFree(p);
  return result;
}
#define ZEST_GROUPED(NAME) zest_cuda_##NAME
#else
template <typename T, typename Kernel>
std::vector<T> run(const std::vector<T> &a, const std::vector<T> &b,
                   const void *offsets, size_t, std::vector<T> out,
                   Kernel kernel) {
  kernel(a.data(), b.data(), offsets, out.data());
  return out;
}
#define ZEST_GROUPED(NAME) zest_##NAME
#endif

/// Both kernels of storage T (float or uint16_t) for one case: results as
/// stored.
template <typename T>
void runKernels(const Case &c, const std::vector<T> &x, const std::vector<T> &w,
                const std::vector<T> &dy, const void *offsets,
                size_t offsetBytes, std::vector<T> &y, std::vector<T> &dw) {
  int64_t rows = c.rows, n = c.n, k = c.k, groups = c.groups();
  int32_t bits = c.offsetBits, transposed = c.transposed;
  Storage storage = c.storage;
  y = run(x, w, offsets, offsetBytes, y,
          [&](const T *a, const T *b, const void *off, T *out) {
            if constexpr (std::is_same_v<T, float>)
              ZEST_GROUPED(grouped_matmul)
            (rows, n, k, groups, a, b, transposed, off, bits, out);
            else if (storage == BF16) ZEST_GROUPED(grouped_matmul_bf16)(
                rows, n, k, groups, a, b, transposed, off, bits, out);
            else ZEST_GROUPED(grouped_matmul_f16)(rows, n, k, groups, a, b,
                                                  transposed, off, bits, out);
          });
  dw = run(x, dy, offsets, offsetBytes, dw,
           [&](const T *a, const T *b, const void *off, T *out) {
             if constexpr (std::is_same_v<T, float>)
               ZEST_GROUPED(grouped_matmul_weight_grad)
             (rows, n, k, groups, a, b, off, bits, out, transposed);
             else if (storage == BF16)
                 ZEST_GROUPED(grouped_matmul_weight_grad_bf16)(
                     rows, n, k, groups, a, b, off, bits, out, transposed);
             else ZEST_GROUPED(grouped_matmul_weight_grad_f16)(
                 rows, n, k, groups, a, b, off, bits, out, transposed);
           });
}

void runCase(const Case &c) {
  size_t xs = c.rows * c.k, ws = c.groups() * c.k * c.n, ys = c.rows * c.n;
  Stored x = randomStored(xs, c.storage), w = randomStored(ws, c.storage),
         dy = randomStored(ys, c.storage),
         y = randomStored(ys, c.storage, true),
         dw = randomStored(ws, c.storage, true);
  std::vector<int32_t> off32(c.offsets.begin(), c.offsets.end());
  const void *offsets = c.offsetBits == 32
                            ? static_cast<const void *>(off32.data())
                            : c.offsets.data();
  size_t offsetBytes = c.offsets.size() * (c.offsetBits / 8);
  if (c.storage == F32)
    runKernels(c, x.f32, w.f32, dy.f32, offsets, offsetBytes, y.f32, dw.f32);
  else
    runKernels(c, x.half, w.half, dy.half, offsets, offsetBytes, y.half,
               dw.half);
  std::vector<double> wx = widenAll(x, c.storage, xs),
                      ww = widenAll(w, c.storage, ws),
                      wdy = widenAll(dy, c.storage, ys);
  // Sums of k (or rows) products of values in [-1, 1], rounded once.
  double tolerance = c.storage == F32 ? 1e-5 : c.storage == BF16 ? 1e-2 : 2e-3;
  checks.compare("forward", widenAll(y, c.storage, ys),
                 referenceForward(c, wx, ww), tolerance, c.name());
  checks.compare("weight_grad", widenAll(dw, c.storage, ws),
                 referenceWeightGrad(c, wx, wdy), tolerance, c.name());
}

/// Group ends for `rows` rows in `groups` groups: every row covered,
/// empty groups, a tail past the last end, or ends out of order.
std::vector<std::vector<int64_t>> groupings(int64_t rows, int64_t groups) {
  std::vector<std::vector<int64_t>> all;
  std::uniform_int_distribution<int64_t> cut(0, rows);
  std::vector<int64_t> ends(groups);
  for (int64_t &e : ends)
    e = cut(rng);
  std::sort(ends.begin(), ends.end());
  ends.back() = rows;
  all.push_back(ends); // random sizes, some maybe empty, all rows
  std::vector<int64_t> emptyFirst(groups, rows);
  emptyFirst[0] = 0;
  all.push_back(emptyFirst); // empty first group, the rest in group 1
  std::vector<int64_t> tail = ends;
  tail.back() = rows / 2;
  for (int64_t &e : tail)
    e = std::min(e, rows / 2);
  all.push_back(tail); // rows past the last end
  std::vector<int64_t> disorder = ends;
  std::reverse(disorder.begin(), disorder.end());
  disorder.push_back(rows + 5);
  all.push_back(disorder); // out of order, one past the rows
  return all;
}

} // namespace

int main(int argc, char **argv) {
#ifdef ZEST_GROUPED_MATMUL_TEST_CUDA
  // The products' cuBLASLt workspace comes from the runtime's pool.
  zest_init(&argc, &argv);
  if (!zest_cuda_compute_stream()) {
    std::printf("run with ZEST_BACKEND=nccl or staged\n");
    return 2;
  }
#endif
  const int64_t shapes[][3] = {{1, 1, 1}, {7, 3, 5}, {33, 17, 16}, {64, 8, 40}};
  for (auto [rows, n, k] : shapes)
    for (int64_t groups : {1, 3, 8})
      for (const std::vector<int64_t> &offsets : groupings(rows, groups))
        for (Storage storage : {F32, BF16, F16})
          for (bool transposed : {false, true})
            for (int bits : {32, 64})
              runCase({rows, n, k, offsets, bits, transposed, storage});
  int status = checks.report("grouped-matmul");
#ifdef ZEST_GROUPED_MATMUL_TEST_CUDA
  zest_finalize();
#endif
  return status;
}
