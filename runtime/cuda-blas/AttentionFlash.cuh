//===- AttentionFlash.cuh - FlashAttention-2 in registers --------*- CUDA -*-//
//
// FlashAttention-2's forward and backward for bf16 and f16 storage, built on
// the tensor cores' warp-level products (mma.sync m16n8k16, f32
// accumulation) with operands loaded by ldmatrix and tiles copied by
// cp.async, as FlashAttention-2 does on Ampere and Hopper. Unlike the WMMA
// kernels (AttentionTensorCores.cuh), the scores, the probabilities and the
// accumulators never leave registers: mma's accumulator layout is known
// (a lane holds rows lane/4 and lane/4 + 8, columns 2 (lane % 4) and the next
// of each 8), so the softmax runs on the accumulators, reduced across the
// four lanes of a row, and two 16 x 8 accumulator tiles are one 16 x 16
// operand of the next product once rounded to the storage type.
//
// A block of 4 warps takes 64 rows (query rows forward and for the query
// gradient, keys for the key/value gradients), each warp 16, against tiles
// of 64 keys (or 64 or 32 query rows) in shared memory. Head dimensions are
// padded with zeros to D, 64 or 128. The backward runs two
// kernels that each recompute the probabilities from the forward's
// log-sum-exp, so that no gradient is summed with atomics: deterministic.
//
// Not yet run on a GPU (compiled for sm_90 here; no session since has had
// one): chosen only with ZEST_CUDA_ATTENTION=flash until the bundle's
// attention test passes with it (scripts/gpu-bundle-run.sh runs it). The
// emulated device runs these kernels' source (PtxMatrices.cuh).
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_CUDA_BLAS_ATTENTIONFLASH_CUH
#define ZEST_RUNTIME_CUDA_BLAS_ATTENTIONFLASH_CUH

#include "AttentionTiles.cuh"
#include "PtxMatrices.cuh"

#include <type_traits>

