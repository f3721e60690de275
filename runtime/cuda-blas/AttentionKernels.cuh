//===- AttentionKernels.cuh - Fused attention on the GPU ---------*- CUDA -*-//
//
// FlashAttention-2's forward and backward as plain CUDA C++: one thread per
// query row (forward, query gradient) or per key row (key and value
// gradients), an online softmax over the keys, f32 arithmetic on the C
// API's storage types, no [queries, keys] array and no atomics. They are
// the reference device implementation (also run by the emulated device),
// not tuned: no tensor cores, no shared-memory tiles.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_CUDA_BLAS_ATTENTIONKERNELS_CUH
#define ZEST_RUNTIME_CUDA_BLAS_ATTENTIONKERNELS_CUH

#include "../common/AttentionLayout.h"
#include "EpilogueKernels.cuh"

namespace zest::rt::cuda {

/// The largest head dimension (queries/keys and values) a thread holds.
constexpr int64_t kMaxAttentionFeatures = 256;

/// Sizes, scale and mask of one attention call, and where each 4-D
/// operand's rows lie (the forward's leaves the gradients' unset).
struct AttentionShape : AttentionLayouts {
  int64_t batch, heads, kvHeads, queries, keys, features, valueFeatures;
  float scale;
  int32_t causal;
  int32_t maskKind;
  int64_t maskSizes[4];

