//===- AttentionTiles.cuh - Tiled fused attention on the GPU -----*- CUDA -*-//
//
// FlashAttention-2's forward and backward in tiles of 64 query rows by 64
// keys held in shared memory, for head dimensions up to 128: a block of
// 16 x 16 threads, each thread a 4 x 4 part of a tile (rows ty + 16 r,
// columns tx + 16 c, so that a half-warp reads consecutive or broadcast
// words). f32 arithmetic on the C API's storage types (no tensor cores
// yet). The backward runs the key/value gradients and the query gradient as
// two kernels that each recompute the probabilities, so that no gradient is
// summed with atomics: results are deterministic. The emulated device runs
// the same source (DeviceBuiltins.cuh).
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_CUDA_BLAS_ATTENTIONTILES_CUH
#define ZEST_RUNTIME_CUDA_BLAS_ATTENTIONTILES_CUH

#include "AttentionKernels.cuh"
#include "DeviceBuiltins.cuh"

namespace zest::rt::cuda::tiles {

/// Query rows and keys of a tile.
constexpr int kTile = 64;
/// Threads along each side of a tile; each holds kPart rows and columns.
constexpr int kSide = 16;
constexpr int kPart = kTile / kSide;
constexpr int kThreads = kSide * kSide;
/// The largest head dimension the tiles take.
constexpr int kMaxFeatures = 128;
/// Row stride of a [kTile, kTile] tile: odd, so columns fall in distinct
/// banks.
constexpr int kSquareStride = kTile + 1;

/// Row stride of a [kTile, dims] tile in shared memory (odd: see above).
inline __host__ __device__ int strideOf(int dims) { return dims | 1; }

/// This thread's row and column in the 16 x 16 grid.
inline __device__ int threadRow() { return threadIdx.x / kSide; }
inline __device__ int threadCol() { return threadIdx.x % kSide; }

/// rows x dims values at src (row stride dims) as f32 into dst; rows past
/// `rows` are zero.
template <typename T>
inline __device__ void loadTile(float *dst, int dims, const T *src, int64_t ld,
                                int64_t rows) {
  int stride = strideOf(dims);
  for (int e = threadIdx.x; e < kTile * dims; e += kThreads) {
    int r = e / dims, x = e % dims;
    dst[r * stride + x] = r < rows ? load(src[r * ld + x]) : 0.0f;
  }
}

/// acc[r][c] = a[row r] . b[col c] over dims, both [kTile, dims] tiles.
inline __device__ void tileDot(float (&acc)[kPart][kPart], const float *a,
                               const float *b, int dims) {
  int stride = strideOf(dims), ty = threadRow(), tx = threadCol();
#pragma unroll
  for (int r = 0; r < kPart; ++r)
#pragma unroll
    for (int c = 0; c < kPart; ++c)
      acc[r][c] = 0.0f;
#pragma unroll 4
  for (int x = 0; x < dims; ++x) {
    float av[kPart], bv[kPart];
#pragma unroll
    for (int r = 0; r < kPart; ++r)
      av[r] = a[(ty + kSide * r) * stride + x];
#pragma unroll
    for (int c = 0; c < kPart; ++c)
      bv[c] = b[(tx + kSide * c) * stride + x];
#pragma unroll
    for (int r = 0; r < kPart; ++r)
#pragma unroll
      for (int c = 0; c < kPart; ++c)
        acc[r][c] = fmaf(av[r], bv[c], acc[r][c]);
  }
}

/// acc[r][x] += sum_j w[row r][j] m[j][x] over j < count, for this
/// thread's rows and the columns x = tx + 16 c < dims of a [kTile, dims]
/// tile m; w is a [kTile, kTile] tile.
template <int Cols>
inline __device__ void tileAccumulate(float (&acc)[kPart][Cols], const float *w,
                                      const float *m, int dims, int count) {
  int stride = strideOf(dims), ty = threadRow(), tx = threadCol();
#pragma unroll 2
  for (int j = 0; j < count; ++j) {
    float wv[kPart];
#pragma unroll
    for (int r = 0; r < kPart; ++r)
      wv[r] = w[(ty + kSide * r) * kSquareStride + j];
#pragma unroll
    for (int c = 0; c < Cols; ++c) {
      int x = tx + kSide * c;
      float mv = x < dims ? m[j * stride + x] : 0.0f;
#pragma unroll
      for (int r = 0; r < kPart; ++r)
        acc[r][c] = fmaf(wv[r], mv, acc[r][c]);
    }
  }
}

/// The maximum and sum over the 16 threads of a half-warp (one tile row).
inline __device__ float rowMax(float v) {
  for (int offset = kSide / 2; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
inline __device__ float rowSum(float v) {
  for (int offset = kSide / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

/// A row scale of one, for storeRows.
__device__ constexpr float kOnes[kPart] = {1.0f, 1.0f, 1.0f, 1.0f};
static_assert(kPart == 4, "kOnes lists kPart ones");

/// Stores this thread's rows of acc (scaled per row) as `rows` rows of
/// `dims` values at dst, `ld` apart.
template <typename T, int Cols>
inline __device__ void
storeRows(T *dst, int64_t ld, const float (&acc)[kPart][Cols],
          const float (&rowScale)[kPart], int dims, int64_t rows) {
  int ty = threadRow(), tx = threadCol();
#pragma unroll
  for (int r = 0; r < kPart; ++r) {
    int64_t row = ty + kSide * r;
    if (row >= rows)
      continue;
#pragma unroll
    for (int c = 0; c < Cols; ++c) {
      int x = tx + kSide * c;
      if (x < dims)
        dst[row * ld + x] = store<T>(acc[r][c] * rowScale[r]);
    }
  }
}

/// Where one block's query tile lies: batch, head, its first row and its
/// key/value head.
struct QueryTile {
  int64_t b, h, head, i0, rows, kvHead;
  inline __device__ QueryTile(const AttentionShape &s) {
    int64_t tiles = (s.queries + kTile - 1) / kTile;
    head = blockIdx.x / tiles;
    i0 = blockIdx.x % tiles * kTile;
    b = head / s.heads;
    h = head % s.heads;
    rows = min(int64_t(kTile), s.queries - i0);
    kvHead = b * s.kvHeads + h / (s.heads / s.kvHeads);
  }
  /// The keys any of its rows sees: all, or up to its last row (causal).
  inline __device__ int64_t keyEnd(const AttentionShape &s) const {
    return s.causal ? min(s.keys, i0 + rows) : s.keys;
  }
};

/// Where one block's key tile lies: its key/value head, batch, group of
/// query heads, first key and number of keys.
struct KeyTile {
  int64_t kvHead, j0, b, g, group, keys;
  inline __device__ KeyTile(const AttentionShape &s) {
    int64_t tiles = (s.keys + kTile - 1) / kTile;
    kvHead = blockIdx.x / tiles;
    j0 = blockIdx.x % tiles * kTile;
    b = kvHead / s.kvHeads;
    g = kvHead % s.kvHeads;
    group = s.heads / s.kvHeads;
    keys = min(int64_t(kTile), s.keys - j0);
  }
  /// The first query tile that sees a key of it.
  inline __device__ int64_t firstQueryTile(const AttentionShape &s) const {
    return s.causal ? j0 / kTile * kTile : 0;
  }
};

/// A query tile's log-sum-exps and deltas (rows first.., `rows` of them)
/// into shared memory: +inf and 0 past its rows, which then see no key.
inline __device__ void loadRowStats(float *lses, float *deltas,
                                    const float *lse, const float *delta,
                                    int64_t first, int64_t rows) {
  for (int e = threadIdx.x; e < kTile; e += blockDim.x) {
    lses[e] = e < rows ? lse[first + e] : INFINITY;
    deltas[e] = e < rows ? delta[first + e] : 0.0f;
  }
}

/// The score scale * sc + mask at query row i, key j, or -inf where masked,
/// causal or past the keys.
template <typename T>
inline __device__ float maskedScore(const AttentionShape &s, const void *mask,
                                    float sc, int64_t b, int64_t h, int64_t i,
                                    int64_t j) {
  if (j >= s.keys || i >= s.queries || (s.causal && j > i))
    return -INFINITY;
  return sc * s.scale + maskAt<T>(s, mask, b, h, i, j);
}

/// Shared memory of the forward: Q, K, V and P tiles.
inline size_t forwardSharedBytes(int features, int valueFeatures) {
  return sizeof(float) * kTile *
         (2 * strideOf(features) + strideOf(valueFeatures) + kSquareStride);
}

template <typename T, int Cols>
__global__ void __launch_bounds__(kThreads)
    attentionForwardTiled(AttentionShape s, const void *mask, const T *q,
                          const T *k, const T *v, T *out, float *lse) {
  ZEST_DYNAMIC_SHARED(float, shared);
  const int dq = s.features, dv = s.valueFeatures;
  float *qs = shared, *ks = qs + kTile * strideOf(dq),
        *vs = ks + kTile * strideOf(dq), *ps = vs + kTile * strideOf(dv);
  QueryTile t(s);
  int ty = threadRow(), tx = threadCol();
  const int64_t first = t.head * s.queries + t.i0;
  loadTile(qs, dq, q + s.queryAt(s.q, first), s.q.row, t.rows);
  float maximum[kPart], sum[kPart], acc[kPart][Cols] = {};
#pragma unroll
  for (int r = 0; r < kPart; ++r)
    maximum[r] = -INFINITY, sum[r] = 0.0f;
  for (int64_t j0 = 0; j0 < t.keyEnd(s); j0 += kTile) {
    int64_t keys = min(int64_t(kTile), s.keys - j0);
    __syncthreads(); // the last tile's K, V and P are read
    const int64_t at = t.kvHead * s.keys + j0;
    loadTile(ks, dq, k + s.keyAt(s.k, at), s.k.row, keys);
    loadTile(vs, dv, v + s.keyAt(s.v, at), s.v.row, keys);
    __syncthreads();
    float sc[kPart][kPart];
    tileDot(sc, qs, ks, dq);
#pragma unroll
    for (int r = 0; r < kPart; ++r) {
      int64_t i = t.i0 + ty + kSide * r;
      float tileMax = -INFINITY;
#pragma unroll
      for (int c = 0; c < kPart; ++c) {
        sc[r][c] =
            maskedScore<T>(s, mask, sc[r][c], t.b, t.h, i, j0 + tx + kSide * c);
        tileMax = fmaxf(tileMax, sc[r][c]);
      }
      float newMax = fmaxf(maximum[r], rowMax(tileMax));
      float alpha = maximum[r] == -INFINITY ? 0.0f : expf(maximum[r] - newMax);
      float partial = 0.0f;
#pragma unroll
      for (int c = 0; c < kPart; ++c) {
        float p = sc[r][c] == -INFINITY ? 0.0f : expf(sc[r][c] - newMax);
        ps[(ty + kSide * r) * kSquareStride + tx + kSide * c] = p;
        partial += p;
      }
      sum[r] = sum[r] * alpha + rowSum(partial);
      maximum[r] = newMax;
#pragma unroll
      for (int c = 0; c < Cols; ++c)
        acc[r][c] *= alpha;
    }
    __syncthreads();
    tileAccumulate(acc, ps, vs, dv, int(keys));
  }
  float inverse[kPart];
#pragma unroll
  for (int r = 0; r < kPart; ++r) {
    inverse[r] = sum[r] == 0.0f ? 0.0f : 1.0f / sum[r];
    int64_t row = ty + kSide * r;
    if (tx == 0 && row < t.rows)
      lse[first + row] = sum[r] == 0.0f ? INFINITY : maximum[r] + logf(sum[r]);
  }
  storeRows(out + s.queryAt(s.out, first), s.out.row, acc, inverse, dv, t.rows);
}

/// ds = p (dp - delta) scale with p = exp(score - lse), 0 where masked or
/// where the row sees no key (lse = +inf).
inline __device__ float scoreGradient(const AttentionShape &s, float score,
                                      float dp, float lse, float delta,
                                      float *p) {
  *p = score == -INFINITY || lse == INFINITY ? 0.0f : expf(score - lse);
  return *p * (dp - delta) * s.scale;
}

/// Shared memory of the query gradient: Q, dO, K, V and dS tiles.
inline size_t queryGradSharedBytes(int features, int valueFeatures) {
  return sizeof(float) * kTile *
         (2 * strideOf(features) + 2 * strideOf(valueFeatures) + kSquareStride);
}

/// dq_i = sum_j ds_ij k_j for one query tile, over the keys it sees.
template <typename T, int Cols>
__global__ void __launch_bounds__(kThreads)
    attentionQueryGradTiled(AttentionShape s, const void *mask, const T *q,
                            const T *k, const T *v, const float *lse,
                            const float *delta, const T *dout, T *dq) {
  ZEST_DYNAMIC_SHARED(float, shared);
  const int dk = s.features, dv = s.valueFeatures;
  float *qs = shared, *dos = qs + kTile * strideOf(dk),
        *ks = dos + kTile * strideOf(dv), *vs = ks + kTile * strideOf(dk),
        *dss = vs + kTile * strideOf(dv);
  QueryTile t(s);
  int ty = threadRow(), tx = threadCol();
  int64_t first = t.head * s.queries + t.i0;
  loadTile(qs, dk, q + s.queryAt(s.q, first), s.q.row, t.rows);
  loadTile(dos, dv, dout + s.queryAt(s.dout, first), s.dout.row, t.rows);
  float rowLse[kPart], rowDelta[kPart], acc[kPart][Cols] = {};
#pragma unroll
  for (int r = 0; r < kPart; ++r) {
    bool inside = ty + kSide * r < t.rows;
    rowLse[r] = inside ? lse[first + ty + kSide * r] : INFINITY;
    rowDelta[r] = inside ? delta[first + ty + kSide * r] : 0.0f;
  }
  for (int64_t j0 = 0; j0 < t.keyEnd(s); j0 += kTile) {
    int64_t keys = min(int64_t(kTile), s.keys - j0);
    __syncthreads(); // the last tile's K and dS are read
    const int64_t at = t.kvHead * s.keys + j0;
    loadTile(ks, dk, k + s.keyAt(s.k, at), s.k.row, keys);
    loadTile(vs, dv, v + s.keyAt(s.v, at), s.v.row, keys);
    __syncthreads();
    float sc[kPart][kPart], dp[kPart][kPart];
    tileDot(sc, qs, ks, dk);
    tileDot(dp, dos, vs, dv);
#pragma unroll
    for (int r = 0; r < kPart; ++r)
#pragma unroll
      for (int c = 0; c < kPart; ++c) {
        float score =
            maskedScore<T>(s, mask, sc[r][c], t.b, t.h, t.i0 + ty + kSide * r,
                           j0 + tx + kSide * c);
        float p;
        dss[(ty + kSide * r) * kSquareStride + tx + kSide * c] =
            scoreGradient(s, score, dp[r][c], rowLse[r], rowDelta[r], &p);
      }
    __syncthreads();
    tileAccumulate(acc, dss, ks, dk, int(keys));
  }
  storeRows(dq + s.queryAt(s.dq, first), s.dq.row, acc, kOnes, dk, t.rows);
}

/// Shared memory of the key/value gradients: K, V, Q, dO, P and dS tiles,
/// and a tile's lse and delta.
inline size_t keyValueGradSharedBytes(int features, int valueFeatures) {
  return sizeof(float) * kTile *
         (2 * strideOf(features) + 2 * strideOf(valueFeatures) +
          2 * kSquareStride + 2);
}

/// dk_j = sum_i ds_ij q_i and dv_j = sum_i p_ij dout_i for one key tile,
/// over every query head that reads its key/value head and every query
/// row that sees it. Tiles are transposed here: rows are keys, columns
/// query rows.
template <typename T, int Cols>
__global__ void __launch_bounds__(kThreads)
    attentionKeyValueGradTiled(AttentionShape s, const void *mask, const T *q,
                               const T *k, const T *v, const float *lse,
                               const float *delta, const T *dout, T *dk,
                               T *dv) {
  ZEST_DYNAMIC_SHARED(float, shared);
  const int dqk = s.features, dvv = s.valueFeatures;
  float *ks = shared, *vs = ks + kTile * strideOf(dqk),
        *qs = vs + kTile * strideOf(dvv), *dos = qs + kTile * strideOf(dqk),
        *ps = dos + kTile * strideOf(dvv), *dss = ps + kTile * kSquareStride,
        *lses = dss + kTile * kSquareStride, *deltas = lses + kTile;
  KeyTile t(s);
  int ty = threadRow(), tx = threadCol();
  const int64_t at = t.kvHead * s.keys + t.j0;
  loadTile(ks, dqk, k + s.keyAt(s.k, at), s.k.row, t.keys);
  loadTile(vs, dvv, v + s.keyAt(s.v, at), s.v.row, t.keys);
  float gk[kPart][Cols] = {}, gv[kPart][Cols] = {};
  for (int64_t h = t.g * t.group; h < (t.g + 1) * t.group; ++h) {
    int64_t head = t.b * s.heads + h;
    for (int64_t i0 = t.firstQueryTile(s); i0 < s.queries; i0 += kTile) {
      int64_t rows = min(int64_t(kTile), s.queries - i0),
              first = head * s.queries + i0;
      __syncthreads(); // the last tile's Q, dO, P and dS are read
      loadTile(qs, dqk, q + s.queryAt(s.q, first), s.q.row, rows);
      loadTile(dos, dvv, dout + s.queryAt(s.dout, first), s.dout.row, rows);
      loadRowStats(lses, deltas, lse, delta, first, rows);
      __syncthreads();
      float sc[kPart][kPart], dp[kPart][kPart];
      tileDot(sc, ks, qs, dqk);
      tileDot(dp, vs, dos, dvv);
#pragma unroll
      for (int r = 0; r < kPart; ++r)
#pragma unroll
        for (int c = 0; c < kPart; ++c) {
          int i = tx + kSide * c, at = (ty + kSide * r) * kSquareStride + i;
          float score = maskedScore<T>(s, mask, sc[r][c], t.b, h, i0 + i,
                                       t.j0 + ty + kSide * r);
          float p;
          dss[at] = scoreGradient(s, score, dp[r][c], lses[i], deltas[i], &p);
          ps[at] = p;
        }
      __syncthreads();
      tileAccumulate(gv, ps, dos, dvv, int(rows));
      tileAccumulate(gk, dss, qs, dqk, int(rows));
    }
  }
  storeRows(dk + s.keyAt(s.dk, at), s.dk.row, gk, kOnes, dqk, t.keys);
  storeRows(dv + s.keyAt(s.dv, at), s.dv.row, gv, kOnes, dvv, t.keys);
}

} // namespace zest::rt::cuda::tiles

#endif // ZEST_RUNTIME_CUDA_BLAS_ATTENTIONTILES_CUH
