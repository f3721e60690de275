//===- Attention.cpp - Fused attention on the CPU -------------------------===//
//
// FlashAttention-2 on the CPU: for each (batch, head) the queries are cut
// into blocks of kQueryBlock rows and the keys into blocks of kKeyBlock; a
// block's scores live in one small tile, folded into a running maximum,
// sum and output (the forward) or turned into the block's gradients from
// the saved log-sum-exp (the backward). No [queries, keys] array is ever
// formed. The tile products run on the runtime's sgemm; the heads run in
// parallel (OpenMP, with oneDNN's products inside each running serially).
// 16-bit storage (and rows apart, in a strided layout) is widened to
// contiguous f32 rows per head and rounded once at the end.
//
//===----------------------------------------------------------------------===//

#include "../common/AttentionLayout.h"
#include "../common/HalfFloat.h"
#include "Sgemm.h"
#include "zest_runtime.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace {

constexpr int64_t kQueryBlock = 64;
constexpr int64_t kKeyBlock = 256;
constexpr float kInf = std::numeric_limits<float>::infinity();

using zest::rt::AttentionLayouts;
using zest::rt::RowLayout;

/// The problem's sizes, shared by every head, and its operands' layouts.
struct Shape {
  int64_t batch, heads, kvHeads, queries, keys, features, valueFeatures;
  float scale;
  bool causal;
  AttentionLayouts layouts;

  int64_t group() const { return heads / kvHeads; }
};

/// Storage kinds: 0 f32, 1 bf16, 2 f16 (16-bit bit patterns).
float toFloat(uint16_t bits, int kind) {
  return kind == 1 ? zest::rt::bf16ToFloat(bits) : zest::rt::f16ToFloat(bits);
}
uint16_t fromFloat(float value, int kind) {
  return kind == 1 ? zest::rt::floatToBf16(value) : zest::rt::floatToF16(value);
}

/// The mask, read with its broadcast dimensions.
struct Mask {
  const void *data;
  int32_t kind;
  int64_t sizes[4];
  /// The storage kind of a SAME mask (0: f32, else 16-bit).
  int storage;

  /// Adds the mask of (b, h) to the scores of query rows [i0, i0 + rows)
  /// against keys [j0, j0 + cols) in `s` (row stride ld); -inf where a
  /// boolean mask is false.
  void apply(int64_t b, int64_t h, int64_t i0, int64_t rows, int64_t j0,
             int64_t cols, float *s, int64_t ld) const {
    if (kind == ZEST_ATTENTION_MASK_NONE)
      return;
    int64_t mb = sizes[0] == 1 ? 0 : b, mh = sizes[1] == 1 ? 0 : h;
    for (int64_t r = 0; r < rows; ++r) {
      int64_t mi = sizes[2] == 1 ? 0 : i0 + r;
      int64_t rowStart = ((mb * sizes[1] + mh) * sizes[2] + mi) * sizes[3];
      float *row = s + r * ld;
      for (int64_t c = 0; c < cols; ++c) {
        int64_t at = rowStart + (sizes[3] == 1 ? 0 : j0 + c);
        row[c] = combine(row[c], at);
      }
    }
  }

private:
  float combine(float score, int64_t at) const {
    switch (kind) {
    case ZEST_ATTENTION_MASK_BOOL:
      return static_cast<const uint8_t *>(data)[at] ? score : -kInf;
    case ZEST_ATTENTION_MASK_F32:
      return score + static_cast<const float *>(data)[at];
    default:
      return score + maskValue(at);
    }
  }
  float maskValue(int64_t at) const {
    if (storage == 0)
      return static_cast<const float *>(data)[at];
    return toFloat(static_cast<const uint16_t *>(data)[at], storage);
  }
};

/// Scores of query rows [i0, i0 + rows) against keys [j0, j0 + cols):
/// scale * q k^T, masked, -inf above the diagonal when causal.
void blockScores(const Shape &shape, const Mask &mask, int64_t b, int64_t h,
                 const float *q, const float *k, int64_t i0, int64_t rows,
                 int64_t j0, int64_t cols, float *s) {
  int64_t d = shape.features;
  zest::kernels::sgemm(false, true, rows, cols, d, q + i0 * d, d, k + j0 * d, d,
                       0.0f, s, cols);
  for (int64_t x = 0; x < rows * cols; ++x)
    s[x] *= shape.scale;
  mask.apply(b, h, i0, rows, j0, cols, s, cols);
  if (shape.causal)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = std::max<int64_t>(0, i0 + r + 1 - j0); c < cols; ++c)
        s[r * cols + c] = -kInf;
}

