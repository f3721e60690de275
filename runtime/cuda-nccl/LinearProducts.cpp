//===- LinearProducts.cpp - Products and fused linear layers on cuBLASLt --===//
//
// The CUDA runtime's zest_cuda_sgemm(_batched) and zest_cuda_linear_*: the
// same contracts as the CPU kernels of zest_runtime.h (row-major, device
// pointers), ordered on the compute stream.
//
// cuBLASLt is column-major: a row-major D[m,n] = op(A)[m,k] op(B)[k,n] is
// the column-major D^T[n,m] = op(B)^T op(A)^T, so B goes first and a
// per-output-feature bias is a per-row bias of D^T, which is what the BIAS
// epilogues add. The forward pass uses the epilogues (BIAS, GELU_AUX_BIAS
// keeping the pre-activation, RELU_BIAS); activations cuBLASLt lacks (GELU
// with erf, SiLU) and ReLU with a kept pre-activation (cuBLASLt's ReLU aux
// is a bitmask) run as one elementwise kernel after a BIAS product. The
// backward pass forms g = dy * act'(pre) and the bias gradient in kernels
// (column sums in a fixed order: deterministic), then two products.
// Descriptors, layouts and the chosen algorithm are cached per shape; the
// workspace and the backward's g come from the runtime's pool, where
// zest-plan-memory counts them (ZEST_CUDA_WORKSPACE_BYTES).
//
//===----------------------------------------------------------------------===//

#include "Device.h"
#include "zest_runtime.h"
#include "zest_runtime_cuda.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>

using namespace zest::rt;

namespace {

void checkLt(cublasStatus_t status, const char *what) {
  // (cublasGetStatusString is in cuBLAS, which the runtime does not link.)
  if (status != CUBLAS_STATUS_SUCCESS)
    fatal(std::string("cuBLASLt error in ") + what + ": cublasStatus_t " +
          std::to_string(int(status)));
}

template <typename T>
void setAttribute(cublasLtMatmulDesc_t desc,
                  cublasLtMatmulDescAttributes_t attribute, const T &value,
                  const char *what) {
  checkLt(
      cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)),
      what);
}

/// One row-major product D = op(A) op(B) (+ D when accumulating), with an
/// epilogue; `batch` products at the given element strides.
struct Product {
  cudaDataType_t type = CUDA_R_32F;
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  const void *a = nullptr, *b = nullptr;
  void *d = nullptr;
  int64_t lda = 0, ldb = 0, ldd = 0;
  bool accumulate = false;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  void *aux = nullptr;
  int64_t ldaux = 0;
  int64_t batch = 1, strideA = 0, strideB = 0, strideD = 0;

  auto key() const {
    return std::make_tuple(int(type), transA, transB, m, n, k, lda, ldb, ldd,
                           int(epilogue), ldaux, batch, strideA, strideB,
                           strideD);
  }
};

/// What cuBLASLt needs for one shape, built once.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

class Lt {
public:
  static Lt &get() {
    static Lt lt;
    return lt;
  }

  void run(const Product &p) {
    if (p.m == 0 || p.n == 0)
      return;
    std::lock_guard<std::mutex> lock(mutex);
    auto [it, inserted] = plans.try_emplace(p.key());
    if (inserted)
      it->second = plan(p);
    Plan &plan = it->second;
    if (p.bias)
      setAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias,
                   "setting the bias");
    if (p.aux)
      setAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, p.aux,
                   "setting the pre-activation output");
    float alpha = 1, beta = p.accumulate ? 1 : 0;
    // K = 0: the product is zero, the epilogue still applies.
    checkLt(cublasLtMatmul(handle, plan.desc, &alpha, p.b, plan.first, p.a,
                           plan.second, &beta, p.d, plan.out, p.d, plan.out,
                           &plan.algo, workspace, kWorkspaceBytes,
                           cuda::streams.compute),
            "a product");
  }

