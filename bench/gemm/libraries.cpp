//===- libraries.cpp - sgemm of BLAS libraries side by side --------------===//
//
// Times single-precision matrix products on the shapes of a transformer
// training step with 128 tokens per micro-batch (forward, input and weight
// gradients of each linear layer, the head, attention's per-head products)
// in every library given, one thread each, in one process so that they see
// the same machine state:
//   zest-bench-gemm NAME=LIB.so[:SYMBOL] ...
// where SYMBOL is cblas_sgemm (OpenBLAS, BLIS, MKL; the default) or
// dnnl_sgemm (oneDNN). Prints GFLOP/s per shape and library (median of
// repetitions), the time of the whole set, and the fraction of the peak
// given by --peak-gflops.
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <string>
#include <vector>

namespace {

using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float *,
                            int, const float *, int, float, float *, int);
using DnnlSgemm = int (*)(char, char, int64_t, int64_t, int64_t, float,
                          const float *, int64_t, const float *, int64_t, float,
                          float *, int64_t);

constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

struct Library {
  std::string name;
  CblasSgemm cblas = nullptr;
  DnnlSgemm dnnl = nullptr;

  void sgemm(bool ta, bool tb, int m, int n, int k, const float *a, int lda,
             const float *b, int ldb, float *c, int ldc) const {
    if (cblas)
      cblas(kRowMajor, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans, m, n, k,
            1.0f, a, lda, b, ldb, 0.0f, c, ldc);
    else
      dnnl(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, 0.0f,
           c, ldc);
  }
};

/// C[m,n] = op(A) op(B) with op(A) [m,k] and op(B) [k,n], row-major.
struct Shape {
  const char *what;
  bool ta, tb;
  int m, n, k, count; // count: how often a GPT-2 124M step runs it
};

// GPT-2 124M (D=768, 12 layers, vocab 50257) at 128 tokens: forward x*W,
// input gradient dy*W^T, weight gradient x^T*dy, per layer and per
// head; counts per step.
const Shape kShapes[] = {
    {"qkv   x*W    128x2304x768", false, false, 128, 2304, 768, 12},
    {"qkv   dy*W^T 128x768x2304", false, true, 128, 768, 2304, 12},
    {"qkv   x^T*dy 768x2304x128", true, false, 768, 2304, 128, 12},
    {"proj  x*W    128x768x768", false, false, 128, 768, 768, 12},
    {"proj  dy*W^T 128x768x768", false, true, 128, 768, 768, 12},
    {"proj  x^T*dy 768x768x128", true, false, 768, 768, 128, 12},
    {"fc    x*W    128x3072x768", false, false, 128, 3072, 768, 12},
    {"fc    dy*W^T 128x768x3072", false, true, 128, 768, 3072, 12},
    {"fc    x^T*dy 768x3072x128", true, false, 768, 3072, 128, 12},
    {"out   x*W    128x768x3072", false, false, 128, 768, 3072, 12},
    {"out   dy*W^T 128x3072x768", false, true, 128, 3072, 768, 12},
    {"out   x^T*dy 3072x768x128", true, false, 3072, 768, 128, 12},
    {"head  x*E^T  128x50257x768", false, true, 128, 50257, 768, 1},
    {"head  dy*E   128x768x50257", false, false, 128, 768, 50257, 1},
    {"head  dy^T*x 50257x768x128", true, false, 50257, 768, 128, 1},
    {"attn  q*k^T  128x128x64", false, true, 128, 128, 64, 144},
    {"attn  p*v    128x64x128", false, false, 128, 64, 128, 144},
};

double seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

