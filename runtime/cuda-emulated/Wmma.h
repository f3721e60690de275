//===- Wmma.h - CUDA's WMMA fragments on the emulated GPU -------*- C++ -*-===//
//
// The subset of nvcuda::wmma the attention kernels use (16 x 16 x 16
// fragments: load, fill, mma, store), for kernels built for the emulated
// device. WMMA leaves a fragment's distribution over the lanes unspecified,
// so here every lane holds the whole matrix; a store writes only a 32nd of
// it per lane (element e by lane e % 32), so that a lane that reads what
// other lanes stored before a __syncwarp reads NaNs, as it would read
// whatever was there on a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_CUDA_EMULATED_WMMA_H
#define ZEST_RUNTIME_CUDA_EMULATED_WMMA_H

#include "../cuda-blas/EpilogueKernels.cuh"
#include "Simt.h"

#include <type_traits>

namespace zest::emulated::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

using ::zest::rt::cuda::load; // a stored value in f32

/// A 16 x 16 matrix of T, row-major: element (r, c) at x[16 r + c].
template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "16 x 16 x 16 only");
  static constexpr int num_elements = 256;
  T x[256];
};

/// The warp's 16 x 16 matrix at p (leading dimension ldm) into every
/// lane's x.
template <typename T>
void loadMatrix(T (&x)[256], const T *p, unsigned ldm, bool rowMajor) {
  simt::exchange(0xffffffffu, nullptr, 0, "wmma::load_matrix_sync");
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c)
      x[16 * r + c] = rowMajor ? p[r * ldm + c] : p[c * ldm + r];
}

template <typename Use, typename T, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout> &f, const T *p,
                      unsigned ldm) {
  static_assert(!std::is_same_v<Use, accumulator>, "accumulators take a "
                                                   "layout");
  loadMatrix(f.x, p, ldm, std::is_same_v<Layout, row_major>);
}

template <typename T>
void load_matrix_sync(fragment<accumulator, 16, 16, 16, T> &f, const T *p,
                      unsigned ldm, layout_t layout) {
  loadMatrix(f.x, p, ldm, layout == mem_row_major);
}

template <typename Use, typename T, typename Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout> &f, T value) {
  for (T &x : f.x)
    x = value;
}

/// d = a b + c, each element summed in f32 in k's order: every lane sums
/// a 32nd of the elements (element e by lane e % 32), and the lanes
/// exchange their sums.
template <typename T, typename LayoutA, typename LayoutB>
void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
              const fragment<matrix_a, 16, 16, 16, T, LayoutA> &a,
              const fragment<matrix_b, 16, 16, 16, T, LayoutB> &b,
              const fragment<accumulator, 16, 16, 16, float> &c) {
  static_assert(8 * sizeof(float) == simt::kSlotBytes, "a lane's 8 sums");
  float mine[8];
  int lane = simt::laneIndex();
  for (int i = 0; i < 8; ++i) {
    int r = (lane + 32 * i) / 16, n = (lane + 32 * i) % 16;
    float sum = c.x[16 * r + n];
    for (int k = 0; k < 16; ++k)
      sum += load(a.x[16 * r + k]) * load(b.x[16 * k + n]);
    mine[i] = sum;
  }
  const unsigned char *sums =
      simt::exchange(0xffffffffu, mine, sizeof mine, "wmma::mma_sync");
  for (int e = 0; e < 256; ++e)
    d.x[e] = simt::laneValue<float>(sums + (e / 32) * sizeof(float), e % 32);
}

template <typename T>
void store_matrix_sync(T *p, const fragment<accumulator, 16, 16, 16, T> &f,
                       unsigned ldm, layout_t layout) {
  simt::exchange(0xffffffffu, nullptr, 0, "wmma::store_matrix_sync");
  for (int e = simt::laneIndex(); e < 256; e += 32) {
    int r = e / 16, c = e % 16;
    (layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.x[e];
  }
}

} // namespace zest::emulated::wmma

#endif // ZEST_RUNTIME_CUDA_EMULATED_WMMA_H
