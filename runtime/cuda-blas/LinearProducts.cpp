//===- LinearProducts.cpp - Products and fused linear layers on cuBLASLt --===//
//
// The CUDA runtime's zest_cuda_sgemm(_batched) and zest_cuda_linear_*: the
// same contracts as the CPU kernels of zest_runtime.h (row-major, device
// pointers), ordered on the compute stream.
//
// The forward pass uses cuBLASLt's epilogues (CublasLt.h: BIAS, GELU_AUX_BIAS
// keeping the pre-activation, RELU_BIAS); activations cuBLASLt lacks (GELU
// with erf, SiLU) and ReLU with a kept pre-activation (cuBLASLt's ReLU aux
// is a bitmask) run as one elementwise kernel after a BIAS product. The
// backward pass forms g = dy * act'(pre) and the bias gradient in kernels
// (column sums in a fixed order: deterministic; EpilogueKernels.cuh), then
// two products. The backward's g comes from the runtime's pool, where
// zest-plan-memory counts it.
//
//===----------------------------------------------------------------------===//

#include "../cuda-nccl/Device.h"
#include "CublasLt.h"
#include "EpilogueKernels.cuh"
#include "zest_runtime.h"
#include "zest_runtime_cuda.h"

#include <type_traits>

using namespace zest::rt;
using namespace zest::rt::cuda;

