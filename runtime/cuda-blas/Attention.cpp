//===- Attention.cpp - Fused attention on the GPU -------------------------===//
//
// The CUDA runtime's zest_cuda_attention_forward / _backward: the contracts
// of the CPU kernels (zest_runtime.h; device pointers), on the compute
// stream. On a GPU with the flash kernels of AttentionFlash.cuh (or the WMMA
// ones of AttentionTensorCores.cuh) for 16-bit storage and the tiled
// kernels of AttentionTiles.cuh for f32 (head dimensions up to 128; see
// chooseKernels), else with the reference kernels of AttentionKernels.cuh.
// Built as CUDA for a GPU and, through cuda-emulated/AttentionHost.cpp, as C++
// for the emulated device, which runs the same kernels (its threads as
// fibers: cuda-emulated/Simt.h).
//
//===----------------------------------------------------------------------===//

#include "../cuda-nccl/Device.h"
#include "AttentionFlash.cuh"
#include "AttentionKernels.cuh"
#include "AttentionTensorCores.cuh"
#include "zest_runtime.h"
#include "zest_runtime_cuda.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <unordered_map>

using namespace zest::rt;
using namespace zest::rt::cuda;

namespace {

int64_t blocks(int64_t threads) { return (threads + 127) / 128; }

AttentionShape makeShape(int64_t batch, int64_t heads, int64_t kvHeads,
                         int64_t queries, int64_t keys, int64_t features,
                         int64_t valueFeatures, float scale, int32_t causal,
                         bool masked, int32_t maskKind, int64_t maskBatch,
                         int64_t maskHeads, int64_t maskRows, int64_t maskCols,
                         const AttentionLayouts &layouts) {
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
  AttentionShape shape{};
  shape.batch = batch;
  shape.heads = heads;
  shape.kvHeads = kvHeads;
  shape.queries = queries;
  shape.keys = keys;
  shape.features = features;
  shape.valueFeatures = valueFeatures;
  shape.scale = scale;
  shape.causal = causal;
  shape.maskKind = maskKind;
  int64_t maskSizes[4] = {maskBatch, maskHeads, maskRows, maskCols};
  std::memcpy(shape.maskSizes, maskSizes, sizeof(maskSizes));
  static_cast<AttentionLayouts &>(shape) = layouts;
  return shape;
}

/// The kernels a call runs on a GPU.
enum class Kernels { Reference, Tiles, TensorCores, Flash };

/// Whether every pointer is 16-byte aligned and every row of every operand
/// (elements of `bytes` bytes) starts 16 bytes apart, as the flash kernels'
/// copies need.
template <typename... Pointers>
bool aligned16(const AttentionShape &s, size_t bytes, Pointers... pointers) {
  for (const RowLayout &l : {s.q, s.k, s.v, s.out, s.dout, s.dq, s.dk, s.dv})
    for (int64_t stride : {l.batch, l.head, l.row})
      if (stride * bytes % 16 != 0)
        return false;
  return ((reinterpret_cast<uintptr_t>(pointers) % 16 == 0) && ...);
}

/// For 16-bit storage and head dimensions multiples of 16 up to 128, the
/// flash kernels (AttentionFlash.cuh: the softmax in registers) where every
/// operand is 16-byte aligned, else the WMMA kernels (AttentionTensorCores.cuh,
/// correct on an H200; ZEST_CUDA_ATTENTION=tensor-cores asks for them); for
/// f32 the tiled kernels (AttentionTiles.cuh) for head dimensions up to 128;
/// else the references. ZEST_CUDA_ATTENTION=tiled or =reference asks for
/// those instead. The flash kernels pass the attention test on the emulated
/// device, which runs them as PTX defines their instructions; no GPU has
/// run them yet (docs/Performance.md).
template <typename T>
Kernels chooseKernels(const AttentionShape &s, bool aligned) {
  const char *choice = std::getenv("ZEST_CUDA_ATTENTION");
  auto asked = [&](const char *name) {
    return choice && std::strcmp(choice, name) == 0;
  };
  if (asked("reference"))
    return Kernels::Reference;
  if (!asked("tiled") && !std::is_same_v<T, float> &&
      tensorcores::takes(s.features, s.valueFeatures))
    return aligned && !asked("tensor-cores") ? Kernels::Flash
                                             : Kernels::TensorCores;
  if (s.features <= tiles::kMaxFeatures &&
      s.valueFeatures <= tiles::kMaxFeatures)
    return Kernels::Tiles;
  return Kernels::Reference;
}

/// Launches `blocks` blocks of `threads` with `shared` bytes of shared
/// memory (more than the default 48 KiB, which the kernel is allowed once).
template <typename... Params, typename... Args>
void launch(const char *name, void (*kernel)(Params...), int64_t blocks,
            int threads, size_t shared, Args... args) {
  if (blocks == 0)
    return;
  // The limit is a property of the kernel: raised once, not per launch.
  static std::unordered_map<const void *, size_t> allowed;
  size_t &limit = allowed[reinterpret_cast<const void *>(kernel)];
  if (shared > limit) {
    cuda::checkCuda(
        cudaFuncSetAttribute(reinterpret_cast<const void *>(kernel),
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             int(shared)),
        name);
    limit = shared;
  }
  launchKernel(name, kernel, blocks, threads, shared, cuda::streams.compute,
               args...);
  cuda::checkCuda(cudaGetLastError(), name);
}

/// Blocks of `rows` rows over the query rows, and over the keys.
int64_t queryBlocks(const AttentionShape &s, int64_t rows) {
  return s.batch * s.heads * ((s.queries + rows - 1) / rows);
}
int64_t keyBlocks(const AttentionShape &s, int64_t rows) {
  return s.batch * s.kvHeads * ((s.keys + rows - 1) / rows);
}

/// The tensor-core kernels (16-bit T only).
template <typename T> struct TensorCoreAttention {
  static void forward(const AttentionShape &s, const void *mask, const T *q,
                      const T *k, const T *v, T *out, float *lse) {
    using namespace tensorcores;
    launch("attentionForwardTensorCores", attentionForwardTensorCores<T>,
           queryBlocks(s, kRows), kThreads,
           forwardSharedBytes(s.features, s.valueFeatures), s, mask, q, k, v,
           out, lse);
  }
  static void backward(const AttentionShape &s, const void *mask, const T *q,
                       const T *k, const T *v, const float *lse,
                       const float *delta, const T *dout, T *dq, T *dk, T *dv) {
    using namespace tensorcores;
    launch("attentionQueryGradTensorCores", attentionQueryGradTensorCores<T>,
           queryBlocks(s, kRows), kThreads,
           queryGradSharedBytes(s.features, s.valueFeatures), s, mask, q, k, v,
           lse, delta, dout, dq);
    launch("attentionKeyValueGradTensorCores",
           attentionKeyValueGradTensorCores<T>, keyBlocks(s, kRows), kThreads,
           keyValueGradSharedBytes(s.features, s.valueFeatures), s, mask, q, k,
           v, lse, delta, dout, dk, dv);
  }
};

/// The flash kernels' instance for head dimensions padded to D (16-bit T).
template <typename T, int D> struct FlashAttention {
  static void forward(const AttentionShape &s, const void *mask, const T *q,
                      const T *k, const T *v, T *out, float *lse) {
    using namespace flash;
    launch("flashForward", flashForward<T, D>, queryBlocks(s, kRows), kThreads,
           forwardSharedBytes(D), s, mask, q, k, v, out, lse);
  }
  static void backward(const AttentionShape &s, const void *mask, const T *q,
                       const T *k, const T *v, const float *lse,
                       const float *delta, const T *dout, T *dq, T *dk, T *dv) {
    using namespace flash;
    launch("flashQueryGrad", flashQueryGrad<T, D>, queryBlocks(s, kRows),
           kThreads, queryGradSharedBytes(D), s, mask, q, k, v, lse, delta,
           dout, dq);
    launch("flashKeyValueGrad", flashKeyValueGrad<T, D>, keyBlocks(s, kRows),
           kThreads, keyValueGradSharedBytes(D), s, mask, q, k, v, lse, delta,
           dout, dk, dv);
  }
};

/// Runs `call` with the flash kernels' instance for these head dimensions.
template <typename T, typename Call>
void withFlashKernels(const AttentionShape &s, Call call) {
  if (flash::paddedFeatures(s.features, s.valueFeatures) == 64)
    call(FlashAttention<T, 64>());
  else
    call(FlashAttention<T, 128>());
}

/// The tiled kernels' instance for head dimensions up to `Cols` x 16.
template <typename T, int Cols> struct TiledAttention {
  static void forward(const AttentionShape &s, const void *mask, const T *q,
                      const T *k, const T *v, T *out, float *lse) {
    launch("attentionForwardTiled", tiles::attentionForwardTiled<T, Cols>,
           queryBlocks(s, tiles::kTile), tiles::kThreads,
           tiles::forwardSharedBytes(s.features, s.valueFeatures), s, mask, q,
           k, v, out, lse);
  }
  static void backward(const AttentionShape &s, const void *mask, const T *q,
                       const T *k, const T *v, const float *lse,
                       const float *delta, const T *dout, T *dq, T *dk, T *dv) {
    launch("attentionQueryGradTiled", tiles::attentionQueryGradTiled<T, Cols>,
           queryBlocks(s, tiles::kTile), tiles::kThreads,
           tiles::queryGradSharedBytes(s.features, s.valueFeatures), s, mask, q,
           k, v, lse, delta, dout, dq);
    launch("attentionKeyValueGradTiled",
           tiles::attentionKeyValueGradTiled<T, Cols>,
           keyBlocks(s, tiles::kTile), tiles::kThreads,
           tiles::keyValueGradSharedBytes(s.features, s.valueFeatures), s, mask,
           q, k, v, lse, delta, dout, dk, dv);
  }
};

/// Runs `call` with the kernels that take this call on a GPU (the flash
/// kernels, the WMMA ones, or the tiles' instance for its head dimensions);
/// false where the reference kernels take it. `aligned`: whether every
/// operand is 16-byte aligned.
template <typename T, typename Call>
bool withGpuKernels(const AttentionShape &s, bool aligned, Call call) {
  switch (chooseKernels<T>(s, aligned)) {
  case Kernels::Flash:
    if constexpr (!std::is_same_v<T, float>) {
      withFlashKernels<T>(s, call);
      return true;
    }
    return false;
  case Kernels::TensorCores:
    if constexpr (!std::is_same_v<T, float>) {
      call(TensorCoreAttention<T>());
      return true;
    }
    return false;
  case Kernels::Tiles:
    if (s.features <= 64 && s.valueFeatures <= 64)
      call(TiledAttention<T, 4>());
    else
      call(TiledAttention<T, 8>());
    return true;
  case Kernels::Reference:
    return false;
  }
  return false;
}

template <typename T>
void forward(const AttentionShape &s, const void *mask, const T *q, const T *k,
             const T *v, T *out, float *lse) {
  int64_t rows = s.batch * s.heads * s.queries;
  if (rows == 0)
    return;
  if (withGpuKernels<T>(
          s, aligned16(s, sizeof(T), q, k, v, out),
          [&](auto kernels) { kernels.forward(s, mask, q, k, v, out, lse); }))
    return;
  ZEST_LAUNCH(attentionForwardKernel<T>, blocks(rows), 128,
              cuda::streams.compute, s, mask, q, k, v, out, lse);
  cuda::checkCuda(cudaGetLastError(), "the attention forward kernel");
}

/// The gradients; delta (a float per query row, dout . out) comes from the
/// pool for the call, in both builds (zest-plan-memory counts it).
template <typename T>
void backward(const AttentionShape &s, const void *mask, const T *q, const T *k,
              const T *v, const T *out, const float *lse, const T *dout, T *dq,
              T *dk, T *dv) {
  int64_t rows = s.batch * s.heads * s.queries,
          keyRows = s.batch * s.kvHeads * s.keys;
  if (rows == 0 && keyRows == 0)
    return;
  float *delta = nullptr;
  if (rows > 0) {
    delta = static_cast<float *>(zest_pool_alloc(
        zest_cuda_attention_backward_scratch(s.batch, s.heads, s.queries)));
    ZEST_LAUNCH(attentionDeltaKernel<T>, blocks(rows), 128,
                cuda::streams.compute, s, out, dout, delta);
    cuda::checkCuda(cudaGetLastError(), "the attention's row deltas");
  }
  if (withGpuKernels<T>(s, aligned16(s, sizeof(T), q, k, v, dout, dq, dk, dv),
                        [&](auto kernels) {
                          kernels.backward(s, mask, q, k, v, lse, delta, dout,
                                           dq, dk, dv);
                        })) {
    if (delta)
      zest_pool_free(delta); // reused only by work later on the same stream
    return;
  }
  if (rows > 0) {
    ZEST_LAUNCH(attentionQueryGradKernel<T>, blocks(rows), 128,
                cuda::streams.compute, s, mask, q, k, v, lse,
                static_cast<const float *>(delta), dout, dq);
    cuda::checkCuda(cudaGetLastError(), "the attention query gradient");
  }
  if (keyRows > 0) {
    ZEST_LAUNCH(attentionKeyValueGradKernel<T>, blocks(keyRows), 128,
                cuda::streams.compute, s, mask, q, k, v, lse,
                static_cast<const float *>(delta), dout, dk, dv);
    cuda::checkCuda(cudaGetLastError(), "the attention key/value gradients");
  }
  if (delta)
    zest_pool_free(delta); // reused only by work later on the same stream
}

} // namespace