/// Keys [0, end) that query rows up to `lastRow` may see.
int64_t keyEnd(const Shape &shape, int64_t lastRow) {
  return shape.causal ? std::min(shape.keys, lastRow + 1) : shape.keys;
}

/// One head's forward on f32 rows: q [queries, d], k, v [keys, d / e],
/// out [queries, e], lse [queries].
void forwardHead(const Shape &shape, const Mask &mask, int64_t b, int64_t h,
                 const float *q, const float *k, const float *v, float *out,
                 float *lse) {
  int64_t e = shape.valueFeatures;
  std::vector<float> s(kQueryBlock * kKeyBlock), maxima(kQueryBlock),
      sums(kQueryBlock);
  for (int64_t i0 = 0; i0 < shape.queries; i0 += kQueryBlock) {
    int64_t rows = std::min(kQueryBlock, shape.queries - i0);
    float *acc = out + i0 * e;
    std::fill(acc, acc + rows * e, 0.0f);
    std::fill(maxima.begin(), maxima.end(), -kInf);
    std::fill(sums.begin(), sums.end(), 0.0f);
    int64_t end = keyEnd(shape, i0 + rows - 1);
    for (int64_t j0 = 0; j0 < end; j0 += kKeyBlock) {
      int64_t cols = std::min(kKeyBlock, end - j0);
      blockScores(shape, mask, b, h, q, k, i0, rows, j0, cols, s.data());
      for (int64_t r = 0; r < rows; ++r) {
        float *row = s.data() + r * cols;
        float best = *std::max_element(row, row + cols);
        float newMax = std::max(maxima[r], best);
        float safe = newMax == -kInf ? 0.0f : newMax;
        float sum = 0.0f;
        for (int64_t c = 0; c < cols; ++c) {
          row[c] = std::exp(row[c] - safe);
          sum += row[c];
        }
        float alpha = maxima[r] == -kInf ? 0.0f : std::exp(maxima[r] - safe);
        sums[r] = sums[r] * alpha + sum;
        maxima[r] = newMax;
        if (alpha != 1.0f)
          for (float *x = acc + r * e, *xe = x + e; x < xe; ++x)
            *x *= alpha;
      }
      zest::kernels::sgemm(false, false, rows, e, cols, s.data(), cols,
                           v + j0 * e, e, 1.0f, acc, e);
    }
    for (int64_t r = 0; r < rows; ++r) {
      bool empty = sums[r] == 0.0f;
      float inverse = empty ? 0.0f : 1.0f / sums[r];
      for (float *x = acc + r * e, *xe = x + e; x < xe; ++x)
        *x *= inverse;
      lse[i0 + r] = empty ? kInf : maxima[r] + std::log(sums[r]);
    }
  }
}

/// The gradients one query head adds to its key/value head, on f32 rows:
/// dq [queries, d] overwritten, dk [keys, d] and dv [keys, e] accumulated.
void backwardHead(const Shape &shape, const Mask &mask, int64_t b, int64_t h,
                  const float *q, const float *k, const float *v,
                  const float *out, const float *lse, const float *dout,
                  float *dq, float *dk, float *dv) {
  int64_t d = shape.features, e = shape.valueFeatures;
  std::vector<float> p(kQueryBlock * kKeyBlock), dp(kQueryBlock * kKeyBlock),
      delta(shape.queries);
  for (int64_t i = 0; i < shape.queries; ++i) {
    float dot = 0.0f;
    for (int64_t x = 0; x < e; ++x)
      dot += dout[i * e + x] * out[i * e + x];
    delta[i] = dot;
  }
  std::fill(dq, dq + shape.queries * d, 0.0f);
  for (int64_t i0 = 0; i0 < shape.queries; i0 += kQueryBlock) {
    int64_t rows = std::min(kQueryBlock, shape.queries - i0);
    int64_t end = keyEnd(shape, i0 + rows - 1);
    for (int64_t j0 = 0; j0 < end; j0 += kKeyBlock) {
      int64_t cols = std::min(kKeyBlock, end - j0);
      blockScores(shape, mask, b, h, q, k, i0, rows, j0, cols, p.data());
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          p[r * cols + c] = std::exp(p[r * cols + c] - lse[i0 + r]);
      // dv += p^T dout; dp = dout v^T.
      zest::kernels::sgemm(true, false, cols, e, rows, p.data(), cols,
                           dout + i0 * e, e, 1.0f, dv + j0 * e, e);
      zest::kernels::sgemm(false, true, rows, cols, e, dout + i0 * e, e,
                           v + j0 * e, e, 0.0f, dp.data(), cols);
      // ds = p * (dp - delta) * scale, in dp.
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          float &x = dp[r * cols + c];
          x = p[r * cols + c] * (x - delta[i0 + r]) * shape.scale;
        }
      zest::kernels::sgemm(false, false, rows, d, cols, dp.data(), cols,
                           k + j0 * d, d, 1.0f, dq + i0 * d, d);
      zest::kernels::sgemm(true, false, cols, d, rows, dp.data(), cols,
                           q + i0 * d, d, 1.0f, dk + j0 * d, d);
    }
  }
}

