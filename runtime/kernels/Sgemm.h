//===- Sgemm.h - The CPU runtime's single-precision matrix product -*- C++
//-*-===//
//
// One entry for every f32 product of the CPU runtime (compiled products and
// fused linear layers), on the library the build chose (ZEST_GEMM).
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_KERNELS_SGEMM_H
#define ZEST_RUNTIME_KERNELS_SGEMM_H

#include <cstdint>

namespace zest::kernels {

/// C[m,n] = op(A) op(B) + beta C, row-major; op(A) is A[m,k] or A^T with A
/// [k,m] stored, op(B) likewise; lda, ldb, ldc are row strides.
void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
           const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
           float *c, int64_t ldc);

/// The library under sgemm ("onednn" or "openblas").
const char *sgemmLibrary();

} // namespace zest::kernels

#endif // ZEST_RUNTIME_KERNELS_SGEMM_H
