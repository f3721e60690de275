//===- PtxMatrices.cuh - Tensor-core products of a warp ---------*- CUDA -*-//
//
// The instructions FlashAttention-2's kernels build on: cp.async (global ->
// shared copies that do not block, in groups), ldmatrix (four 8 x 8
// matrices of 16-bit values from shared memory into the fragments of a
// warp's lanes, transposed or not) and mma.sync m16n8k16 (a warp's 16 x 16
// by 16 x 8 product with f32 accumulation). On a GPU they are the PTX
// instructions; on the emulated device the same operations on the fiber
// emulator (cuda-emulated/Simt.h), lane by lane as PTX documents the
// fragments' layouts: a lane g * 4 + t holds A's rows g and g + 8 at
// columns 2t, 2t + 1 (+ 8), B's column g at rows 2t, 2t + 1 (+ 8), and
// C's rows g and g + 8 at columns 2t, 2t + 1.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_CUDA_BLAS_PTXMATRICES_CUH
#define ZEST_RUNTIME_CUDA_BLAS_PTXMATRICES_CUH

#include "DeviceBuiltins.cuh"
#include "EpilogueKernels.cuh"
#ifdef ZEST_CUDA_EMULATED
#include "../common/HalfFloat.h"
#endif

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace zest::rt::cuda::ptx {

#ifndef ZEST_CUDA_EMULATED
inline __device__ uint32_t sharedAddress(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
#endif

/// Copies 16 bytes global -> shared without blocking (zeros where !valid).
inline __device__ void copyAsync16(void *dst, const void *src, bool valid) {
#ifdef ZEST_CUDA_EMULATED
  ::zest::emulated::simt::copyAsync(dst, src, 16, valid);
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                   sharedAddress(dst)),
               "l"(src), "r"(valid ? 16 : 0));
#endif
}

/// Closes the group of the copies issued since the last one.
inline __device__ void commitCopies() {
#ifdef ZEST_CUDA_EMULATED
  ::zest::emulated::simt::commitCopies();
#else
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

/// Waits until at most N groups of copies are in flight.
template <int N> inline __device__ void waitCopies() {
#ifdef ZEST_CUDA_EMULATED
  ::zest::emulated::simt::waitCopies(N);
#else
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

#ifdef ZEST_CUDA_EMULATED
/// ldmatrix .x4 on the emulator: lane 8 m + r gives row r of matrix m.
inline void emulateLoadMatrices(uint32_t (&r)[4], const void *p,
                                bool transposed) {
  namespace simt = ::zest::emulated::simt;
  simt::requireShared(p, 16, 16, "ldmatrix's row");
  const unsigned char *rows = simt::exchange(
      0xffffffffu, &p, sizeof p, transposed ? "ldmatrix.trans" : "ldmatrix");
  int lane = simt::laneIndex();
  for (int m = 0; m < 4; ++m) {
    uint16_t pair[2];
    for (int h = 0; h < 2; ++h) {
      int row = transposed ? 2 * (lane % 4) + h : lane / 4,
          column = transposed ? lane / 4 : 2 * (lane % 4) + h;
      auto *base = simt::laneValue<const uint16_t *>(rows, 8 * m + row);
      pair[h] = base[column];
    }
    r[m] = uint32_t(pair[0]) | uint32_t(pair[1]) << 16;
  }
}
#endif

/// Four 8 x 8 matrices of 16-bit values (rows at each lane's address).
inline __device__ void loadMatrices(uint32_t (&r)[4], const void *p) {
#ifdef ZEST_CUDA_EMULATED
  emulateLoadMatrices(r, p, /*transposed=*/false);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(sharedAddress(p)));
#endif
}
inline __device__ void loadMatricesTransposed(uint32_t (&r)[4], const void *p) {
#ifdef ZEST_CUDA_EMULATED
  emulateLoadMatrices(r, p, /*transposed=*/true);
#else
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(sharedAddress(p)));
#endif
}

#ifdef ZEST_CUDA_EMULATED
/// mma.sync m16n8k16 on the emulator: each lane sums its four elements of
/// C from the 32 lanes' fragments, in f32 in k's order. The lane's two
/// rows of A and two columns of B are widened once, not once per element
/// (a NaN widens to a NaN of another payload than the GPU's).
template <typename T>
void emulateMma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                uint32_t b1) {
  namespace simt = ::zest::emulated::simt;
  struct Operands {
    uint32_t a[4], b[2];
  } mine{{a[0], a[1], a[2], a[3]}, {b0, b1}};
  const unsigned char *all =
      simt::exchange(0xffffffffu, &mine, sizeof mine, "mma.sync");
  auto element = [](uint32_t bits, int half) {
    uint16_t raw = half ? uint16_t(bits >> 16) : uint16_t(bits);
    return std::is_same_v<T, __half> ? ::zest::rt::f16ToFloat(raw)
                                     : ::zest::rt::bf16ToFloat(raw);
  };
  // Rows lane / 4 and lane / 4 + 8 of A, columns 2 (lane % 4) and the next
  // of B: the lane holding (row, k) is row % 8 * 4 + k % 8 / 2.
  int lane = simt::laneIndex(), row = lane / 4, column = 2 * (lane % 4);
  float rows[2][16], columns[2][16];
  for (int k = 0; k < 16; ++k) {
    Operands x = simt::laneValue<Operands>(all, row * 4 + k % 8 / 2);
    for (int half = 0; half < 2; ++half) {
      Operands y =
          simt::laneValue<Operands>(all, (column + half) * 4 + k % 8 / 2);
      rows[half][k] = element(x.a[half + 2 * (k / 8)], k % 2);
      columns[half][k] = element(y.b[k / 8], k % 2);
    }
  }
  for (int e = 0; e < 4; ++e) {
    float sum = c[e];
    for (int k = 0; k < 16; ++k)
      sum += rows[e / 2][k] * columns[e % 2][k];
    c[e] = sum;
  }
}
#endif

/// c += a b for a 16 x 16 operand a and a 16 x 8 operand b.
template <typename T>
inline __device__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                           uint32_t b1) {
#ifdef ZEST_CUDA_EMULATED
  emulateMma<T>(c, a, b0, b1);
#else
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                   "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                   "r"(b1));
#endif
}

} // namespace zest::rt::cuda::ptx

#endif // ZEST_RUNTIME_CUDA_BLAS_PTXMATRICES_CUH
