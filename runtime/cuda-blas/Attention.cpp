//===- Attention.cpp - Fused attention on the GPU
//--------------------------===//
//
// The CUDA runtime's zest_cuda_attention_forward / _backward: the contracts
// of the CPU kernels (zest_runtime.h; device pointers), on the compute
// stream, with the kernels of AttentionKernels.cuh. Built as CUDA for a GPU
// and, through cuda-emulated/AttentionHost.cpp, as C++ for the emulated
// device.
//
//===----------------------------------------------------------------------===//

#include "../cuda-nccl/Device.h"
#include "AttentionKernels.cuh"
#include "zest_runtime.h"
#include "zest_runtime_cuda.h"

#include <cstdio>
#include <cstdlib>

using namespace zest::rt;
using namespace zest::rt::cuda;

namespace {

int64_t blocks(int64_t threads) { return (threads + 127) / 128; }

AttentionShape makeShape(int64_t batch, int64_t heads, int64_t kvHeads,
                         int64_t queries, int64_t keys, int64_t features,
                         int64_t valueFeatures, float scale, int32_t causal,
                         bool masked, int32_t maskKind, int64_t maskBatch,
                         int64_t maskHeads, int64_t maskRows,
                         int64_t maskCols) {
  if (features > kMaxAttentionFeatures ||
      valueFeatures > kMaxAttentionFeatures) {
    std::fprintf(stderr,
                 "zest: attention with head dimensions %lld and %lld: the "
                 "CUDA kernels take at most %lld\n",
                 static_cast<long long>(features),
                 static_cast<long long>(valueFeatures),
                 static_cast<long long>(kMaxAttentionFeatures));
    std::abort();
  }
  if (!masked)
    maskKind = ZEST_ATTENTION_MASK_NONE;
  return {batch,
          heads,
          kvHeads,
          queries,
          keys,
          features,
          valueFeatures,
          scale,
          causal,
          maskKind,
          {maskBatch, maskHeads, maskRows, maskCols}};
}

template <typename T>
void forward(const AttentionShape &s, const void *mask, const T *q, const T *k,
             const T *v, T *out, float *lse) {
  int64_t rows = s.batch * s.heads * s.queries;
  if (rows == 0)
    return;
  ZEST_LAUNCH(attentionForwardKernel<T>, blocks(rows), 128,
              cuda::streams.compute, s, mask, q, k, v, out, lse);
  cuda::checkCuda(cudaGetLastError(), "the attention forward kernel");
}

template <typename T>
void backward(const AttentionShape &s, const void *mask, const T *q, const T *k,
              const T *v, const T *out, const float *lse, const T *dout, T *dq,
              T *dk, T *dv) {
  int64_t rows = s.batch * s.heads * s.queries,
          keyRows = s.batch * s.kvHeads * s.keys;
  if (rows > 0) {
    ZEST_LAUNCH(attentionQueryGradKernel<T>, blocks(rows), 128,
                cuda::streams.compute, s, mask, q, k, v, out, lse, dout, dq);
    cuda::checkCuda(cudaGetLastError(), "the attention query gradient");
  }
  if (keyRows > 0) {
    ZEST_LAUNCH(attentionKeyValueGradKernel<T>, blocks(keyRows), 128,
                cuda::streams.compute, s, mask, q, k, v, out, lse, dout, dk,
                dv);
    cuda::checkCuda(cudaGetLastError(), "the attention key/value gradients");
  }
}

} // namespace

#define ZEST_CUDA_ATTENTION_ENTRIES(SUFFIX, T, DEVICE_T)                       \
  void zest_cuda_attention_forward##SUFFIX(ZEST_attention_forward_PARAMS(T)) { \
    forward(makeShape(batch, heads, kv_heads, q_len, kv_len, head_dim,         \
                      value_dim, scale, causal, mask != nullptr, mask_kind,    \
                      mask_batch, mask_heads, mask_rows, mask_cols),           \
            mask, reinterpret_cast<const DEVICE_T *>(q),                       \
            reinterpret_cast<const DEVICE_T *>(k),                             \
            reinterpret_cast<const DEVICE_T *>(v),                             \
            reinterpret_cast<DEVICE_T *>(out), lse);                           \
  }                                                                            \
  void zest_cuda_attention_backward##SUFFIX(                                   \
      ZEST_attention_backward_PARAMS(T)) {                                     \
    backward(makeShape(batch, heads, kv_heads, q_len, kv_len, head_dim,        \
                       value_dim, scale, causal, mask != nullptr, mask_kind,   \
                       mask_batch, mask_heads, mask_rows, mask_cols),          \
             mask, reinterpret_cast<const DEVICE_T *>(q),                      \
             reinterpret_cast<const DEVICE_T *>(k),                            \
             reinterpret_cast<const DEVICE_T *>(v),                            \
             reinterpret_cast<const DEVICE_T *>(out), lse,                     \
             reinterpret_cast<const DEVICE_T *>(dout),                         \
             reinterpret_cast<DEVICE_T *>(dq),                                 \
             reinterpret_cast<DEVICE_T *>(dk),                                 \
             reinterpret_cast<DEVICE_T *>(dv));                                \
  }

extern "C" {
ZEST_CUDA_ATTENTION_ENTRIES(, float, float)
ZEST_CUDA_ATTENTION_ENTRIES(_bf16, uint16_t, __nv_bfloat16)
ZEST_CUDA_ATTENTION_ENTRIES(_f16, uint16_t, __half)
}