/// The rows of one head in f32, contiguous: the storage itself for
/// contiguous f32 rows, else a widened copy gathered from the layout (and,
/// for an output, rounded and scattered back by `store`).
class HeadRows {
public:
  /// Row i of head `head` (over `heads` heads a batch) of `rows` rows of
  /// `dim` elements.
  HeadRows(int kind, RowLayout layout, int64_t heads, int64_t head,
           int64_t rows, int64_t dim)
      : kind(kind), stride(layout.row), rows(rows), dim(dim),
        offset(layout.at(heads, head, 0)) {}

  const float *load(const void *base) {
    if (direct())
      return static_cast<const float *>(base) + offset;
    buffer.resize(rows * dim);
    for (int64_t r = 0; r < rows; ++r) {
      int64_t at = offset + r * stride;
      float *row = buffer.data() + r * dim;
      if (kind == 0) {
        std::memcpy(row, static_cast<const float *>(base) + at,
                    dim * sizeof(float));
        continue;
      }
      auto *bits = static_cast<const uint16_t *>(base) + at;
      for (int64_t x = 0; x < dim; ++x)
        row[x] = toFloat(bits[x], kind);
    }
    return buffer.data();
  }

  float *output(void *base) {
    if (direct())
      return static_cast<float *>(base) + offset;
    buffer.assign(rows * dim, 0.0f);
    return buffer.data();
  }

  void store(void *base) const {
    if (direct())
      return;
    for (int64_t r = 0; r < rows; ++r) {
      int64_t at = offset + r * stride;
      const float *row = buffer.data() + r * dim;
      if (kind == 0) {
        std::memcpy(static_cast<float *>(base) + at, row, dim * sizeof(float));
        continue;
      }
      auto *bits = static_cast<uint16_t *>(base) + at;
      for (int64_t x = 0; x < dim; ++x)
        bits[x] = fromFloat(row[x], kind);
    }
  }

private:
  bool direct() const { return kind == 0 && stride == dim; }

  int kind;
  int64_t stride, rows, dim, offset;
  std::vector<float> buffer;
};

Shape makeShape(int64_t batch, int64_t heads, int64_t kvHeads, int64_t queries,
                int64_t keys, int64_t features, int64_t valueFeatures,
                float scale, int32_t causal, const AttentionLayouts &layouts) {
  return {batch,    heads,         kvHeads, queries,     keys,
          features, valueFeatures, scale,   causal != 0, layouts};
}

Mask makeMask(const void *data, int32_t kind, int storage, int64_t b, int64_t h,
              int64_t rows, int64_t cols) {
  return {data,
          data ? kind : ZEST_ATTENTION_MASK_NONE,
          {b, h, rows, cols},
          storage};
}

void attentionForward(const Shape &shape, const Mask &mask, int storage,
                      const void *q, const void *k, const void *v, void *out,
                      float *lse) {
  const AttentionLayouts &l = shape.layouts;
  int64_t d = shape.features, e = shape.valueFeatures;
  int64_t heads = shape.batch * shape.heads, rows = shape.queries;
#pragma omp parallel for schedule(dynamic)
  for (int64_t head = 0; head < heads; ++head) {
    int64_t b = head / shape.heads, h = head % shape.heads;
    int64_t kvHead = b * shape.kvHeads + h / shape.group();
    HeadRows qRows(storage, l.q, shape.heads, head, rows, d),
        kRows(storage, l.k, shape.kvHeads, kvHead, shape.keys, d),
        vRows(storage, l.v, shape.kvHeads, kvHead, shape.keys, e),
        oRows(storage, l.out, shape.heads, head, rows, e);
    float *oh = oRows.output(out);
    forwardHead(shape, mask, b, h, qRows.load(q), kRows.load(k), vRows.load(v),
                oh, lse + head * rows);
    oRows.store(out);
  }
}

