//===- Gemm.cpp - Matrix products of compiled code on OpenBLAS ------------===//

#include "zest_runtime.h"

#include <cblas.h>

extern "C" {

void zest_sgemm(int32_t transA, int32_t transB, int64_t m, int64_t n, int64_t k,
                const float *a, int64_t lda, const float *b, int64_t ldb,
                float *c, int64_t ldc, int32_t accumulate) {
  zest_progress();
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb,
              accumulate ? 1.0f : 0.0f, c, ldc);
}

void zest_sgemm_batched(int32_t transA, int32_t transB, int64_t batch,
                        int64_t m, int64_t n, int64_t k, const float *a,
                        int64_t lda, int64_t strideA, const float *b,
                        int64_t ldb, int64_t strideB, float *c, int64_t ldc,
                        int64_t strideC, int32_t accumulate) {
  for (int64_t i = 0; i < batch; ++i)
    zest_sgemm(transA, transB, m, n, k, a + i * strideA, lda, b + i * strideB,
               ldb, c + i * strideC, ldc, accumulate);
}

} // extern "C"