namespace {

int64_t blocks(int64_t threads) { return (threads + 255) / 256; }

template <typename T> cudaDataType_t dataType() {
  if (std::is_same_v<T, float>)
    return CUDA_R_32F;
  return std::is_same_v<T, __half> ? CUDA_R_16F : CUDA_R_16BF;
}

template <typename T>
void linearForward(int64_t m, int64_t n, int64_t k, const T *x, int64_t ldx,
                   const T *w, int64_t ldw, int32_t wTransposed, const T *bias,
                   int32_t activation, T *pre, int64_t ldpre, T *y,
                   int64_t ldy) {
  Product p;
  p.type = dataType<T>();
  p.m = m, p.n = n, p.k = k;
  p.a = x, p.lda = ldx;
  p.b = w, p.ldb = ldw, p.transB = wTransposed != 0;
  p.bias = bias;
  // cuBLASLt's GELU aux needs a leading dimension divisible by 8; other
  // kept pre-activations take the BIAS product and a kernel.
  bool auxFits = !pre || ldpre % 8 == 0;
  bool fusedActivation = (activation == ZEST_ACTIVATION_GELU_TANH && auxFits) ||
                         (activation == ZEST_ACTIVATION_RELU && !pre) ||
                         activation == ZEST_ACTIVATION_NONE;
  if (fusedActivation) {
    p.d = y, p.ldd = ldy;
    if (activation == ZEST_ACTIVATION_GELU_TANH && pre) {
      p.epilogue =
          bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
      p.aux = pre, p.ldaux = ldpre;
    } else if (activation == ZEST_ACTIVATION_GELU_TANH) {
      p.epilogue = bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    } else if (activation == ZEST_ACTIVATION_RELU) {
      p.epilogue = bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    } else if (bias) {
      p.epilogue = CUBLASLT_EPILOGUE_BIAS;
    }
    Lt::get().run(p);
    if (activation == ZEST_ACTIVATION_NONE && pre && pre != y)
      cuda::checkCuda(cudaMemcpy2DAsync(pre, ldpre * sizeof(T), y,
                                        ldy * sizeof(T), n * sizeof(T), m,
                                        cudaMemcpyDeviceToDevice,
                                        cuda::streams.compute),
                      "copying the pre-activation");
    return;
  }
  // The product and bias into the pre-activation (or y), then y = act(pre).
  T *target = pre ? pre : y;
  int64_t ldtarget = pre ? ldpre : ldy;
  p.d = target, p.ldd = ldtarget;
  p.epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  Lt::get().run(p);
  if (m * n != 0)
    ZEST_LAUNCH(activateKernel<T>, blocks(m * n), 256, cuda::streams.compute, m,
                n, target, ldtarget, activation, y, ldy);
  cuda::checkCuda(cudaGetLastError(), "the activation kernel");
}

/// db = the column sums of g[m, n]: in two passes through cuBLASLt's
/// workspace (idle between products on the same stream) when g is tall
/// and the partial sums fit, else one thread per column.
template <typename T>
void biasGradient(int64_t m, int64_t n, const T *g, int64_t ldg, T *db) {
  constexpr int64_t kRowsPerChunk = 64;
  int64_t chunks = (m + kRowsPerChunk - 1) / kRowsPerChunk;
  void *workspace = Lt::workspaceIfCreated();
  if (chunks > 1 && workspace &&
      chunks * n * int64_t(sizeof(float)) <= ZEST_CUDA_WORKSPACE_BYTES) {
    auto *partial = static_cast<float *>(workspace);
    ZEST_LAUNCH(columnPartialKernel<T>, blocks(chunks * n), 256,
                cuda::streams.compute, m, n, g, ldg, kRowsPerChunk, partial);
    cuda::checkCuda(cudaGetLastError(), "the bias gradient's partial sums");
    ZEST_LAUNCH(columnCombineKernel<T>, blocks(n), 256, cuda::streams.compute,
                chunks, n, partial, db);
    cuda::checkCuda(cudaGetLastError(), "the bias gradient");
    return;
  }
  ZEST_LAUNCH(columnSumKernel<T>, blocks(n), 256, cuda::streams.compute, m, n,
              g, ldg, db);
  cuda::checkCuda(cudaGetLastError(), "the bias gradient kernel");
}

template <typename T>
void linearBackward(int64_t m, int64_t n, int64_t k, const T *dy, int64_t lddy,
                    const T *pre, int64_t ldpre, int32_t activation, const T *x,
                    int64_t ldx, const T *w, int64_t ldw, int32_t wTransposed,
                    T *dx, int64_t lddx, T *dw, int64_t lddw,
                    int32_t dwTransposed, T *db) {
  const T *g = dy;
  int64_t ldg = lddy;
  T *scratch = nullptr;
  if (activation != ZEST_ACTIVATION_NONE && m * n != 0) {
    scratch = static_cast<T *>(zest_pool_alloc(m * n * sizeof(T)));
    ZEST_LAUNCH(gradientKernel<T>, blocks(m * n), 256, cuda::streams.compute, m,
                n, dy, lddy, pre, ldpre, activation, scratch);
    cuda::checkCuda(cudaGetLastError(), "the activation gradient kernel");
    g = scratch, ldg = n;
  }
  if (db && n)
    biasGradient(m, n, g, ldg, db);
  if (dx) {
    // dx[m,k] = g[m,n] W[n,k], or g W^T for a [k,n] weight.
    Product p;
    p.type = dataType<T>();
    p.m = m, p.n = k, p.k = n;
    p.a = g, p.lda = ldg;
    p.b = w, p.ldb = ldw, p.transB = wTransposed == 0;
    p.d = dx, p.ldd = lddx;
    Lt::get().run(p);
  }
  if (dw) {
    // dw[n,k] = g^T x, or dw[k,n] = x^T g.
    Product p;
    p.type = dataType<T>();
    p.transA = true;
    if (dwTransposed) {
      p.m = n, p.n = k, p.k = m;
      p.a = g, p.lda = ldg, p.b = x, p.ldb = ldx;
    } else {
      p.m = k, p.n = n, p.k = m;
      p.a = x, p.lda = ldx, p.b = g, p.ldb = ldg;
    }
    p.d = dw, p.ldd = lddw;
    Lt::get().run(p);
  }
  if (scratch)
    zest_pool_free(scratch); // reused only by work later on the same stream
}

/// The 16-bit layers on uint16_t bit patterns (the C API's storage), as
/// the device type `B` (bf16 or half) the products and kernels use.
template <typename B>
void linearForward16(ZEST_linear_forward_PARAMS(uint16_t)) {
  linearForward(m, n, k, reinterpret_cast<const B *>(x), ldx,
                reinterpret_cast<const B *>(w), ldw, w_transposed,
                reinterpret_cast<const B *>(bias), activation,
                reinterpret_cast<B *>(pre), ldpre, reinterpret_cast<B *>(y),
                ldy);
}

template <typename B>
void linearBackward16(ZEST_linear_backward_PARAMS(uint16_t)) {
  linearBackward(m, n, k, reinterpret_cast<const B *>(dy), lddy,
                 reinterpret_cast<const B *>(pre), ldpre, activation,
                 reinterpret_cast<const B *>(x), ldx,
                 reinterpret_cast<const B *>(w), ldw, w_transposed,
                 reinterpret_cast<B *>(dx), lddx, reinterpret_cast<B *>(dw),
                 lddw, dw_transposed, reinterpret_cast<B *>(db));
}

/// `batch` products D = op(A) op(B) of `type` A and B into `outType` C =
/// D: the f32 products, and 16-bit ones into f32 (cuBLASLt's mixed
/// precision).
void batchedProduct(cudaDataType_t type, cudaDataType_t outType,
                    int32_t trans_a, int32_t trans_b, int64_t batch, int64_t m,
                    int64_t n, int64_t k, const void *a, int64_t lda,
                    int64_t stride_a, const void *b, int64_t ldb,
                    int64_t stride_b, void *c, int64_t ldc, int64_t stride_c,
                    int32_t accumulate) {
  if (batch == 0)
    return;
  Product p;
  p.type = type, p.outType = outType;
  p.transA = trans_a != 0, p.transB = trans_b != 0;
  p.m = m, p.n = n, p.k = k;
  p.a = a, p.lda = lda, p.b = b, p.ldb = ldb, p.d = c, p.ldd = ldc;
  p.accumulate = accumulate != 0;
  p.batch = batch, p.strideA = stride_a, p.strideB = stride_b;
  p.strideD = stride_c;
  Lt::get().run(p);
}

} // namespace

