//===- attention.cpp - Fused attention kernels on one GPU -----------------===//
//
// Milliseconds and TFLOP/s of zest_cuda_attention_forward / _backward,
// causal, at the shapes of the benchmarked models (GPT-2 124M and a
// grouped-query Llama at 8 x 512 tokens, a 128-wide head at 2 x 2048), f32
// and bf16: the flash kernels in bf16 (=flash, 16-bit storage's default), the
// tiled kernels (=tiled; f32's default), the WMMA kernels in bf16
// (=tensor-cores) and, with --reference, the reference kernels too
// (=reference; not at 2048 tokens, where a call takes seconds). A causal
// forward counts 2 B H S^2 D flops (half of the scores' and the values'
// products), the backward 2.5 times that; medians of CUDA-event timings.
// bench/gpu/sdpa_torch.py prints PyTorch's SDPA at the same shapes.
//   ZEST_BACKEND=nccl mpirun -np 1 build/bin/zest-bench-cuda-attention \
//     [--reference] [reps]
//
//===----------------------------------------------------------------------===//

#include "CudaTiming.h"
#include "zest_runtime.h"
#include "zest_runtime_cuda.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace {

struct Shape {
  const char *name;
  int64_t batch, heads, kvHeads, seq, dim;
};

/// n elements of the storage type (4 or 2 bytes), uniform in [-1, 1).
void *deviceRandom(int64_t n, int bytes, std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<char> host(n * bytes);
  for (int64_t i = 0; i < n; ++i) {
    float x = dist(rng);
    if (bytes == 4) {
      std::memcpy(&host[i * 4], &x, 4);
      continue;
    }
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    uint16_t bf16 = uint16_t(bits >> 16); // truncation: values only
    std::memcpy(&host[i * 2], &bf16, 2);
  }
  void *device = nullptr;
  cudaMalloc(&device, host.size());
  cudaMemcpy(device, host.data(), host.size(), cudaMemcpyHostToDevice);
  return device;
}

/// Forward and backward milliseconds of one shape and storage type.
struct Times {
  double forward, backward;
};

Times timeShape(const Shape &s, bool bf16, int reps, std::mt19937 &rng) {
  int bytes = bf16 ? 2 : 4;
  int64_t rows = s.batch * s.heads * s.seq,
          keyRows = s.batch * s.kvHeads * s.seq;
  void *q = deviceRandom(rows * s.dim, bytes, rng),
       *k = deviceRandom(keyRows * s.dim, bytes, rng),
       *v = deviceRandom(keyRows * s.dim, bytes, rng),
       *out = deviceRandom(rows * s.dim, bytes, rng),
       *dout = deviceRandom(rows * s.dim, bytes, rng),
       *dq = deviceRandom(rows * s.dim, bytes, rng),
       *dk = deviceRandom(keyRows * s.dim, bytes, rng),
       *dv = deviceRandom(keyRows * s.dim, bytes, rng);
  float *lse = static_cast<float *>(deviceRandom(rows, 4, rng));
  float scale = 1.0f / std::sqrt(float(s.dim));
  // Contiguous [batch, heads, seq, dim] operands: their strides.
  const int64_t qb = s.heads * s.seq * s.dim, kb = s.kvHeads * s.seq * s.dim,
                hs = s.seq * s.dim, rs = s.dim;
#define ZEST_BENCH_CALLS(SUFFIX, T)                                            \
  forward = medianMs(reps, [&] {                                               \
    zest_cuda_attention_forward##SUFFIX(                                       \
        s.batch, s.heads, s.kvHeads, s.seq, s.seq, s.dim, s.dim, scale, 1,     \
        static_cast<const T *>(q), static_cast<const T *>(k),                  \
        static_cast<const T *>(v), nullptr, ZEST_ATTENTION_MASK_NONE, 1, 1, 1, \
        1, static_cast<T *>(out), lse, qb, hs, rs, kb, hs, rs, kb, hs, rs, qb, \
        hs, rs);                                                               \
  });                                                                          \
  backward = medianMs(reps, [&] {                                              \
    zest_cuda_attention_backward##SUFFIX(                                      \
        s.batch, s.heads, s.kvHeads, s.seq, s.seq, s.dim, s.dim, scale, 1,     \
        static_cast<const T *>(q), static_cast<const T *>(k),                  \
        static_cast<const T *>(v), nullptr, ZEST_ATTENTION_MASK_NONE, 1, 1, 1, \
        1, static_cast<const T *>(out), lse, static_cast<const T *>(dout),     \
        static_cast<T *>(dq), static_cast<T *>(dk), static_cast<T *>(dv), qb,  \
        hs, rs, kb, hs, rs, kb, hs, rs, qb, hs, rs, qb, hs, rs, qb, hs, rs,    \
        kb, hs, rs, kb, hs, rs);                                               \
  })
  double forward, backward;
  if (bf16) {
    ZEST_BENCH_CALLS(_bf16, uint16_t);
  } else {
    ZEST_BENCH_CALLS(, float);
  }
#undef ZEST_BENCH_CALLS
  for (void *p : {q, k, v, out, dout, dq, dk, dv, static_cast<void *>(lse)})
    cudaFree(p);
  return {forward, backward};
}

} // namespace

int main(int argc, char **argv) {
  zest_init(&argc, &argv);
  if (!zest_cuda_compute_stream()) {
    std::fprintf(stderr, "run with ZEST_BACKEND=nccl on a GPU\n");
    return 2;
  }
  bool reference = argc > 1 && std::strcmp(argv[1], "--reference") == 0;
  int reps = argc > 1 + reference ? std::atoi(argv[1 + reference]) : 10;
  const Shape shapes[] = {{"gpt2 8x512 h12 d64", 8, 12, 12, 512, 64},
                          {"llama 8x512 h32/8 d64", 8, 32, 8, 512, 64},
                          {"2x2048 h16 d128", 2, 16, 16, 2048, 128}};
  std::printf("%-24s %-5s %-9s %10s %8s %10s %8s\n", "shape (causal)", "type",
              "kernels", "fwd ms", "TFLOP/s", "bwd ms", "TFLOP/s");
  std::mt19937 rng(3);
  for (const char *kernels : {"flash", "tiled", "tensor-cores", "reference"}) {
    bool isReference = std::strcmp(kernels, "reference") == 0,
         isTensorCores = std::strcmp(kernels, "tensor-cores") == 0 ||
                         std::strcmp(kernels, "flash") == 0;
    if (isReference && !reference)
      break;
    setenv("ZEST_CUDA_ATTENTION", kernels, 1);
    for (const Shape &s : shapes)
      for (bool bf16 : {false, true}) {
        if ((isReference && s.seq > 512) || (isTensorCores && !bf16))
          continue; // seconds a call; 16-bit storage only
        Times t = timeShape(s, bf16, reps, rng);
        double flops = 2.0 * s.batch * s.heads * s.seq * s.seq * s.dim;
        auto tflops = [](double f, double ms) {
          return f / (ms * 1e-3) / 1e12;
        };
        std::printf("%-24s %-5s %-9s %10.3f %8.2f %10.3f %8.2f\n", s.name,
                    bf16 ? "bf16" : "f32", kernels, t.forward,
                    tflops(flops, t.forward), t.backward,
                    tflops(2.5 * flops, t.backward));
      }
  }
  zest_finalize();
  return 0;
}
