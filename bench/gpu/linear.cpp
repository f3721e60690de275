//===- linear.cpp - cuBLASLt fused linear layers vs bare products ---------===//
//
// TFLOP/s of zest_cuda_linear_forward_bf16 with bias and tanh-GELU (the
// GELU_AUX_BIAS epilogue, keeping the pre-activation) next to the same
// product without epilogue (no bias, no activation), at 4096-class bf16
// shapes; then the backward (input and weight gradients, GELU backward and
// bias gradient) next to its two bare products. 2 M N K flops forward,
// 4 M N K backward; medians of CUDA-event timings on the compute stream.
// Run under ZEST_BACKEND=nccl on one GPU:
//   ZEST_BACKEND=nccl mpirun -np 1 build/bin/zest-bench-cuda-linear [reps]
//
//===----------------------------------------------------------------------===//

#include "CudaTiming.h"
#include "zest_runtime.h"
#include "zest_runtime_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

uint16_t *deviceBf16(int64_t n) {
  // Small values (bf16 0.01) so no product overflows.
  std::vector<uint16_t> host(n, 0x3c24);
  uint16_t *device = nullptr;
  cudaMalloc(&device, n * sizeof(uint16_t));
  cudaMemcpy(device, host.data(), n * sizeof(uint16_t), cudaMemcpyHostToDevice);
  return device;
}

} // namespace

int main(int argc, char **argv) {
  zest_init(&argc, &argv);
  if (!zest_cuda_compute_stream()) {
    std::fprintf(stderr, "run with ZEST_BACKEND=nccl on a GPU\n");
    return 2;
  }
  int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  struct Shape {
    int64_t m, n, k;
  } shapes[] = {{4096, 4096, 4096},
                {8192, 4096, 4096},
                {4096, 16384, 4096},
                {4096, 4096, 16384}};
  std::printf("%-20s %12s %12s %8s %12s %12s %8s\n", "M x N x K (bf16)",
              "bare fwd", "fused fwd", "ratio", "bare bwd", "fused bwd",
              "ratio");
  for (const Shape &s : shapes) {
    uint16_t *x = deviceBf16(s.m * s.k), *w = deviceBf16(s.n * s.k),
             *b = deviceBf16(s.n), *pre = deviceBf16(s.m * s.n),
             *y = deviceBf16(s.m * s.n), *dy = deviceBf16(s.m * s.n),
             *dx = deviceBf16(s.m * s.k), *dw = deviceBf16(s.n * s.k),
             *db = deviceBf16(s.n);
    double bare = medianMs(reps, [&] {
      zest_cuda_linear_forward_bf16(s.m, s.n, s.k, x, s.k, w, s.k, 1, nullptr,
                                    ZEST_ACTIVATION_NONE, nullptr, 0, y, s.n);
    });
    double fused = medianMs(reps, [&] {
      zest_cuda_linear_forward_bf16(s.m, s.n, s.k, x, s.k, w, s.k, 1, b,
                                    ZEST_ACTIVATION_GELU_TANH, pre, s.n, y,
                                    s.n);
    });
    double bareBackward = medianMs(reps, [&] {
      zest_cuda_linear_backward_bf16(s.m, s.n, s.k, dy, s.n, nullptr, 0,
                                     ZEST_ACTIVATION_NONE, x, s.k, w, s.k, 1,
                                     dx, s.k, dw, s.k, 1, nullptr);
    });
    double fusedBackward = medianMs(reps, [&] {
      zest_cuda_linear_backward_bf16(s.m, s.n, s.k, dy, s.n, pre, s.n,
                                     ZEST_ACTIVATION_GELU_TANH, x, s.k, w, s.k,
                                     1, dx, s.k, dw, s.k, 1, db);
    });
    double flops = 2.0 * s.m * s.n * s.k;
    auto tflops = [](double f, double ms) { return f / (ms * 1e-3) / 1e12; };
    char name[48];
    std::snprintf(name, sizeof name, "%lldx%lldx%lld", (long long)s.m,
                  (long long)s.n, (long long)s.k);
    std::printf("%-20s %12.1f %12.1f %8.2f %12.1f %12.1f %8.2f\n", name,
                tflops(flops, bare), tflops(flops, fused), bare / fused,
                tflops(2 * flops, bareBackward),
                tflops(2 * flops, fusedBackward), bareBackward / fusedBackward);
    for (void *p : {(void *)x, (void *)w, (void *)b, (void *)pre, (void *)y,
                    (void *)dy, (void *)dx, (void *)dw, (void *)db})
      cudaFree(p);
  }
  zest_finalize();
  return 0;
}