namespace zest::rt::cuda::flash {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
/// Rows of a block (16 a warp); also the keys of a forward or query-gradient
/// tile, so that tiles::QueryTile and tiles::KeyTile place the blocks.
constexpr int kRows = 16 * kWarps;
static_assert(kRows == tiles::kTile, "blocks are placed by tiles' tiles");
constexpr int kMaxFeatures = 128;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

/// Whether the kernels take these head dimensions.
inline bool takes(int64_t features, int64_t valueFeatures) {
  return features % 16 == 0 && valueFeatures % 16 == 0 &&
         features <= kMaxFeatures && valueFeatures <= kMaxFeatures;
}

/// The padded head dimension of an instance: 64 or 128 (two instances
/// keep every executable's device code small; narrower heads are rare).
inline int paddedFeatures(int64_t features, int64_t valueFeatures) {
  return features <= 64 && valueFeatures <= 64 ? 64 : 128;
}

/// Row stride of a tile in elements: padded by 16 bytes, so that the eight
/// rows one ldmatrix reads fall in distinct banks.
template <int D> constexpr int kStride = D + 8;

/// Query rows of the key/value gradients' tiles: fewer for wide heads,
/// whose gradients take more registers.
template <int D> constexpr int kQueryColumns = D <= 64 ? 64 : 32;

//===----------------------------------------------------------------------===//
// Warp-level primitives
//===----------------------------------------------------------------------===//

using ptx::commitCopies;
using ptx::copyAsync16;
using ptx::loadMatrices;
using ptx::loadMatricesTransposed;
using ptx::mma;
using ptx::waitCopies;

/// Two f32 values rounded to T, the first in the low half.
template <typename T> inline __device__ uint32_t pack(float lo, float hi) {
  T pair[2] = {store<T>(lo), store<T>(hi)};
  uint32_t bits;
  memcpy(&bits, pair, sizeof bits);
  return bits;
}

/// Accumulator tiles of a warp: 16 rows by N columns, 8 columns a tile.
template <int N> using Tiles = float[N / 8][4];

inline __device__ int lane() { return threadIdx.x % 32; }
inline __device__ int warp() { return threadIdx.x / 32; }
/// This lane's first row (of 16) and first column (of each tile's 8).
inline __device__ int laneRow() { return lane() / 4; }
inline __device__ int laneColumn() { return 2 * (lane() % 4); }

/// acc += a b[:, 0..N) for the warp's 16 x 16 operand a at depth k0: b is
/// stored [N][K] (its columns as rows, like K for Q K^T) or, Transposed,
/// [K][N] (like V for P V); ldb its row stride.
template <typename T, int N, bool Transposed>
inline __device__ void mmaColumns(Tiles<N> &acc, const uint32_t (&a)[4],
                                  const T *b, int ldb, int k0) {
  int l = lane();
#pragma unroll
  for (int n0 = 0; n0 < N; n0 += 16) {
    uint32_t f[4];
    if constexpr (Transposed)
      loadMatricesTransposed(f, b + (k0 + l % 8 + l / 8 % 2 * 8) * ldb + n0 +
                                    l / 16 * 8);
    else
      loadMatrices(f, b + (n0 + l % 8 + l / 16 * 8) * ldb + k0 + l / 8 % 2 * 8);
    mma<T>(acc[n0 / 8], a, f[0], f[1]);
    mma<T>(acc[n0 / 8 + 1], a, f[2], f[3]);
  }
}

/// acc += a b for the warp: a its 16 x K rows in shared memory (stride lda),
/// b as in mmaColumns.
template <typename T, int K, int N, bool Transposed>
inline __device__ void warpProduct(Tiles<N> &acc, const T *a, int lda,
                                   const T *b, int ldb) {
  int l = lane();
#pragma unroll
  for (int k0 = 0; k0 < K; k0 += 16) {
    uint32_t f[4];
    loadMatrices(f, a + (l % 16) * lda + k0 + l / 16 * 8);
    mmaColumns<T, N, Transposed>(acc, f, b, ldb, k0);
  }
}

/// acc += p b for the warp: p its 16 x K accumulator tiles (probabilities or
/// scores' gradients), rounded to T as the product's operand.
template <typename T, int K, int N, bool Transposed>
inline __device__ void warpProductOfTiles(Tiles<N> &acc, const Tiles<K> &p,
                                          const T *b, int ldb) {
#pragma unroll
  for (int k0 = 0; k0 < K; k0 += 16) {
    const float *lo = p[k0 / 8], *hi = p[k0 / 8 + 1];
    uint32_t f[4] = {pack<T>(lo[0], lo[1]), pack<T>(lo[2], lo[3]),
                     pack<T>(hi[0], hi[1]), pack<T>(hi[2], hi[3])};
    mmaColumns<T, N, Transposed>(acc, f, b, ldb, k0);
  }
}

//===----------------------------------------------------------------------===//
// Tiles in shared memory
//===----------------------------------------------------------------------===//

/// rows x dims values at src (row stride `stride`, rows 16-byte aligned)
/// into a [Rows, D] tile at dst, without blocking; rows past `rows` and
/// columns past `dims` are zero.
template <int D, int Rows, typename T>
inline __device__ void copyTile(T *dst, const T *src, int64_t rows, int dims,
                                int64_t stride) {
  constexpr int chunks = D / 8;
  for (int e = threadIdx.x; e < Rows * chunks; e += kThreads) {
    int r = e / chunks, c = e % chunks;
    bool valid = r < rows && c * 8 < dims;
    copyAsync16(dst + r * kStride<D> + c * 8,
                valid ? src + r * stride + c * 8 : src, valid);
  }
}

/// `rows` rows of x (`s.features` wide, rows `xStride` apart) and of y
/// (`s.valueFeatures` wide, `yStride` apart: K and V, or Q and dO) into the
/// [Rows, D] tiles xs and ys, without blocking, as two groups of copies
/// (x's first).
template <int D, int Rows, typename T>
inline __device__ void copyRowPair(T *xs, T *ys, const T *x, int64_t xStride,
                                   const T *y, int64_t yStride,
                                   const AttentionShape &s, int64_t rows) {
  copyTile<D, Rows>(xs, x, rows, int(s.features), xStride);
  commitCopies();
  copyTile<D, Rows>(ys, y, rows, int(s.valueFeatures), yStride);
  commitCopies();
}

/// K and V's rows from key row `at` (of [batch * kvHeads * keys]).
template <int D, int Rows, typename T>
inline __device__ void copyKeyValues(T *ks, T *vs, const T *k, const T *v,
                                     const AttentionShape &s, int64_t at,
                                     int64_t rows) {
  copyRowPair<D, Rows>(ks, vs, k + s.keyAt(s.k, at), s.k.row,
                       v + s.keyAt(s.v, at), s.v.row, s, rows);
}

/// Q and dO's rows from query row `at` (of [batch * heads * queries]).
template <int D, int Rows, typename T>
inline __device__ void copyQueryGrads(T *qs, T *dos, const T *q, const T *dout,
                                      const AttentionShape &s, int64_t at,
                                      int64_t rows) {
  copyRowPair<D, Rows>(qs, dos, q + s.queryAt(s.q, at), s.q.row,
                       dout + s.queryAt(s.dout, at), s.dout.row, s, rows);
}

/// Waits for every copy of the block (a tile's rows are copied by all its
/// threads): before a warp stages its results in its rows of a tile.
inline __device__ void finishCopies() {
  waitCopies<0>();
  __syncthreads();
}

/// Stores the warp's 16 x D accumulator rows (row r scaled by
/// rowScale[r >= 8]) as `rows` rows of `dims` values at dst, `stride` apart,
/// through its rows of the tile `stage` so that the stores are 16 bytes
/// wide.
template <typename T, int D>
inline __device__ void storeWarpRows(T *dst, T *stage, const Tiles<D> &acc,
                                     const float (&rowScale)[2], int64_t rows,
                                     int dims, int64_t stride) {
  int r = laneRow(), c = laneColumn();
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      uint32_t bits = pack<T>(acc[n][2 * half] * rowScale[half],
                              acc[n][2 * half + 1] * rowScale[half]);
      memcpy(stage + (r + 8 * half) * kStride<D> + 8 * n + c, &bits, 4);
    }
  __syncwarp();
  int chunks = dims / 8;
  for (int e = lane(); e < 16 * chunks; e += 32) {
    int row = e / chunks, chunk = e % chunks;
    if (row < rows)
      *reinterpret_cast<uint4 *>(dst + row * stride + chunk * 8) =
          *reinterpret_cast<const uint4 *>(stage + row * kStride<D> +
                                           chunk * 8);
  }
}