extern "C" {

void zest_cuda_sgemm(ZEST_sgemm_PARAMS(float)) {
  zest_cuda_sgemm_batched(ZEST_gemm_AS_BATCHED_ARGS);
}

void zest_cuda_sgemm_batched(ZEST_sgemm_batched_PARAMS(float)) {
  batchedProduct(CUDA_R_32F, CUDA_R_32F, ZEST_sgemm_batched_ARGS);
}

void zest_cuda_widening_gemm_bf16(ZEST_widening_gemm_PARAMS(uint16_t)) {
  zest_cuda_widening_gemm_batched_bf16(ZEST_gemm_AS_BATCHED_ARGS);
}

void zest_cuda_widening_gemm_batched_bf16(
    ZEST_widening_gemm_batched_PARAMS(uint16_t)) {
  batchedProduct(CUDA_R_16BF, CUDA_R_32F, ZEST_widening_gemm_batched_ARGS);
}

void zest_cuda_widening_gemm_f16(ZEST_widening_gemm_PARAMS(uint16_t)) {
  zest_cuda_widening_gemm_batched_f16(ZEST_gemm_AS_BATCHED_ARGS);
}

void zest_cuda_widening_gemm_batched_f16(
    ZEST_widening_gemm_batched_PARAMS(uint16_t)) {
  batchedProduct(CUDA_R_16F, CUDA_R_32F, ZEST_widening_gemm_batched_ARGS);
}

void zest_cuda_linear_forward(ZEST_linear_forward_PARAMS(float)) {
  linearForward(ZEST_linear_forward_ARGS);
}

void zest_cuda_linear_backward(ZEST_linear_backward_PARAMS(float)) {
  linearBackward(ZEST_linear_backward_ARGS);
}

void zest_cuda_linear_forward_bf16(ZEST_linear_forward_PARAMS(uint16_t)) {
  linearForward16<__nv_bfloat16>(ZEST_linear_forward_ARGS);
}

void zest_cuda_linear_backward_bf16(ZEST_linear_backward_PARAMS(uint16_t)) {
  linearBackward16<__nv_bfloat16>(ZEST_linear_backward_ARGS);
}

void zest_cuda_linear_forward_f16(ZEST_linear_forward_PARAMS(uint16_t)) {
  linearForward16<__half>(ZEST_linear_forward_ARGS);
}

void zest_cuda_linear_backward_f16(ZEST_linear_backward_PARAMS(uint16_t)) {
  linearBackward16<__half>(ZEST_linear_backward_ARGS);
}

} // extern "C"
