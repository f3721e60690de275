//===- EmulatedDeviceTest.cpp - What the emulated device refuses ----------===//
//
// Each subcommand makes one mistake a real GPU would turn into a crash, a
// hang or a wrong result, and expects the emulated device to end the job
// with a message naming it (test/Runtime/emulated-device.test):
//
//   host-collective  a collective given host memory under ZEST_BACKEND=nccl
//   host-access      the host reading device memory outside a device call
//   device-copy      a host-to-device copy whose source is device memory
//   alignment        a product on pointers less aligned than cuBLASLt's
//                    heuristic was promised (the default 256 bytes)
//   aux-ld           a GELU aux epilogue with a leading dimension of 7
//   attention-mask   attention on device arrays with its mask in host memory
//   loss-target      a cross-entropy on device logits with host targets
//   warp-divergence  half a warp at a shuffle, half at __syncwarp
//   hang             half a warp at a shuffle, half at __syncthreads
//   shared-limit     64 KiB of dynamic shared memory, never allowed
//   async-copy       cp.async from a source 8 bytes past 16-byte alignment
//   async-shared     cp.async to an address past the block's shared memory
//
//===----------------------------------------------------------------------===//

#include "../cuda-emulated/Simt.h"
#include "zest_runtime.h"
#include "zest_runtime_cuda.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace {

void hostCollective() {
  double local = 1, global = 0;
  zest_wait(zest_all_reduce_start(&local, &global, 1, ZEST_F64, ZEST_SUM,
                                  ZEST_GROUP_WORLD, "loss"));
}

void hostAccess() {
  float *device = nullptr;
  cudaMalloc(&device, 64 * sizeof(float));
  std::printf("%f\n", device[3]); // not through a copy
}

void deviceCopy() {
  float *a = nullptr, *b = nullptr;
  cudaMalloc(&a, 64);
  cudaMalloc(&b, 64);
  cudaMemcpyAsync(a, b, 64, cudaMemcpyHostToDevice, nullptr);
}

/// One 7 x 5 x 3 f32 product with `epilogue`, D at `offset` floats into
/// its allocation, with cuBLASLt's default preferences.
void product(cublasLtEpilogue_t epilogue, int64_t offset, int64_t ldaux) {
  float *a, *b, *d, *aux;
  cudaMalloc(&a, 4096), cudaMalloc(&b, 4096), cudaMalloc(&d, 4096);
  cudaMalloc(&aux, 4096);
  d += offset;
  cublasLtHandle_t handle;
  cublasLtCreate(&handle);
  cublasLtMatmulDesc_t desc;
  cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                 sizeof(epilogue));
  cublasLtMatmulDescSetAttribute(
      desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux));
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                 &ldaux, sizeof(ldaux));
  cublasLtMatrixLayout_t la, lb, ld;
  cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, 7, 3, 7);
  cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, 3, 5, 3);
  cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, 7, 5, 7);
  cublasLtMatmulPreference_t preference;
  cublasLtMatmulPreferenceCreate(&preference);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      handle, desc, la, lb, ld, ld, preference, 1, &result, &found);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
    std::fprintf(stderr, "heuristic: status %d\n", int(status));
    zest_fatal(1, "no algorithm");
  }
  float alpha = 1, beta = 0;
  status = cublasLtMatmul(handle, desc, &alpha, a, la, b, lb, &beta, d, ld, d,
                          ld, &result.algo, nullptr, 0, nullptr);
  if (status != CUBLAS_STATUS_SUCCESS)
    zest_fatal(1, "cublasLtMatmul: status %d", int(status));
}

/// Attention over one 4 x 8 head, all device memory but the boolean mask.
void attentionHostMask() {
  uint16_t *q;
  float *lse;
  cudaMalloc(&q, 4 * 8 * 2), cudaMalloc(&lse, 4 * 4);
  static uint8_t mask[4 * 4] = {1};
  zest_cuda_attention_forward_bf16(1, 1, 1, 4, 4, 8, 8, 0.35f, 0, q, q, q, mask,
                                   ZEST_ATTENTION_MASK_BOOL, 1, 1, 4, 4, q, lse,
                                   32, 32, 8, 32, 32, 8, 32, 32, 8, 32, 32, 8);
}

/// A mean cross-entropy over 4 x 10 device logits, its targets on the host.
void lossHostTarget() {
  float *logits, *loss, *lse;
  cudaMalloc(&logits, 40 * 4), cudaMalloc(&loss, 4), cudaMalloc(&lse, 16);
  static int64_t target[4] = {1, 2, 3, 4};
  zest_cuda_cross_entropy_forward(4, 10, logits, 10, target, 64, -100, 0.0f,
                                  ZEST_LOSS_MEAN, loss, lse);
}

namespace simt = zest::emulated::simt;

/// One block of `threads` running `thread` on the emulator's fibers.
void launchBlock(const char *name, int threads, size_t shared,
                 std::function<void()> thread) {
  simt::launchBlocks(name, reinterpret_cast<const void *>(&launchBlock),
                     dim3(1), dim3(threads), shared, nullptr, thread);
}

/// Lanes 0-15 shuffle, lanes 16-31 do `other`.
void halfWarpShuffles(const char *name, void (*other)()) {
  launchBlock(name, 32, 0, [other] {
    if (simt::laneIndex() < 16) {
      float v = 1;
      simt::exchange(0xffffffffu, &v, sizeof v, "__shfl_xor_sync");
    } else {
      other();
    }
  });
}

void asyncCopy(size_t sourceOffset, size_t sharedOffset) {
  char *source = nullptr;
  cudaMalloc(&source, 256);
  launchBlock("asyncCopy", 32, 64, [=] {
    simt::copyAsync(simt::dynamicShared() + sharedOffset, source + sourceOffset,
                    16, true);
    simt::commitCopies();
    simt::waitCopies(0);
  });
}

} // namespace

int main(int argc, char **argv) {
  zest_init(&argc, &argv);
  // (Also what links the CUDA backends in: Device.o defines them.)
  if (zest_cuda_device() < 0)
    return 1;
  std::string what = argc > 1 ? argv[1] : "";
  if (what == "host-collective")
    hostCollective();
  else if (what == "host-access")
    hostAccess();
  else if (what == "device-copy")
    deviceCopy();
  else if (what == "alignment")
    product(CUBLASLT_EPILOGUE_DEFAULT, 1, 0);
  else if (what == "aux-ld")
    product(CUBLASLT_EPILOGUE_GELU_AUX, 0, 7);
  else if (what == "attention-mask")
    attentionHostMask();
  else if (what == "loss-target")
    lossHostTarget();
  else if (what == "warp-divergence")
    halfWarpShuffles("warpDivergence", [] {
      simt::exchange(0xffffffffu, nullptr, 0, "__syncwarp");
    });
  else if (what == "hang")
    halfWarpShuffles("hang", [] { simt::syncThreads(); });
  else if (what == "shared-limit")
    launchBlock("sharedLimit", 32, 64 << 10, [] {});
  else if (what == "async-copy")
    asyncCopy(8, 0);
  else if (what == "async-shared")
    asyncCopy(0, 64);
  else
    zest_fatal(2, "unknown check '%s'", what.c_str());
  cudaDeviceSynchronize();
  std::printf("not caught: %s\n", what.c_str());
  zest_finalize();
  return 0;
}
