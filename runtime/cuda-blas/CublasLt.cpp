//===- CublasLt.cpp - Row-major products on cuBLASLt, planned once --------===//

#include "CublasLt.h"
#include "../cuda-nccl/Device.h"
#include "../cuda-nccl/KernelTimes.h"
#include "zest_runtime.h"

#include <string>

using namespace zest::rt;
using namespace zest::rt::cuda;

namespace {

void checkLt(cublasStatus_t status, const char *what) {
  // (cublasGetStatusString is in cuBLAS, which the runtime does not link.)
  if (status != CUBLAS_STATUS_SUCCESS)
    fatal(std::string("cuBLASLt error in ") + what + ": cublasStatus_t " +
          std::to_string(int(status)));
}

template <typename T>
void setAttribute(cublasLtMatmulDesc_t desc,
                  cublasLtMatmulDescAttributes_t attribute, const T &value,
                  const char *what) {
  checkLt(
      cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)),
      what);
}

/// The largest power of two up to 256 dividing every value.
uint32_t alignmentOf(std::initializer_list<uint64_t> values) {
  uint32_t align = 256;
  for (uint64_t value : values)
    while (align > 1 && value % align != 0)
      align /= 2;
  return align;
}

/// The bias and aux pointers of `p`'s call (a plan serves calls with other
/// pointers of the same alignment).
void setEpiloguePointers(cublasLtMatmulDesc_t desc, const Product &p) {
  if (p.bias)
    setAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias,
                 "setting the bias");
  if (p.aux)
    setAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, p.aux,
                 "setting the pre-activation output");
}

} // namespace

std::array<uint32_t, 5> Product::alignments() const {
  uint64_t element = type == CUDA_R_32F ? 4 : 2;
  uint64_t outElement = getOutType() == CUDA_R_32F ? 4 : 2;
  auto matrix = [&](const void *ptr, int64_t ld, int64_t stride,
                    uint64_t bytes) {
    return alignmentOf({uint64_t(uintptr_t(ptr)), uint64_t(ld) * bytes,
                        batch > 1 ? uint64_t(stride) * bytes : 0});
  };
  return {
      matrix(b, ldb, strideB, element), matrix(a, lda, strideA, element),
      matrix(d, ldd, strideD, outElement),
      alignmentOf({uint64_t(uintptr_t(bias))}),
      alignmentOf({uint64_t(uintptr_t(aux)), uint64_t(ldaux) * outElement})};
}

namespace {
Lt *created = nullptr;
} // namespace

Lt &Lt::get() {
  static Lt lt;
  return lt;
}

void *Lt::workspaceIfCreated() {
  return created ? created->workspace : nullptr;
}

/// `p` for ZEST_KERNEL_TIMES: "cublasLt [BATCH x] M x N x K", its types,
/// transposes and epilogue.
static std::string describe(const Product &p) {
  std::string name = "cublasLt ";
  if (p.batch > 1)
    name += std::to_string(p.batch) + " x ";
  name += std::to_string(p.m) + " x " + std::to_string(p.n) + " x " +
          std::to_string(p.k);
  name += p.type == CUDA_R_32F ? " f32" : " 16-bit";
  if (p.getOutType() != p.type)
    name += " into f32";
  if (p.transA || p.transB)
    name += std::string(" transposed ") + (p.transA ? "A" : "") +
            (p.transB ? "B" : "");
  if (p.epilogue != CUBLASLT_EPILOGUE_DEFAULT)
    name += " epilogue " + std::to_string(int(p.epilogue));
  if (p.accumulate)
    name += " accumulating";
  return name;
}

/// `p`'s work for ZEST_KERNEL_TIMES: 2 M N K operations per product, its
/// operands read once and its output written (and read, accumulating).
static cuda::Work getWork(const Product &p) {
  auto size = [](cudaDataType type) { return type == CUDA_R_32F ? 4.0 : 2.0; };
  double batch = double(p.batch), m = double(p.m), n = double(p.n),
         k = double(p.k);
  cuda::Work work;
  work.flops = 2 * batch * m * n * k;
  work.bytes = batch * ((m * k + k * n) * size(p.type) +
                        m * n * size(p.getOutType()) * (p.accumulate ? 2 : 1));
  work.tensorCores = true;
  work.halfPrecision = p.type != CUDA_R_32F;
  return work;
}

