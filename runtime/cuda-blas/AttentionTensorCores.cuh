//===- AttentionTensorCores.cuh - Attention on tensor cores ------*- CUDA -*-//
//
// FlashAttention-2 for bf16 and f16 storage with the products on tensor
// cores (WMMA: 16 x 16 x 16 fragments, f32 accumulation): a block of 4
// warps takes 64 rows (query rows forward and for the query gradient, keys
// for the key/value gradients), each warp 16 of them, against tiles of 64
// columns in shared memory. The products' f32 results go through shared
// memory, where each warp's lanes apply the scale, mask and softmax to its
// own rows (two lanes a row) and round the probabilities (and the scores'
// gradients) to the storage type for the next product, as FlashAttention
// does. Accumulators (the output, the gradients) stay in shared memory in
// f32. Head dimensions are multiples of 16 up to 128. Deterministic: the
// backward's two kernels recompute the probabilities, no atomics.
//
// Correct on an H200 (docs/Performance.md): 16-bit storage's default until
// AttentionFlash.cuh's kernels have run on a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_CUDA_BLAS_ATTENTIONTENSORCORES_CUH
#define ZEST_RUNTIME_CUDA_BLAS_ATTENTIONTENSORCORES_CUH

#include "AttentionTiles.cuh"

#ifdef ZEST_CUDA_EMULATED
#include "../cuda-emulated/Wmma.h"
#else
#include <mma.h>
#endif

