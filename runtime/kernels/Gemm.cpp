//===- Gemm.cpp - Matrix products of compiled code ------------------------===//
//
// oneDNN's sgemm where the build found it (10% faster than OpenBLAS's on a
// transformer step's shapes on the project's machine: bench/gemm), else
// OpenBLAS's.
//
//===----------------------------------------------------------------------===//

#include "Sgemm.h"
#include "zest_runtime.h"

#ifdef ZEST_GEMM_ONEDNN
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <thread>
#else
#include <cblas.h>
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#ifdef ZEST_GEMM_ONEDNN
/// oneDNN's threads: OMP_NUM_THREADS when set, else this machine's cores
/// shared among the ranks mpirun started on it, so that ranks do not
/// oversubscribe the cores (OpenMP's default is every core per process).
static void setGemmThreads() {
  if (std::getenv("OMP_NUM_THREADS"))
    return;
  int cores = int(std::thread::hardware_concurrency());
  const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  int ranks = local ? std::max(1, std::atoi(local)) : 1;
  omp_set_num_threads(std::max(1, cores / ranks));
}
#endif

void zest::kernels::sgemm(bool transA, bool transB, int64_t m, int64_t n,
                          int64_t k, const float *a, int64_t lda,
                          const float *b, int64_t ldb, float beta, float *c,
                          int64_t ldc) {
#ifdef ZEST_GEMM_ONEDNN
  static std::once_flag threads;
  std::call_once(threads, setGemmThreads);
  // Row-major, as cblas with CblasRowMajor.
  dnnl_status_t status = dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', m,
                                    n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success) {
    std::fprintf(stderr,
                 "zest: dnnl_sgemm failed (status %d) on m=%lld n=%lld "
                 "k=%lld\n",
                 int(status), static_cast<long long>(m),
                 static_cast<long long>(n), static_cast<long long>(k));
    std::abort();
  }
#else
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb,
              beta, c, ldc);
#endif
}

const char *zest::kernels::sgemmLibrary() {
#ifdef ZEST_GEMM_ONEDNN
  return "onednn";
#else
  return "openblas";
#endif
}

extern "C" {

void zest_sgemm(ZEST_sgemm_PARAMS(float)) {
  zest_progress();
  zest::kernels::sgemm(trans_a, trans_b, m, n, k, a, lda, b, ldb,
                       accumulate ? 1.0f : 0.0f, c, ldc);
}

void zest_sgemm_batched(ZEST_sgemm_batched_PARAMS(float)) {
  for (int64_t i = 0; i < batch; ++i)
    zest_sgemm(trans_a, trans_b, m, n, k, a + i * stride_a, lda,
               b + i * stride_b, ldb, c + i * stride_c, ldc, accumulate);
}

} // extern "C"