private:
  static constexpr size_t kWorkspaceBytes = ZEST_CUDA_WORKSPACE_BYTES;

  Lt() {
    checkLt(cublasLtCreate(&handle), "cublasLtCreate");
    workspace = zest_pool_alloc(kWorkspaceBytes);
  }

  static cublasLtMatrixLayout_t layout(cudaDataType_t type, int64_t rows,
                                       int64_t cols, int64_t ld, int64_t batch,
                                       int64_t stride) {
    cublasLtMatrixLayout_t layout;
    checkLt(cublasLtMatrixLayoutCreate(&layout, type, rows, cols, ld),
            "a matrix layout");
    if (batch > 1) {
      int32_t count = int32_t(batch);
      checkLt(cublasLtMatrixLayoutSetAttribute(
                  layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                  sizeof(count)),
              "a batch count");
      checkLt(cublasLtMatrixLayoutSetAttribute(
                  layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                  sizeof(stride)),
              "a batch stride");
    }
    return layout;
  }

  Plan plan(const Product &p) {
    Plan plan;
    // f32 products accumulate in f32 without TF32, as the CPU's do.
    checkLt(
        cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
        "a product descriptor");
    // Column-major D^T[n,m] = op(B)^T[n,k] op(A)^T[k,m].
    cublasOperation_t first = p.transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                      second = p.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    setAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, first,
                 "transposition");
    setAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, second,
                 "transposition");
    setAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, p.epilogue,
                 "the epilogue");
    if (p.ldaux)
      setAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, p.ldaux,
                   "the pre-activation's row stride");
    plan.first = layout(p.type, p.transB ? p.k : p.n, p.transB ? p.n : p.k,
                        p.ldb, p.batch, p.strideB);
    plan.second = layout(p.type, p.transA ? p.m : p.k, p.transA ? p.k : p.m,
                         p.lda, p.batch, p.strideA);
    plan.out = layout(p.type, p.n, p.m, p.ldd, p.batch, p.strideD);
    cublasLtMatmulPreference_t preference;
    checkLt(cublasLtMatmulPreferenceCreate(&preference), "a preference");
    size_t bytes = kWorkspaceBytes;
    checkLt(cublasLtMatmulPreferenceSetAttribute(
                preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes,
                sizeof(bytes)),
            "the workspace size");
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    checkLt(cublasLtMatmulAlgoGetHeuristic(handle, plan.desc, plan.first,
                                           plan.second, plan.out, plan.out,
                                           preference, 1, &result, &found),
            "choosing an algorithm");
    cublasLtMatmulPreferenceDestroy(preference);
    if (found == 0)
      fatal("cuBLASLt has no algorithm for a " + std::to_string(p.m) + " x " +
            std::to_string(p.n) + " x " + std::to_string(p.k) + " product");
    plan.algo = result.algo;
    return plan;
  }

  cublasLtHandle_t handle = nullptr;
  void *workspace = nullptr;
  std::mutex mutex;
  std::map<decltype(Product().key()), Plan> plans;
};

