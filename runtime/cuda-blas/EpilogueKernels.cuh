//===- EpilogueKernels.cuh - Activations and gradients on the GPU -*- CUDA -*-//
//
// What cuBLASLt's epilogues lack: activations (GELU with erf, SiLU, and any
// with a kept pre-activation) after a BIAS product, g = dy * act'(pre) and
// the bias gradient (column sums in a fixed order: deterministic), on the
// storage types of the C API (f32, bf16, f16) with f32 arithmetic.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_CUDA_BLAS_EPILOGUEKERNELS_CUH
#define ZEST_RUNTIME_CUDA_BLAS_EPILOGUEKERNELS_CUH

#include "../cuda-nccl/KernelTimes.h"
#include "zest_runtime.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#ifdef ZEST_CUDA_EMULATED
// Built for the emulated device: the kernels are host functions that read
// their thread's coordinates from the emulator (cuda-emulated/Launch.h).
#include "../cuda-emulated/Launch.h"
#define ZEST_LAUNCH(kernel, grid, block, stream, ...)                          \
  (::zest::rt::cuda::TimedScope(#kernel, stream),                              \
   ::zest::emulated::requireDeviceArguments(#kernel, __VA_ARGS__),             \
   ::zest::emulated::launchThreads(#kernel, dim3(grid), dim3(block), stream,   \
                                   [=] { kernel(__VA_ARGS__); }))
#else
// The scope times the launch under ZEST_KERNEL_TIMES (it ends with the
// full expression, after the launch).
#define ZEST_LAUNCH(kernel, grid, block, stream, ...)                          \
  (::zest::rt::cuda::TimedScope(#kernel, stream),                              \
   kernel<<<grid, block, 0, stream>>>(__VA_ARGS__))
#endif

namespace zest::rt::cuda {

/// This thread's block, its block's size and its index in the block:
/// CUDA's built-ins, or the emulator's in an emulated build.
struct ThreadCoordinates {
  dim3 block, blockSize, thread;
};
inline __device__ ThreadCoordinates coordinates() {
#ifdef ZEST_CUDA_EMULATED
  const ::zest::emulated::ThreadIndex &t = ::zest::emulated::current;
  return {t.block, t.blockSize, t.thread};
#else
  return {blockIdx, blockDim, threadIdx};
#endif
}

/// This thread's index in a 1-D grid of 1-D blocks.
inline __device__ int64_t globalThreadIndex() {
  ThreadCoordinates t = coordinates();
  return int64_t(t.block.x) * t.blockSize.x + t.thread.x;
}

/// f32 arithmetic on stored values.
inline __device__ float load(float v) { return v; }
inline __device__ float load(__nv_bfloat16 v) { return __bfloat162float(v); }
inline __device__ float load(__half v) { return __half2float(v); }
template <typename T> __device__ T store(float v);
template <> inline __device__ float store<float>(float v) { return v; }
// To nearest even, as the CPU kernels.
template <> inline __device__ __nv_bfloat16 store<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <> inline __device__ __half store<__half>(float v) {
  return __float2half_rn(v);
}

inline __device__ float activate(float v, int activation) {
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

inline __device__ float derivative(float v, int activation) {
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
  int64_t i = globalThreadIndex();
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
  int64_t i = globalThreadIndex();
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
  int64_t col = globalThreadIndex();
  if (col >= n)
    return;
  float sum = 0;
  for (int64_t row = 0; row < m; ++row)
    sum += load(g[row * ldg + col]);
  db[col] = store<T>(sum);
}

/// The bias gradient in two passes, for tall g: partial[c][col] sums the
/// rows of chunk c of `rowsPerChunk` rows (one thread per chunk and column,
/// rows in order), then one thread per column adds the chunks in order.
/// Deterministic, and as parallel as the rows are many.
template <typename T>
__global__ void columnPartialKernel(int64_t m, int64_t n, const T *g,
                                    int64_t ldg, int64_t rowsPerChunk,
                                    float *partial) {
  int64_t chunks = (m + rowsPerChunk - 1) / rowsPerChunk;
  int64_t i = globalThreadIndex();
  if (i >= chunks * n)
    return;
  int64_t chunk = i / n, col = i % n;
  int64_t end = (chunk + 1) * rowsPerChunk < m ? (chunk + 1) * rowsPerChunk : m;
  float sum = 0;
  for (int64_t row = chunk * rowsPerChunk; row < end; ++row)
    sum += load(g[row * ldg + col]);
  partial[i] = sum;
}

template <typename T>
__global__ void columnCombineKernel(int64_t chunks, int64_t n,
                                    const float *partial, T *db) {
  int64_t col = globalThreadIndex();
  if (col >= n)
    return;
  float sum = 0;
  for (int64_t chunk = 0; chunk < chunks; ++chunk)
    sum += partial[chunk * n + col];
  db[col] = store<T>(sum);
}

} // namespace zest::rt::cuda

#endif // ZEST_RUNTIME_CUDA_BLAS_EPILOGUEKERNELS_CUH