/// The gradients of one key/value head: its own dk and dv, and dq of each
/// query head that reads it (so that no two threads write one row).
void backwardKvHead(const Shape &shape, const Mask &mask, int storage,
                    int64_t kvHead, const void *q, const void *k, const void *v,
                    const void *out, const float *lse, const void *dout,
                    void *dq, void *dk, void *dv) {
  const AttentionLayouts &l = shape.layouts;
  int64_t d = shape.features, e = shape.valueFeatures, keys = shape.keys,
          rows = shape.queries;
  int64_t b = kvHead / shape.kvHeads, g = kvHead % shape.kvHeads;
  HeadRows kRows(storage, l.k, shape.kvHeads, kvHead, keys, d),
      vRows(storage, l.v, shape.kvHeads, kvHead, keys, e),
      dkRows(storage, l.dk, shape.kvHeads, kvHead, keys, d),
      dvRows(storage, l.dv, shape.kvHeads, kvHead, keys, e);
  const float *kh = kRows.load(k), *vh = vRows.load(v);
  float *dkh = dkRows.output(dk), *dvh = dvRows.output(dv);
  std::fill(dkh, dkh + keys * d, 0.0f);
  std::fill(dvh, dvh + keys * e, 0.0f);
  for (int64_t h = g * shape.group(); h < (g + 1) * shape.group(); ++h) {
    int64_t head = b * shape.heads + h;
    HeadRows qRows(storage, l.q, shape.heads, head, rows, d),
        oRows(storage, l.out, shape.heads, head, rows, e),
        doRows(storage, l.dout, shape.heads, head, rows, e),
        dqRows(storage, l.dq, shape.heads, head, rows, d);
    float *dqh = dqRows.output(dq);
    backwardHead(shape, mask, b, h, qRows.load(q), kh, vh, oRows.load(out),
                 lse + head * rows, doRows.load(dout), dqh, dkh, dvh);
    dqRows.store(dq);
  }
  dkRows.store(dk);
  dvRows.store(dv);
}

void attentionBackward(const Shape &shape, const Mask &mask, int storage,
                       const void *q, const void *k, const void *v,
                       const void *out, const float *lse, const void *dout,
                       void *dq, void *dk, void *dv) {
  int64_t kvHeads = shape.batch * shape.kvHeads;
#pragma omp parallel for schedule(dynamic)
  for (int64_t kvHead = 0; kvHead < kvHeads; ++kvHead)
    backwardKvHead(shape, mask, storage, kvHead, q, k, v, out, lse, dout, dq,
                   dk, dv);
}

} // namespace

/// The entry points of one storage type (0: f32, 1: bf16, 2: f16).
#define ZEST_ATTENTION_ENTRIES(SUFFIX, T, STORAGE)                             \
  void zest_attention_forward##SUFFIX(ZEST_attention_forward_PARAMS(T)) {      \
    zest_progress();                                                           \
    AttentionLayouts layouts{{ZEST_ATTENTION_STRIDE_ARGS(q)},                  \
                             {ZEST_ATTENTION_STRIDE_ARGS(k)},                  \
                             {ZEST_ATTENTION_STRIDE_ARGS(v)},                  \
                             {ZEST_ATTENTION_STRIDE_ARGS(out)}};               \
    Shape shape = makeShape(batch, heads, kv_heads, q_len, kv_len, head_dim,   \
                            value_dim, scale, causal, layouts);                \
    attentionForward(shape,                                                    \
                     makeMask(mask, mask_kind, STORAGE, mask_batch,            \
                              mask_heads, mask_rows, mask_cols),               \
                     STORAGE, q, k, v, out, lse);                              \
  }                                                                            \
  void zest_attention_backward##SUFFIX(ZEST_attention_backward_PARAMS(T)) {    \
    zest_progress();                                                           \
    AttentionLayouts layouts{                                                  \
        {ZEST_ATTENTION_STRIDE_ARGS(q)},    {ZEST_ATTENTION_STRIDE_ARGS(k)},   \
        {ZEST_ATTENTION_STRIDE_ARGS(v)},    {ZEST_ATTENTION_STRIDE_ARGS(out)}, \
        {ZEST_ATTENTION_STRIDE_ARGS(dout)}, {ZEST_ATTENTION_STRIDE_ARGS(dq)},  \
        {ZEST_ATTENTION_STRIDE_ARGS(dk)},   {ZEST_ATTENTION_STRIDE_ARGS(dv)}}; \
    Shape shape = makeShape(batch, heads, kv_heads, q_len, kv_len, head_dim,   \
                            value_dim, scale, causal, layouts);                \
    attentionBackward(shape,                                                   \
                      makeMask(mask, mask_kind, STORAGE, mask_batch,           \
                               mask_heads, mask_rows, mask_cols),              \
                      STORAGE, q, k, v, out, lse, dout, dq, dk, dv);           \
  }

extern "C" {
ZEST_ATTENTION_ENTRIES(, float, 0)
ZEST_ATTENTION_ENTRIES(_bf16, uint16_t, 1)
ZEST_ATTENTION_ENTRIES(_f16, uint16_t, 2)
}