/// Median seconds of one product, over repetitions filling ~0.2 s.
double timeShape(const Library &lib, const Shape &s, std::vector<float> &a,
                 std::vector<float> &b, std::vector<float> &c) {
  int lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
  lib.sgemm(s.ta, s.tb, s.m, s.n, s.k, a.data(), lda, b.data(), ldb, c.data(),
            s.n); // warm-up
  std::vector<double> times;
  double start = seconds();
  while (times.size() < 3 || (seconds() - start < 0.2 && times.size() < 200)) {
    double t = seconds();
    lib.sgemm(s.ta, s.tb, s.m, s.n, s.k, a.data(), lda, b.data(), ldb, c.data(),
              s.n);
    times.push_back(seconds() - t);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

Library load(const std::string &spec) {
  size_t eq = spec.find('='), colon = spec.find(':', eq);
  if (eq == std::string::npos) {
    std::fprintf(stderr, "expected NAME=LIB.so[:SYMBOL], got '%s'\n",
                 spec.c_str());
    std::exit(2);
  }
  std::string path = spec.substr(eq + 1, colon - eq - 1);
  std::string symbol =
      colon == std::string::npos ? "cblas_sgemm" : spec.substr(colon + 1);
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    std::fprintf(stderr, "cannot load %s: %s\n", path.c_str(), dlerror());
    std::exit(2);
  }
  Library lib{spec.substr(0, eq)};
  void *fn = dlsym(handle, symbol.c_str());
  if (!fn) {
    std::fprintf(stderr, "%s has no %s\n", path.c_str(), symbol.c_str());
    std::exit(2);
  }
  if (symbol == "dnnl_sgemm")
    lib.dnnl = reinterpret_cast<DnnlSgemm>(fn);
  else
    lib.cblas = reinterpret_cast<CblasSgemm>(fn);
  return lib;
}

} // namespace

int main(int argc, char **argv) {
  double peak = 0;
  std::vector<Library> libs;
  for (int i = 1; i < argc; ++i) {
    if (!std::strncmp(argv[i], "--peak-gflops=", 14))
      peak = std::atof(argv[i] + 14);
    else
      libs.push_back(load(argv[i]));
  }
  if (libs.empty()) {
    std::fprintf(stderr,
                 "usage: %s [--peak-gflops=G] NAME=LIB.so[:SYMBOL]...\n",
                 argv[0]);
    return 2;
  }
  size_t sizeA = 0, sizeB = 0, sizeC = 0;
  for (const Shape &s : kShapes) {
    sizeA = std::max(sizeA, size_t(s.m) * s.k);
    sizeB = std::max(sizeB, size_t(s.k) * s.n);
    sizeC = std::max(sizeC, size_t(s.m) * s.n);
  }
  std::vector<float> a(sizeA), b(sizeB), c(sizeC);
  for (size_t i = 0; i < sizeA; ++i)
    a[i] = float(i % 17) / 17.0f - 0.5f;
  for (size_t i = 0; i < sizeB; ++i)
    b[i] = float(i % 13) / 13.0f - 0.5f;
  std::printf("%-30s", "GFLOP/s (median)");
  for (const Library &lib : libs)
    std::printf(" %10s", lib.name.c_str());
  std::printf("\n");
  std::vector<double> total(libs.size(), 0.0);
  double flops = 0;
  for (const Shape &s : kShapes) {
    double f = 2.0 * s.m * s.n * s.k;
    flops += f * s.count;
    std::printf("%-30s", s.what);
    for (size_t l = 0; l < libs.size(); ++l) {
      double t = timeShape(libs[l], s, a, b, c);
      total[l] += t * s.count;
      std::printf(" %10.1f", f / t / 1e9);
    }
    std::printf("\n");
  }
  std::printf("%-30s", "GPT-2 step's products, ms");
  for (double t : total)
    std::printf(" %10.1f", t * 1e3);
  std::printf("\n%-30s", "overall GFLOP/s");
  for (double t : total)
    std::printf(" %10.1f", flops / t / 1e9);
  if (peak > 0) {
    std::printf("\n%-30s", "fraction of peak");
    for (double t : total)
      std::printf(" %10.2f", flops / t / 1e9 / peak);
  }
  std::printf("\n");
  return 0;
}