namespace zest::rt::cuda::tensorcores {

#ifdef ZEST_CUDA_EMULATED
namespace wmma = ::zest::emulated::wmma;
#else
namespace wmma = nvcuda::wmma;
#endif

/// Rows of a block (4 warps x 16) and columns of a tile: the tiles' size,
/// so that their QueryTile and KeyTile place the blocks.
constexpr int kRows = tiles::kTile;
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
/// The largest head dimension.
constexpr int kMaxFeatures = 128;

/// Row strides in elements: padded (16-bit rows by 8, f32 rows by 4) as
/// WMMA's leading dimensions must be, which also spreads rows over banks.
inline __host__ __device__ int stride16(int dims) { return dims + 8; }
inline __host__ __device__ int stride32(int dims) { return dims + 4; }

/// Whether the kernels take these head dimensions.
inline bool takes(int64_t features, int64_t valueFeatures) {
  return features % 16 == 0 && valueFeatures % 16 == 0 &&
         features <= kMaxFeatures && valueFeatures <= kMaxFeatures;
}

template <typename T>
using RowA = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major>;
template <typename T>
using RowB = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major>;
template <typename T>
using ColB = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major>;
using Acc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

/// rows x dims values at src (row stride ld) into a [kRows, dims] tile of
/// stride stride16(dims); rows past `rows` are zero.
template <typename T>
inline __device__ void loadRows(T *dst, int dims, const T *src, int64_t ld,
                                int64_t rows) {
  int stride = stride16(dims);
  for (int e = threadIdx.x; e < kRows * dims; e += kThreads) {
    int r = e / dims, x = e % dims;
    dst[r * stride + x] = r < rows ? src[r * ld + x] : T(0.0f);
  }
}

/// out[16 w.., 0..64) (f32, stride stride32(64)) = a[16 w.., :] b^T for
/// this warp: a and b are [kRows, dims] 16-bit tiles (b's rows are the
/// columns of the result).
template <typename T>
inline __device__ void warpProductTransposed(float *out, const T *a, const T *b,
                                             int dims) {
  int warp = threadIdx.x / 32, lda = stride16(dims);
  for (int n = 0; n < kRows / 16; ++n) {
    Acc acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < dims / 16; ++k) {
      RowA<T> fa;
      ColB<T> fb;
      wmma::load_matrix_sync(fa, a + 16 * warp * lda + 16 * k, lda);
      wmma::load_matrix_sync(fb, b + 16 * n * lda + 16 * k, lda);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(out + 16 * warp * stride32(kRows) + 16 * n, acc,
                            stride32(kRows), wmma::mem_row_major);
  }
}

/// acc[16 w.., 0..dims) (f32, stride stride32(dims)) += w[16 w.., 0..64)
/// m for this warp: w a [kRows, 64] 16-bit tile, m a [64, dims] one.
template <typename T>
inline __device__ void warpAccumulate(float *acc, const T *w, const T *m,
                                      int dims) {
  int warp = threadIdx.x / 32, ldw = stride16(kRows), ldm = stride16(dims),
      ldacc = stride32(dims);
  for (int n = 0; n < dims / 16; ++n) {
    Acc c;
    float *at = acc + 16 * warp * ldacc + 16 * n;
    wmma::load_matrix_sync(c, at, ldacc, wmma::mem_row_major);
    for (int k = 0; k < kRows / 16; ++k) {
      RowA<T> fa;
      RowB<T> fb;
      wmma::load_matrix_sync(fa, w + 16 * warp * ldw + 16 * k, ldw);
      wmma::load_matrix_sync(fb, m + 16 * k * ldm + 16 * n, ldm);
      wmma::mma_sync(c, fa, fb, c);
    }
    wmma::store_matrix_sync(at, c, ldacc, wmma::mem_row_major);
  }
}

/// This lane's row of its warp's 16 (two lanes a row) and which half of
/// the row's columns it takes.
inline __device__ int laneRow() {
  return threadIdx.x / 32 * 16 + threadIdx.x % 32 / 2;
}
inline __device__ int laneHalf() { return threadIdx.x % 2; }

/// The two lanes of a row combined.
inline __device__ float pairMax(float v) {
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
}
inline __device__ float pairSum(float v) {
  return v + __shfl_xor_sync(0xffffffffu, v, 1);
}

/// Zeroes a [kRows, dims] f32 tile.
inline __device__ void zeroTile(float *tile, int dims) {
  for (int e = threadIdx.x; e < kRows * stride32(dims); e += kThreads)
    tile[e] = 0.0f;
}

/// Stores rows of an f32 tile (each scaled by rowScale[row]) to dst, `ld`
/// apart.
template <typename T>
inline __device__ void storeTile(T *dst, int64_t ld, const float *tile,
                                 int dims, int64_t rows,
                                 const float *rowScale) {
  for (int e = threadIdx.x; e < kRows * dims; e += kThreads) {
    int r = e / dims, x = e % dims;
    if (r < rows)
      dst[r * ld + x] =
          store<T>(tile[r * stride32(dims) + x] * (rowScale ? rowScale[r] : 1));
  }
}

/// Shared memory of the forward: Q, K, V (16-bit), S (f32), P (16-bit), the
/// output (f32), and a running maximum and sum per row.
inline size_t forwardSharedBytes(int dq, int dv) {
  return kRows * (2 * (2 * stride16(dq) + stride16(dv) + stride16(kRows)) +
                  4 * (stride32(kRows) + stride32(dv) + 2));
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    attentionForwardTensorCores(AttentionShape s, const void *mask, const T *q,
                                const T *k, const T *v, T *out, float *lse) {
  ZEST_DYNAMIC_SHARED(unsigned char, shared);
  const int dq = s.features, dv = s.valueFeatures;
  T *qs = reinterpret_cast<T *>(shared), *ks = qs + kRows * stride16(dq),
    *vs = ks + kRows * stride16(dq), *ps = vs + kRows * stride16(dv);
  float *ss = reinterpret_cast<float *>(ps + kRows * stride16(kRows)),
        *os = ss + kRows * stride32(kRows),
        *maximum = os + kRows * stride32(dv), *sum = maximum + kRows;
  tiles::QueryTile t(s);
  const int64_t first = t.head * s.queries + t.i0;
  loadRows(qs, dq, q + s.queryAt(s.q, first), s.q.row, t.rows);
  zeroTile(os, dv);
  for (int r = threadIdx.x; r < kRows; r += kThreads)
    maximum[r] = -INFINITY, sum[r] = 0.0f;
  int row = laneRow(), half = laneHalf();
  for (int64_t j0 = 0; j0 < t.keyEnd(s); j0 += kRows) {
    int64_t keys = min(int64_t(kRows), s.keys - j0);
    __syncthreads(); // the last tile's K and V are read
    const int64_t at = t.kvHead * s.keys + j0;
    loadRows(ks, dq, k + s.keyAt(s.k, at), s.k.row, keys);
    loadRows(vs, dv, v + s.keyAt(s.v, at), s.v.row, keys);
    __syncthreads();
    warpProductTransposed(ss, qs, ks, dq);
    __syncwarp();
    float *srow = ss + row * stride32(kRows), tileMax = -INFINITY;
    for (int c = half * 32; c < half * 32 + 32; ++c) {
      srow[c] =
          tiles::maskedScore<T>(s, mask, srow[c], t.b, t.h, t.i0 + row, j0 + c);
      tileMax = fmaxf(tileMax, srow[c]);
    }
    float newMax = fmaxf(maximum[row], pairMax(tileMax));
    float alpha =
        maximum[row] == -INFINITY ? 0.0f : expf(maximum[row] - newMax);
    float partial = 0.0f;
    for (int c = half * 32; c < half * 32 + 32; ++c) {
      float p = srow[c] == -INFINITY ? 0.0f : expf(srow[c] - newMax);
      ps[row * stride16(kRows) + c] = store<T>(p);
      partial += p;
    }
    partial = pairSum(partial);
    float *orow = os + row * stride32(dv);
    for (int x = half; x < dv; x += 2)
      orow[x] *= alpha;
    __syncwarp(); // both lanes read the row's maximum before it changes
    if (half == 0)
      sum[row] = sum[row] * alpha + partial, maximum[row] = newMax;
    __syncwarp();
    warpAccumulate(os, ps, vs, dv);
    __syncwarp();
  }
  __syncthreads();
  for (int r = threadIdx.x; r < kRows; r += kThreads) {
    if (r < t.rows)
      lse[first + r] = sum[r] == 0.0f ? INFINITY : maximum[r] + logf(sum[r]);
    sum[r] = sum[r] == 0.0f ? 0.0f : 1.0f / sum[r];
  }
  __syncthreads();
  storeTile(out + s.queryAt(s.out, first), s.out.row, os, dv, t.rows, sum);
}

/// For this lane's half of its row of a [kRows, 64] tile: p = exp(score -
/// lse) into pf (f32) and ps (16-bit), then ds = p (dp - delta) scale into
/// dss, from the raw products in pf and dpf. `query(c)` and `key(c)` give
/// column c's query row and key, `rowLse` and `rowDelta` the query row's.
template <typename T, typename QueryOf, typename KeyOf, typename LseOf,
          typename DeltaOf>
inline __device__ void
scoreGradients(const AttentionShape &s, const void *mask, int64_t b, int64_t h,
               float *pf, const float *dpf, T *ps, T *dss, QueryOf query,
               KeyOf key, LseOf rowLse, DeltaOf rowDelta) {
  int row = laneRow(), half = laneHalf();
  for (int c = half * 32; c < half * 32 + 32; ++c) {
    int at32 = row * stride32(kRows) + c, at16 = row * stride16(kRows) + c;
    float score =
        tiles::maskedScore<T>(s, mask, pf[at32], b, h, query(c), key(c));
    float p;
    float ds =
        tiles::scoreGradient(s, score, dpf[at32], rowLse(c), rowDelta(c), &p);
    ps[at16] = store<T>(p);
    dss[at16] = store<T>(ds);
  }
}

/// Shared memory of the query gradient: Q, dO, K, V (16-bit), S and dP
/// (f32), dS (16-bit), dQ (f32).
inline size_t queryGradSharedBytes(int dq, int dv) {
  return kRows *
         (2 * (2 * stride16(dq) + 2 * stride16(dv) + 2 * stride16(kRows)) +
          4 * (2 * stride32(kRows) + stride32(dq)));
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    attentionQueryGradTensorCores(AttentionShape s, const void *mask,
                                  const T *q, const T *k, const T *v,
                                  const float *lse, const float *delta,
                                  const T *dout, T *dq) {
  ZEST_DYNAMIC_SHARED(unsigned char, shared);
  const int dk = s.features, dv = s.valueFeatures;
  T *qs = reinterpret_cast<T *>(shared), *dos = qs + kRows * stride16(dk),
    *ks = dos + kRows * stride16(dv), *vs = ks + kRows * stride16(dk),
    *ps = vs + kRows * stride16(dv), *dss = ps + kRows * stride16(kRows);
  float *sf = reinterpret_cast<float *>(dss + kRows * stride16(kRows)),
        *dpf = sf + kRows * stride32(kRows),
        *acc = dpf + kRows * stride32(kRows);
  tiles::QueryTile t(s);
  int64_t first = t.head * s.queries + t.i0;
  loadRows(qs, dk, q + s.queryAt(s.q, first), s.q.row, t.rows);
  loadRows(dos, dv, dout + s.queryAt(s.dout, first), s.dout.row, t.rows);
  zeroTile(acc, dk);
  int row = laneRow();
  bool inside = row < t.rows;
  float myLse = inside ? lse[first + row] : INFINITY,
        myDelta = inside ? delta[first + row] : 0.0f;
  for (int64_t j0 = 0; j0 < t.keyEnd(s); j0 += kRows) {
    int64_t keys = min(int64_t(kRows), s.keys - j0);
    __syncthreads(); // the last tile's K and V are read
    const int64_t at = t.kvHead * s.keys + j0;
    loadRows(ks, dk, k + s.keyAt(s.k, at), s.k.row, keys);
    loadRows(vs, dv, v + s.keyAt(s.v, at), s.v.row, keys);
    __syncthreads();
    warpProductTransposed(sf, qs, ks, dk);
    warpProductTransposed(dpf, dos, vs, dv);
    __syncwarp();
    scoreGradients(
        s, mask, t.b, t.h, sf, dpf, ps, dss, [&](int) { return t.i0 + row; },
        [&](int c) { return j0 + c; }, [&](int) { return myLse; },
        [&](int) { return myDelta; });
    __syncwarp();
    warpAccumulate(acc, dss, ks, dk);
  }
  __syncthreads();
  storeTile(dq + s.queryAt(s.dq, first), s.dq.row, acc, dk, t.rows, nullptr);
}

/// Shared memory of the key/value gradients: K, V, Q, dO (16-bit), S and
/// dP (f32), P and dS (16-bit), dK and dV (f32), and a query tile's lse and
/// delta.
inline size_t keyValueGradSharedBytes(int dq, int dv) {
  return kRows *
         (2 * (2 * stride16(dq) + 2 * stride16(dv) + 2 * stride16(kRows)) +
          4 * (2 * stride32(kRows) + stride32(dq) + stride32(dv) + 2));
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    attentionKeyValueGradTensorCores(AttentionShape s, const void *mask,
                                     const T *q, const T *k, const T *v,
                                     const float *lse, const float *delta,
                                     const T *dout, T *dk, T *dv) {
  ZEST_DYNAMIC_SHARED(unsigned char, shared);
  const int dqk = s.features, dvv = s.valueFeatures;
  T *ks = reinterpret_cast<T *>(shared), *vs = ks + kRows * stride16(dqk),
    *qs = vs + kRows * stride16(dvv), *dos = qs + kRows * stride16(dqk),
    *ps = dos + kRows * stride16(dvv), *dss = ps + kRows * stride16(kRows);
  float *sf = reinterpret_cast<float *>(dss + kRows * stride16(kRows)),
        *dpf = sf + kRows * stride32(kRows),
        *gk = dpf + kRows * stride32(kRows), *gv = gk + kRows * stride32(dqk),
        *lses = gv + kRows * stride32(dvv), *deltas = lses + kRows;
  tiles::KeyTile t(s);
  const int64_t at = t.kvHead * s.keys + t.j0;
  loadRows(ks, dqk, k + s.keyAt(s.k, at), s.k.row, t.keys);
  loadRows(vs, dvv, v + s.keyAt(s.v, at), s.v.row, t.keys);
  zeroTile(gk, dqk);
  zeroTile(gv, dvv);
  int row = laneRow();
  for (int64_t h = t.g * t.group; h < (t.g + 1) * t.group; ++h) {
    int64_t head = t.b * s.heads + h;
    for (int64_t i0 = t.firstQueryTile(s); i0 < s.queries; i0 += kRows) {
      int64_t rows = min(int64_t(kRows), s.queries - i0),
              first = head * s.queries + i0;
      __syncthreads(); // the last tile's Q, dO, lse and delta are read
      loadRows(qs, dqk, q + s.queryAt(s.q, first), s.q.row, rows);
      loadRows(dos, dvv, dout + s.queryAt(s.dout, first), s.dout.row, rows);
      tiles::loadRowStats(lses, deltas, lse, delta, first, rows);
      __syncthreads();
      // Transposed: rows are keys, columns query rows.
      warpProductTransposed(sf, ks, qs, dqk);
      warpProductTransposed(dpf, vs, dos, dvv);
      __syncwarp();
      scoreGradients(
          s, mask, t.b, h, sf, dpf, ps, dss, [&](int c) { return i0 + c; },
          [&](int) { return t.j0 + row; }, [&](int c) { return lses[c]; },
          [&](int c) { return deltas[c]; });
      __syncwarp();
      warpAccumulate(gv, ps, dos, dvv);
      warpAccumulate(gk, dss, qs, dqk);
    }
  }
  __syncthreads();
  storeTile(dk + s.keyAt(s.dk, at), s.dk.row, gk, dqk, t.keys, nullptr);
  storeTile(dv + s.keyAt(s.dv, at), s.dv.row, gv, dvv, t.keys, nullptr);
}

} // namespace zest::rt::cuda::tensorcores

#endif // ZEST_RUNTIME_CUDA_BLAS_ATTENTIONTENSORCORES_CUH