/// The shape of a call inside an entry point, its arrays' layouts listed.
#define ZEST_CUDA_ATTENTION_SHAPE(...)                                         \
  makeShape(batch, heads, kv_heads, q_len, kv_len, head_dim, value_dim, scale, \
            causal, mask != nullptr, mask_kind, mask_batch, mask_heads,        \
            mask_rows, mask_cols, AttentionLayouts{__VA_ARGS__})

#define ZEST_CUDA_ATTENTION_ENTRIES(SUFFIX, T, DEVICE_T)                       \
  void zest_cuda_attention_forward##SUFFIX(ZEST_attention_forward_PARAMS(T)) { \
    forward(ZEST_CUDA_ATTENTION_SHAPE({ZEST_ATTENTION_STRIDE_ARGS(q)},         \
                                      {ZEST_ATTENTION_STRIDE_ARGS(k)},         \
                                      {ZEST_ATTENTION_STRIDE_ARGS(v)},         \
                                      {ZEST_ATTENTION_STRIDE_ARGS(out)}),      \
            mask, reinterpret_cast<const DEVICE_T *>(q),                       \
            reinterpret_cast<const DEVICE_T *>(k),                             \
            reinterpret_cast<const DEVICE_T *>(v),                             \
            reinterpret_cast<DEVICE_T *>(out), lse);                           \
  }                                                                            \
  void zest_cuda_attention_backward##SUFFIX(                                   \
      ZEST_attention_backward_PARAMS(T)) {                                     \
    backward(ZEST_CUDA_ATTENTION_SHAPE({ZEST_ATTENTION_STRIDE_ARGS(q)},        \
                                       {ZEST_ATTENTION_STRIDE_ARGS(k)},        \
                                       {ZEST_ATTENTION_STRIDE_ARGS(v)},        \
                                       {ZEST_ATTENTION_STRIDE_ARGS(out)},      \
                                       {ZEST_ATTENTION_STRIDE_ARGS(dout)},     \
                                       {ZEST_ATTENTION_STRIDE_ARGS(dq)},       \
                                       {ZEST_ATTENTION_STRIDE_ARGS(dk)},       \
                                       {ZEST_ATTENTION_STRIDE_ARGS(dv)}),      \
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