  /// The offset of query row `row` of [batch * heads * queries] in `layout`
  /// (q, out and their gradients).
  inline __device__ int64_t queryAt(const RowLayout &layout,
                                    int64_t row) const {
    return layout.at(heads, row / queries, row % queries);
  }
  /// The offset of key row `row` of [batch * kvHeads * keys] in `layout`
  /// (k, v and their gradients).
  inline __device__ int64_t keyAt(const RowLayout &layout, int64_t row) const {
    return layout.at(kvHeads, row / keys, row % keys);
  }
};

/// The mask's value at (b, h, i, j) as a float (a boolean's false as
/// -inf, true as 0), its storage T for a SAME mask. The mask is a kernel
/// argument of its own, so that the emulated device checks it as it checks
/// every pointer argument.
template <typename T>
inline __device__ float maskAt(const AttentionShape &s, const void *mask,
                               int64_t b, int64_t h, int64_t i, int64_t j) {
  if (s.maskKind == ZEST_ATTENTION_MASK_NONE)
    return 0.0f;
  const int64_t *n = s.maskSizes;
  int64_t at = (((n[0] == 1 ? 0 : b) * n[1] + (n[1] == 1 ? 0 : h)) * n[2] +
                (n[2] == 1 ? 0 : i)) *
                   n[3] +
               (n[3] == 1 ? 0 : j);
  switch (s.maskKind) {
  case ZEST_ATTENTION_MASK_BOOL:
    return static_cast<const uint8_t *>(mask)[at] ? 0.0f : -INFINITY;
  case ZEST_ATTENTION_MASK_F32:
    return static_cast<const float *>(mask)[at];
  default:
    return load(static_cast<const T *>(mask)[at]);
  }
}

/// scale * q . k + mask, -inf above the diagonal when causal.
template <typename T>
inline __device__ float score(const AttentionShape &s, const void *mask,
                              const float *q, const T *k, int64_t b, int64_t h,
                              int64_t i, int64_t j) {
  if (s.causal && j > i)
    return -INFINITY;
  float dot = 0.0f;
  for (int64_t x = 0; x < s.features; ++x)
    dot += q[x] * load(k[x]);
  return dot * s.scale + maskAt<T>(s, mask, b, h, i, j);
}

/// Query row `row` of [batch * heads * queries]: its batch, head, row and
/// key/value head.
struct QueryRow {
  int64_t b, h, i, kvHead;
  inline __device__ QueryRow(const AttentionShape &s, int64_t row)
      : b(row / (s.heads * s.queries)), h(row / s.queries % s.heads),
        i(row % s.queries), kvHead(b * s.kvHeads + h / (s.heads / s.kvHeads)) {}
};

template <typename T>
__global__ void attentionForwardKernel(AttentionShape s, const void *mask,
                                       const T *q, const T *k, const T *v,
                                       T *out, float *lse) {
  int64_t row = globalThreadIndex();
  if (row >= s.batch * s.heads * s.queries)
    return;
  QueryRow r(s, row);
  float qr[kMaxAttentionFeatures], acc[kMaxAttentionFeatures];
  const T *query = q + s.queryAt(s.q, row);
  for (int64_t x = 0; x < s.features; ++x)
    qr[x] = load(query[x]);
  for (int64_t x = 0; x < s.valueFeatures; ++x)
    acc[x] = 0.0f;
  float maximum = -INFINITY, sum = 0.0f;
  const T *keys = k + s.keyAt(s.k, r.kvHead * s.keys),
          *values = v + s.keyAt(s.v, r.kvHead * s.keys);
  for (int64_t j = 0; j < s.keys; ++j) {
    float sj = score(s, mask, qr, keys + j * s.k.row, r.b, r.h, r.i, j);
    if (sj == -INFINITY)
      continue;
    float newMax = fmaxf(maximum, sj);
    float alpha = maximum == -INFINITY ? 0.0f : expf(maximum - newMax);
    float p = expf(sj - newMax);
    sum = sum * alpha + p;
    for (int64_t x = 0; x < s.valueFeatures; ++x)
      acc[x] = acc[x] * alpha + p * load(values[j * s.v.row + x]);
    maximum = newMax;
  }
  float inverse = sum == 0.0f ? 0.0f : 1.0f / sum;
  T *output = out + s.queryAt(s.out, row);
  for (int64_t x = 0; x < s.valueFeatures; ++x)
    output[x] = store<T>(acc[x] * inverse);
  lse[row] = sum == 0.0f ? INFINITY : maximum + logf(sum);
}

/// delta_i = dout_i . out_i, a thread per query row (the backward's
/// kernels read it for every score of the row).
template <typename T>
__global__ void attentionDeltaKernel(AttentionShape s, const T *out,
                                     const T *dout, float *delta) {
  int64_t row = globalThreadIndex();
  if (row >= s.batch * s.heads * s.queries)
    return;
  const T *o = out + s.queryAt(s.out, row), *g = dout + s.queryAt(s.dout, row);
  float d = 0.0f;
  for (int64_t x = 0; x < s.valueFeatures; ++x)
    d += load(g[x]) * load(o[x]);
  delta[row] = d;
}

/// dq_i = sum_j ds_ij k_j, one thread per query row.
template <typename T>
__global__ void attentionQueryGradKernel(AttentionShape s, const void *mask,
                                         const T *q, const T *k, const T *v,
                                         const float *lse, const float *deltas,
                                         const T *dout, T *dq) {
  int64_t row = globalThreadIndex();
  if (row >= s.batch * s.heads * s.queries)
    return;
  QueryRow r(s, row);
  float qr[kMaxAttentionFeatures], grad[kMaxAttentionFeatures];
  const T *query = q + s.queryAt(s.q, row), *g = dout + s.queryAt(s.dout, row);
  for (int64_t x = 0; x < s.features; ++x) {
    qr[x] = load(query[x]);
    grad[x] = 0.0f;
  }
  float delta = deltas[row];
  const T *keys = k + s.keyAt(s.k, r.kvHead * s.keys),
          *values = v + s.keyAt(s.v, r.kvHead * s.keys);
  for (int64_t j = 0; lse[row] != INFINITY && j < s.keys; ++j) {
    float sj = score(s, mask, qr, keys + j * s.k.row, r.b, r.h, r.i, j);
    if (sj == -INFINITY)
      continue;
    float p = expf(sj - lse[row]), dp = 0.0f;
    for (int64_t x = 0; x < s.valueFeatures; ++x)
      dp += load(g[x]) * load(values[j * s.v.row + x]);
    float ds = p * (dp - delta) * s.scale;
    for (int64_t x = 0; x < s.features; ++x)
      grad[x] += ds * load(keys[j * s.k.row + x]);
  }
  T *gradQuery = dq + s.queryAt(s.dq, row);
  for (int64_t x = 0; x < s.features; ++x)
    gradQuery[x] = store<T>(grad[x]);
}

/// dk_j = sum_i ds_ij q_i and dv_j = sum_i p_ij dout_i over the query heads
/// reading key/value head g, one thread per key row.
template <typename T>
__global__ void
attentionKeyValueGradKernel(AttentionShape s, const void *mask, const T *q,
                            const T *k, const T *v, const float *lse,
                            const float *deltas, const T *dout, T *dk, T *dv) {
  int64_t keyRow = globalThreadIndex();
  if (keyRow >= s.batch * s.kvHeads * s.keys)
    return;
  int64_t j = keyRow % s.keys, kvHead = keyRow / s.keys;
  int64_t b = kvHead / s.kvHeads, g = kvHead % s.kvHeads;
  int64_t group = s.heads / s.kvHeads;
  float gk[kMaxAttentionFeatures], gv[kMaxAttentionFeatures];
  for (int64_t x = 0; x < s.features; ++x)
    gk[x] = 0.0f;
  for (int64_t x = 0; x < s.valueFeatures; ++x)
    gv[x] = 0.0f;
  const T *key = k + s.keyAt(s.k, keyRow), *value = v + s.keyAt(s.v, keyRow);
  for (int64_t h = g * group; h < (g + 1) * group; ++h) {
    for (int64_t i = s.causal ? j : 0; i < s.queries; ++i) {
      int64_t row = (b * s.heads + h) * s.queries + i;
      if (lse[row] == INFINITY)
        continue;
      float qr[kMaxAttentionFeatures];
      const T *query = q + s.queryAt(s.q, row),
              *g = dout + s.queryAt(s.dout, row);
      for (int64_t x = 0; x < s.features; ++x)
        qr[x] = load(query[x]);
      float sij = score(s, mask, qr, key, b, h, i, j);
      if (sij == -INFINITY)
        continue;
      float p = expf(sij - lse[row]), dp = 0.0f;
      for (int64_t x = 0; x < s.valueFeatures; ++x) {
        float d = load(g[x]);
        gv[x] += p * d;
        dp += d * load(value[x]);
      }
      float ds = p * (dp - deltas[row]) * s.scale;
      for (int64_t x = 0; x < s.features; ++x)
        gk[x] += ds * qr[x];
    }
  }
  T *gradKey = dk + s.keyAt(s.dk, keyRow),
    *gradValue = dv + s.keyAt(s.dv, keyRow);
  for (int64_t x = 0; x < s.features; ++x)
    gradKey[x] = store<T>(gk[x]);
  for (int64_t x = 0; x < s.valueFeatures; ++x)
    gradValue[x] = store<T>(gv[x]);
}

} // namespace zest::rt::cuda

#endif // ZEST_RUNTIME_CUDA_BLAS_ATTENTIONKERNELS_CUH