/// f32 arithmetic on stored values.
__device__ float load(float v) { return v; }
__device__ float load(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ float load(__half v) { return __half2float(v); }
template <typename T> __device__ T store(float v);
template <> __device__ float store<float>(float v) { return v; }
// To nearest even, as the CPU kernels.
template <> __device__ __nv_bfloat16 store<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <> __device__ __half store<__half>(float v) {
  return __float2half_rn(v);
}

__device__ float activate(float v, int activation) {
  switch (activation) {
  case ZEST_ACTIVATION_RELU:
    return v > 0 ? v : 0;
  case ZEST_ACTIVATION_GELU_TANH:
    return 0.5f * v *
           (1 + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
  case ZEST_ACTIVATION_GELU_ERF:
    return 0.5f * v * (1 + erff(v * 0.7071067811865476f));
  case ZEST_ACTIVATION_SILU:
    return v / (1 + expf(-v));
  default:
    return v;
  }
}

__device__ float derivative(float v, int activation) {
  switch (activation) {
  case ZEST_ACTIVATION_RELU:
    return v > 0 ? 1 : 0;
  case ZEST_ACTIVATION_GELU_TANH: {
    float inner = 0.7978845608028654f * (v + 0.044715f * v * v * v);
    float t = tanhf(inner);
    return 0.5f * (1 + t) + 0.5f * v * (1 - t * t) * 0.7978845608028654f *
                                (1 + 3 * 0.044715f * v * v);
  }
  case ZEST_ACTIVATION_GELU_ERF:
    return 0.5f * (1 + erff(v * 0.7071067811865476f)) +
           v * 0.3989422804014327f * expf(-0.5f * v * v);
  case ZEST_ACTIVATION_SILU: {
    float s = 1 / (1 + expf(-v));
    return s * (1 + v * (1 - s));
  }
  default:
    return 1;
  }
}

/// y = act(pre) over an m x n block.
template <typename T>
__global__ void activateKernel(int64_t m, int64_t n, const T *pre,
                               int64_t ldpre, int activation, T *y,
                               int64_t ldy) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m * n)
    return;
  int64_t row = i / n, col = i % n;
  y[row * ldy + col] =
      store<T>(activate(load(pre[row * ldpre + col]), activation));
}

/// g = dy * act'(pre), rounded to T as a stored intermediate.
template <typename T>
__global__ void gradientKernel(int64_t m, int64_t n, const T *dy, int64_t lddy,
                               const T *pre, int64_t ldpre, int activation,
                               T *g) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m * n)
    return;
  int64_t row = i / n, col = i % n;
  g[i] = store<T>(load(dy[row * lddy + col]) *
                  derivative(load(pre[row * ldpre + col]), activation));
}

/// db[col] = sum over rows of g, one thread per column, rows in order.
template <typename T>
__global__ void columnSumKernel(int64_t m, int64_t n, const T *g, int64_t ldg,
                                T *db) {
  int64_t col = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= n)
    return;
  float sum = 0;
  for (int64_t row = 0; row < m; ++row)
    sum += load(g[row * ldg + col]);
  db[col] = store<T>(sum);
}

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
  bool fusedActivation = (activation == ZEST_ACTIVATION_GELU_TANH) ||
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
  if (m * n)
    activateKernel<T><<<blocks(m * n), 256, 0, cuda::streams.compute>>>(
        m, n, target, ldtarget, activation, y, ldy);
  cuda::checkCuda(cudaGetLastError(), "the activation kernel");
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
  if (activation != ZEST_ACTIVATION_NONE && m * n) {
    scratch = static_cast<T *>(zest_pool_alloc(m * n * sizeof(T)));
    gradientKernel<T><<<blocks(m * n), 256, 0, cuda::streams.compute>>>(
        m, n, dy, lddy, pre, ldpre, activation, scratch);
    cuda::checkCuda(cudaGetLastError(), "the activation gradient kernel");
    g = scratch, ldg = n;
  }
  if (db && n) {
    columnSumKernel<T>
        <<<blocks(n), 256, 0, cuda::streams.compute>>>(m, n, g, ldg, db);
    cuda::checkCuda(cudaGetLastError(), "the bias gradient kernel");
  }
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

} // namespace

extern "C" {

void zest_cuda_sgemm(ZEST_sgemm_PARAMS(float)) {
  zest_cuda_sgemm_batched(trans_a, trans_b, 1, m, n, k, a, lda, 0, b, ldb, 0, c,
                          ldc, 0, accumulate);
}

void zest_cuda_sgemm_batched(ZEST_sgemm_batched_PARAMS(float)) {
  if (batch == 0)
    return;
  Product p;
  p.transA = trans_a != 0, p.transB = trans_b != 0;
  p.m = m, p.n = n, p.k = k;
  p.a = a, p.lda = lda, p.b = b, p.ldb = ldb, p.d = c, p.ldd = ldc;
  p.accumulate = accumulate != 0;
  p.batch = batch, p.strideA = stride_a, p.strideB = stride_b;
  p.strideD = stride_c;
  Lt::get().run(p);
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