void Lt::run(const Product &p) {
  if (p.m == 0 || p.n == 0)
    return;
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, inserted] = plans.try_emplace(p.key());
  if (inserted)
    it->second = plan(p);
  Plan &plan = it->second;
  setEpiloguePointers(plan.desc, p);
  float alpha = 1, beta = p.accumulate ? 1 : 0;
  cuda::TimedScope timed(
      [&] {
        std::string name = describe(p);
        cuda::noteWork(name, getWork(p));
        return name;
      },
      cuda::streams.compute);
  // K = 0: the product is zero, the epilogue still applies.
  checkLt(cublasLtMatmul(handle, plan.desc, &alpha, p.b, plan.first, p.a,
                         plan.second, &beta, p.d, plan.out, p.d, plan.out,
                         &plan.algo, workspace, kWorkspaceBytes,
                         cuda::streams.compute),
          "a product");
}

Lt::Lt() {
  checkLt(cublasLtCreate(&handle), "cublasLtCreate");
  workspace = zest_pool_alloc_kept(kWorkspaceBytes);
  created = this;
}

Lt::~Lt() {
  created = nullptr;
  for (auto &[key, plan] : plans) {
    cublasLtMatmulDescDestroy(plan.desc);
    for (cublasLtMatrixLayout_t layout : {plan.first, plan.second, plan.out})
      cublasLtMatrixLayoutDestroy(layout);
  }
  cublasLtDestroy(handle);
}

cublasLtMatrixLayout_t Lt::layout(cudaDataType_t type, int64_t rows,
                                  int64_t cols, int64_t ld, int64_t batch,
                                  int64_t stride) {
  cublasLtMatrixLayout_t layout;
  checkLt(cublasLtMatrixLayoutCreate(&layout, type, rows, cols, ld),
          "a matrix layout");
  if (batch > 1) {
    int32_t count = int32_t(batch);
    checkLt(cublasLtMatrixLayoutSetAttribute(layout,
                                             CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                             &count, sizeof(count)),
            "a batch count");
    checkLt(cublasLtMatrixLayoutSetAttribute(
                layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                sizeof(stride)),
            "a batch stride");
  }
  return layout;
}

Plan Lt::plan(const Product &p) {
  Plan plan;
  // f32 products accumulate in f32 without TF32, as the CPU's do.
  checkLt(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
          "a product descriptor");
  // Column-major D^T[n,m] = op(B)^T[n,k] op(A)^T[k,m].
  cublasOperation_t first = p.transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                    second = p.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  setAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, first, "transposition");
  setAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, second, "transposition");
  setAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, p.epilogue,
               "the epilogue");
  // The heuristic reads the bias and aux pointers' alignment.
  setEpiloguePointers(plan.desc, p);
  if (p.ldaux)
    setAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, p.ldaux,
                 "the pre-activation's row stride");
  plan.first = layout(p.type, p.transB ? p.k : p.n, p.transB ? p.n : p.k, p.ldb,
                      p.batch, p.strideB);
  plan.second = layout(p.type, p.transA ? p.m : p.k, p.transA ? p.k : p.m,
                       p.lda, p.batch, p.strideA);
  plan.out = layout(p.getOutType(), p.n, p.m, p.ldd, p.batch, p.strideD);
  cublasLtMatmulPreference_t preference;
  checkLt(cublasLtMatmulPreferenceCreate(&preference), "a preference");
  size_t bytes = kWorkspaceBytes;
  checkLt(cublasLtMatmulPreferenceSetAttribute(
              preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes,
              sizeof(bytes)),
          "the workspace size");
  // Without these cuBLASLt assumes 256-byte alignment, which views into
  // flat units and attention's slices do not have.
  std::array<uint32_t, 5> align = p.alignments();
  for (auto [attribute, value] :
       {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align[0]},
        std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align[1]},
        std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align[2]},
        std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align[2]}})
    checkLt(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value,
                                                 sizeof(value)),
            "an alignment preference");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  checkLt(cublasLtMatmulAlgoGetHeuristic(handle, plan.desc, plan.first,
                                         plan.second, plan.out, plan.out,
                                         preference, 1, &result, &found),
          "choosing an algorithm");
  cublasLtMatmulPreferenceDestroy(preference);
  if (found == 0)
    fatal("cuBLASLt has no algorithm for a " + std::to_string(p.m) + " x " +
          std::to_string(p.n) + " x " + std::to_string(p.k) + " product");
  plan.algo = result.algo;
  return plan;
}