/// The warp's scores in log2 units: scale * log2(e) * (q . k) plus the
/// mask's value, -inf where masked, causal or past the keys. The tiles'
/// rows start at row0, their columns at col0; rows are query rows (i) and
/// columns keys (j), or the other way round when !RowsAreQueries. `plain`
/// says no element of the tile needs a mask.
template <typename T, int N, bool RowsAreQueries>
inline __device__ void scoresInLog2(Tiles<N> &sc, const AttentionShape &s,
                                    const void *mask, int64_t b, int64_t h,
                                    int64_t row0, int64_t col0, bool plain) {
  const float scale = s.scale * kLog2e;
  if (plain) {
#pragma unroll
    for (int n = 0; n < N / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        sc[n][e] *= scale;
    return;
  }
#pragma unroll
  for (int n = 0; n < N / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      int64_t row = row0 + laneRow() + 8 * (e / 2),
              col = col0 + 8 * n + laneColumn() + e % 2;
      int64_t i = RowsAreQueries ? row : col, j = RowsAreQueries ? col : row;
      sc[n][e] =
          j >= s.keys || (s.causal && j > i)
              ? -INFINITY
              : sc[n][e] * scale + maskAt<T>(s, mask, b, h, i, j) * kLog2e;
    }
}

/// Whether every query row of tile `t` sees every one of the `keys` keys
/// from j0 (no mask, none causal-masked, a whole tile): scores need no mask.
inline __device__ bool seesAllKeys(const AttentionShape &s,
                                   const tiles::QueryTile &t, int64_t j0,
                                   int64_t keys) {
  return s.maskKind == ZEST_ATTENTION_MASK_NONE && keys == kRows &&
         (!s.causal || j0 + kRows - 1 <= t.i0);
}

/// The sum or maximum over the four lanes that hold a row.
inline __device__ float rowSum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}
inline __device__ float rowMax(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

/// Shared memory of the forward: Q, K and V tiles.
inline size_t forwardSharedBytes(int d) { return 3 * kRows * (d + 8) * 2; }

/// The online softmax of one key tile for the warp's rows: sc (scores in
/// log2 units) becomes exp2(sc - max), the running maximum and this lane's
/// part of the running sum are updated, and o is rescaled.
template <int D>
inline __device__ void onlineSoftmax(Tiles<kRows> &sc, Tiles<D> &o,
                                     float (&maximum)[2], float (&sum)[2]) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float tileMax = -INFINITY;
#pragma unroll
    for (int n = 0; n < kRows / 8; ++n)
      tileMax = fmaxf(tileMax, fmaxf(sc[n][2 * half], sc[n][2 * half + 1]));
    float newMax = fmaxf(maximum[half], rowMax(tileMax));
    // A row that has seen only masked keys keeps -inf: exp2 of 0 then.
    float base = newMax == -INFINITY ? 0.0f : newMax;
    float alpha = exp2f(maximum[half] - base), partial = 0.0f;
    maximum[half] = newMax;
#pragma unroll
    for (int n = 0; n < kRows / 8; ++n)
#pragma unroll
      for (int e = 2 * half; e < 2 * half + 2; ++e) {
        sc[n][e] = exp2f(sc[n][e] - base);
        partial += sc[n][e];
      }
    sum[half] = sum[half] * alpha + partial;
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      o[n][2 * half] *= alpha, o[n][2 * half + 1] *= alpha;
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    flashForward(AttentionShape s, const void *mask, const T *q, const T *k,
                 const T *v, T *out, float *lse) {
  ZEST_DYNAMIC_SHARED(unsigned char, shared);
  constexpr int ld = kStride<D>;
  T *qs = reinterpret_cast<T *>(shared), *ks = qs + kRows * ld,
    *vs = ks + kRows * ld;
  tiles::QueryTile t(s);
  int64_t first = t.head * s.queries + t.i0;
  copyTile<D, kRows>(qs, q + s.queryAt(s.q, first), t.rows, int(s.features),
                     s.q.row);
  commitCopies();
  T *qw = qs + 16 * warp() * ld;
  float o[D / 8][4] = {}, maximum[2] = {-INFINITY, -INFINITY},
              sum[2] = {0.0f, 0.0f};
  for (int64_t j0 = 0; j0 < t.keyEnd(s); j0 += kRows) {
    int64_t keys = min(int64_t(kRows), s.keys - j0);
    __syncthreads(); // the last tile's K and V are read
    copyKeyValues<D, kRows>(ks, vs, k, v, s, t.kvHead * s.keys + j0, keys);
    waitCopies<1>(); // Q and K
    __syncthreads();
    float sc[kRows / 8][4] = {};
    warpProduct<T, D, kRows, false>(sc, qw, ld, ks, ld);
    bool plain = seesAllKeys(s, t, j0, keys);
    scoresInLog2<T, kRows, true>(sc, s, mask, t.b, t.h, t.i0 + 16 * warp(), j0,
                                 plain);
    onlineSoftmax<D>(sc, o, maximum, sum);
    waitCopies<0>(); // V
    __syncthreads();
    warpProductOfTiles<T, kRows, D, true>(o, sc, vs, ld);
  }
  float inverse[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float total = rowSum(sum[half]);
    int64_t row = 16 * warp() + laneRow() + 8 * half;
    if (lane() % 4 == 0 && row < t.rows)
      lse[first + row] =
          total == 0.0f ? INFINITY : (maximum[half] + log2f(total)) * kLn2;
    inverse[half] = total == 0.0f ? 0.0f : 1.0f / total;
  }
  int64_t rows = t.rows - 16 * warp();
  finishCopies();
  storeWarpRows<T, D>(out + s.queryAt(s.out, first) + 16 * warp() * s.out.row,
                      qw, o, inverse, rows, int(s.valueFeatures), s.out.row);
}

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

/// From the warp's raw scores sc (in log2 units, masked) and dp = dO V^T:
/// p = exp2(sc - lse) into sc and ds = p (dp - delta) scale into dp, where
/// lseOf(e)/deltaOf(e) give element e's query row's log-sum-exp (log2
/// units) and delta for tile n.
template <int N, typename LseOf, typename DeltaOf>
inline __device__ void scoreGradients(Tiles<N> &sc, Tiles<N> &dp, float scale,
                                      LseOf lseOf, DeltaOf deltaOf) {
#pragma unroll
  for (int n = 0; n < N / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float p = exp2f(sc[n][e] - lseOf(n, e));
      sc[n][e] = p;
      dp[n][e] = p * (dp[n][e] - deltaOf(n, e)) * scale;
    }
}

/// Shared memory of the query gradient: Q, dO, K and V tiles.
inline size_t queryGradSharedBytes(int d) { return 4 * kRows * (d + 8) * 2; }

template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    flashQueryGrad(AttentionShape s, const void *mask, const T *q, const T *k,
                   const T *v, const float *lse, const float *delta,
                   const T *dout, T *dq) {
  ZEST_DYNAMIC_SHARED(unsigned char, shared);
  constexpr int ld = kStride<D>;
  T *qs = reinterpret_cast<T *>(shared), *dos = qs + kRows * ld,
    *ks = dos + kRows * ld, *vs = ks + kRows * ld;
  tiles::QueryTile t(s);
  int64_t first = t.head * s.queries + t.i0;
  copyQueryGrads<D, kRows>(qs, dos, q, dout, s, first, t.rows);
  float rowLse[2], rowDelta[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    int64_t row = 16 * warp() + laneRow() + 8 * half;
    bool inside = row < t.rows;
    rowLse[half] = inside ? lse[first + row] * kLog2e : INFINITY;
    rowDelta[half] = inside ? delta[first + row] : 0.0f;
  }
  T *qw = qs + 16 * warp() * ld, *dow = dos + 16 * warp() * ld;
  float grad[D / 8][4] = {};
  for (int64_t j0 = 0; j0 < t.keyEnd(s); j0 += kRows) {
    int64_t keys = min(int64_t(kRows), s.keys - j0);
    __syncthreads(); // the last tile's K and V are read
    copyKeyValues<D, kRows>(ks, vs, k, v, s, t.kvHead * s.keys + j0, keys);
    waitCopies<0>();
    __syncthreads();
    float sc[kRows / 8][4] = {}, dp[kRows / 8][4] = {};
    warpProduct<T, D, kRows, false>(sc, qw, ld, ks, ld);
    warpProduct<T, D, kRows, false>(dp, dow, ld, vs, ld);
    bool plain = seesAllKeys(s, t, j0, keys);
    scoresInLog2<T, kRows, true>(sc, s, mask, t.b, t.h, t.i0 + 16 * warp(), j0,
                                 plain);
    scoreGradients<kRows>(
        sc, dp, s.scale, [&](int, int e) { return rowLse[e / 2]; },
        [&](int, int e) { return rowDelta[e / 2]; });
    warpProductOfTiles<T, kRows, D, true>(grad, dp, ks, ld);
  }
  const float ones[2] = {1.0f, 1.0f};
  finishCopies();
  storeWarpRows<T, D>(dq + s.queryAt(s.dq, first) + 16 * warp() * s.dq.row, qw,
                      grad, ones, t.rows - 16 * warp(), int(s.features),
                      s.dq.row);
}

/// Shared memory of the key/value gradients: K and V tiles of kRows keys,
/// Q and dO tiles of kQueryColumns rows, and those rows' log-sum-exps and
/// deltas.
template <int D> inline size_t keyValueGradSharedBytes() {
  return (2 * kRows + 2 * kQueryColumns<D>)*kStride<D> * 2 +
         2 * kQueryColumns<D> * sizeof(float);
}
inline size_t keyValueGradSharedBytes(int d) {
  return d == 64 ? keyValueGradSharedBytes<64>()
                 : keyValueGradSharedBytes<128>();
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    flashKeyValueGrad(AttentionShape s, const void *mask, const T *q,
                      const T *k, const T *v, const float *lse,
                      const float *delta, const T *dout, T *dk, T *dv) {
  ZEST_DYNAMIC_SHARED(unsigned char, shared);
  constexpr int ld = kStride<D>, cols = kQueryColumns<D>;
  T *ks = reinterpret_cast<T *>(shared), *vs = ks + kRows * ld,
    *qs = vs + kRows * ld, *dos = qs + cols * ld;
  float *lses = reinterpret_cast<float *>(dos + cols * ld),
        *deltas = lses + cols;
  tiles::KeyTile t(s);
  const int64_t at = t.kvHead * s.keys + t.j0;
  copyKeyValues<D, kRows>(ks, vs, k, v, s, at, t.keys);
  T *kw = ks + 16 * warp() * ld, *vw = vs + 16 * warp() * ld;
  float gk[D / 8][4] = {}, gv[D / 8][4] = {};
  int64_t firstQuery = s.causal ? t.j0 / cols * cols : 0;
  for (int64_t h = t.g * t.group; h < (t.g + 1) * t.group; ++h) {
    int64_t head = t.b * s.heads + h;
    for (int64_t i0 = firstQuery; i0 < s.queries; i0 += cols) {
      int64_t rows = min(int64_t(cols), s.queries - i0),
              first = head * s.queries + i0;
      __syncthreads(); // the last tile's Q, dO, lse and delta are read
      copyQueryGrads<D, cols>(qs, dos, q, dout, s, first, rows);
      for (int e = threadIdx.x; e < cols; e += kThreads) {
        lses[e] = e < rows ? lse[first + e] * kLog2e : INFINITY;
        deltas[e] = e < rows ? delta[first + e] : 0.0f;
      }
      waitCopies<0>();
      __syncthreads();
      // Transposed: rows are keys, columns query rows.
      float sc[cols / 8][4] = {}, dp[cols / 8][4] = {};
      warpProduct<T, D, cols, false>(sc, kw, ld, qs, ld);
      warpProduct<T, D, cols, false>(dp, vw, ld, dos, ld);
      bool plain = s.maskKind == ZEST_ATTENTION_MASK_NONE &&
                   (!s.causal || i0 >= t.j0 + kRows - 1);
      scoresInLog2<T, cols, false>(sc, s, mask, t.b, h, t.j0 + 16 * warp(), i0,
                                   plain);
      int c = laneColumn();
      scoreGradients<cols>(
          sc, dp, s.scale,
          [&](int n, int e) { return lses[8 * n + c + e % 2]; },
          [&](int n, int e) { return deltas[8 * n + c + e % 2]; });
      warpProductOfTiles<T, cols, D, true>(gv, sc, dos, ld);
      warpProductOfTiles<T, cols, D, true>(gk, dp, qs, ld);
    }
  }
  const float ones[2] = {1.0f, 1.0f};
  int64_t rows = t.keys - 16 * warp();
  finishCopies();
  storeWarpRows<T, D>(dk + s.keyAt(s.dk, at) + 16 * warp() * s.dk.row, kw, gk,
                      ones, rows, int(s.features), s.dk.row);
  storeWarpRows<T, D>(dv + s.keyAt(s.dv, at) + 16 * warp() * s.dv.row, vw, gv,
                      ones, rows, int(s.valueFeatures), s.dv.row);
}

} // namespace zest::rt::cuda::flash

#endif // ZEST_RUNTIME_CUDA_BLAS_ATTENTIONFLASH_CUH
