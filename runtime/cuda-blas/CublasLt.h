//===- CublasLt.h - Row-major products on cuBLASLt, planned once -*- C++
//-*-===//
//
// cuBLASLt is column-major: a row-major D[m,n] = op(A)[m,k] op(B)[k,n] is the
// column-major D^T[n,m] = op(B)^T op(A)^T, so B goes first and a
// per-output-feature bias is a per-row bias of D^T, which is what the BIAS
// epilogues add. Descriptors, layouts and the chosen algorithm are cached
// per shape; the workspace comes from the runtime's pool, where
// zest-plan-memory counts it (ZEST_CUDA_WORKSPACE_BYTES).
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_CUDA_BLAS_CUBLASLT_H
#define ZEST_RUNTIME_CUDA_BLAS_CUBLASLT_H

#include "zest_runtime_cuda.h"

#include <cublasLt.h>

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

namespace zest::rt::cuda {

/// One row-major product D = op(A) op(B) (+ D when accumulating), with an
/// epilogue; `batch` products at the given element strides.
struct Product {
  /// The type of A and B, and of C = D unless `outType` says otherwise (a
  /// 16-bit product into f32).
  cudaDataType_t type = CUDA_R_32F;
  std::optional<cudaDataType_t> outType;
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  const void *a = nullptr, *b = nullptr;
  void *d = nullptr;
  int64_t lda = 0, ldb = 0, ldd = 0;
  bool accumulate = false;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  void *aux = nullptr;
  int64_t ldaux = 0;
  int64_t batch = 1, strideA = 0, strideB = 0, strideD = 0;

  /// The alignment (a power of two up to 256 bytes) cuBLASLt may assume of
  /// cuBLASLt's A (our b), B (our a), C = D, the bias and the aux: what
  /// their pointers, leading dimensions and batch strides all offer.
  std::array<uint32_t, 5> alignments() const;
  cudaDataType_t getOutType() const { return outType.value_or(type); }

  /// A plan serves every product with the same shape and alignments: an
  /// algorithm chosen for more alignment than a call offers would fault.
  auto key() const {
    return std::make_tuple(int(type), int(getOutType()), transA, transB, m, n,
                           k, lda, ldb, ldd, int(epilogue), ldaux, batch,
                           strideA, strideB, strideD, alignments());
  }
};

/// What cuBLASLt needs for one shape, built once.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

/// The process's cuBLASLt handle, workspace and plans.
class Lt {
public:
  static Lt &get();

  /// Runs `p` on the compute stream.
  void run(const Product &p);
  /// The workspace once the first product took it (null before): scratch
  /// for work ordered on the compute stream between products.
  static void *workspaceIfCreated();

private:
  static constexpr size_t kWorkspaceBytes = ZEST_CUDA_WORKSPACE_BYTES;

  Lt();
  /// At exit: the plans' descriptors and the handle (host objects).
  ~Lt();
  static cublasLtMatrixLayout_t layout(cudaDataType_t type, int64_t rows,
                                       int64_t cols, int64_t ld, int64_t batch,
                                       int64_t stride);
  Plan plan(const Product &p);

  cublasLtHandle_t handle = nullptr;
  void *workspace = nullptr;
  std::mutex mutex;
  std::map<decltype(Product().key()), Plan> plans;
};

} // namespace zest::rt::cuda

#endif // ZEST_RUNTIME_CUDA_BLAS_CUBLASLT_H
