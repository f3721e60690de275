//===- Gemm.cpp - Matrix products of compiled code on OpenBLAS ------------===//

#include "zest_runtime.h"

#include <cblas.h>

extern "C" {

void zest_sgemm(ZEST_sgemm_PARAMS(float)) {
  zest_progress();
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b,
              ldb, accumulate ? 1.0f : 0.0f, c, ldc);
}

void zest_sgemm_batched(ZEST_sgemm_batched_PARAMS(float)) {
  for (int64_t i = 0; i < batch; ++i)
    zest_sgemm(trans_a, trans_b, m, n, k, a + i * stride_a, lda,
               b + i * stride_b, ldb, c + i * stride_c, ldc, accumulate);
}

} // extern "C"
