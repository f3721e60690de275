//===- CublasLt.cpp - cuBLASLt's matmul on the emulated GPU ---------------===//
//
// The cuBLASLt calls Zest's device runtime makes, computed by a plain
// reference (f64 accumulation, results rounded to the output type), with
// the constraints cuBLASLt documents checked where cuBLASLt checks them or
// where a real GPU would fault:
//
// * layouts: leading dimensions no less than the rows, types f32/bf16/f16;
// * epilogues: the GELU aux leading dimension divisible by 8 and no less
//   than the output's rows; bias and aux pointers set when an epilogue
//   needs them;
// * alignment: the heuristic picks an algorithm for the alignments the
//   preference promises (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES, 256 by
//   default) and the bias and aux pointers it sees; a matmul whose pointers,
//   leading dimensions or batch strides are less aligned than its algorithm
//   was chosen for fails, as the real kernel's vector loads would.
//
// A failed check prints why and returns the status cuBLASLt would.
//
//===----------------------------------------------------------------------===//

#include "../common/HalfFloat.h"
#include "DeviceMemory.h"
#include "Streams.h"

#include <cublasLt.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace zest::emulated;

namespace {

struct Desc {
  cublasOperation_t transA = CUBLAS_OP_N, transB = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  void *aux = nullptr;
  int64_t auxLd = 0;
};

struct Layout {
  cudaDataType_t type = CUDA_R_32F;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t batch = 1;
  int64_t stride = 0;
};

struct Preference {
  uint32_t align[4] = {256, 256, 256, 256}; // A, B, C, D
};

/// What an emulated algorithm was chosen for (cublasLtMatmulAlgo_t.data).
struct Algo {
  uint64_t magic;
  uint64_t align[4];
  uint64_t biasAlign, auxAlign;
};
constexpr uint64_t kAlgoMagic = 0x7a6573742d6c7421; // "zest-lt!"

Desc &desc(cublasLtMatmulDesc_t d) { return *reinterpret_cast<Desc *>(d); }
Layout &layout(cublasLtMatrixLayout_t l) {
  return *reinterpret_cast<Layout *>(l);
}

cublasStatus_t fail(cublasStatus_t status, const std::string &why) {
  std::fprintf(stderr, "zest: emulated cuBLASLt: %s\n", why.c_str());
  return status;
}

uint64_t alignmentOf(uint64_t value) {
  uint64_t align = 1;
  while (align < 256 && value % (align * 2) == 0)
    align *= 2;
  return align;
}

size_t typeBytes(cudaDataType_t type) { return type == CUDA_R_32F ? 4 : 2; }

bool isGeluAux(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_GELU_AUX ||
         e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
bool hasBias(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_RELU_BIAS ||
         e == CUBLASLT_EPILOGUE_GELU_BIAS ||
         e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}

/// The alignment a matrix offers: its pointer, leading dimension and batch
/// stride in bytes.
uint64_t offered(const void *ptr, const Layout &l) {
  size_t bytes = typeBytes(l.type);
  uint64_t align = std::min(alignmentOf(uintptr_t(ptr)),
                            alignmentOf(uint64_t(l.ld) * bytes));
  if (l.batch > 1)
    align = std::min(align, alignmentOf(uint64_t(l.stride) * bytes));
  return align;
}

cublasStatus_t checkLayouts(const Desc &d, const Layout *ls[4]) {
  const char *names[4] = {"A", "B", "C", "D"};
  for (int i = 0; i < 4; ++i) {
    const Layout &l = *ls[i];
    if (l.type != CUDA_R_32F && l.type != CUDA_R_16BF && l.type != CUDA_R_16F)
      return fail(CUBLAS_STATUS_NOT_SUPPORTED, std::string("matrix ") +
                                                   names[i] +
                                                   " has a type other "
                                                   "than f32, bf16 or f16");
    if (l.ld < int64_t(std::max<uint64_t>(l.rows, 1)))
      return fail(CUBLAS_STATUS_INVALID_VALUE,
                  std::string("matrix ") + names[i] + "'s leading dimension " +
                      std::to_string(l.ld) + " is less than its " +
                      std::to_string(l.rows) + " rows");
  }
  // cuBLASLt's combinations with f32 compute and scale: A and B of one
  // type, C = D of theirs or (16-bit A and B) f32.
  if (ls[0]->type != ls[1]->type || ls[2]->type != ls[3]->type ||
      (ls[2]->type != ls[0]->type && ls[2]->type != CUDA_R_32F))
    return fail(CUBLAS_STATUS_NOT_SUPPORTED,
                "matrix types A, B, C/D must be all one type or 16-bit A and "
                "B with an f32 C/D");
  if (isGeluAux(d.epilogue) &&
      (d.auxLd % 8 != 0 || d.auxLd < int64_t(ls[3]->rows)))
    return fail(CUBLAS_STATUS_NOT_SUPPORTED,
                "the GELU aux leading dimension " + std::to_string(d.auxLd) +
                    " must be divisible by 8 and no less than the output's " +
                    std::to_string(ls[3]->rows) + " rows");
  return CUBLAS_STATUS_SUCCESS;
}

float load(const void *base, cudaDataType_t type, int64_t index) {
  if (type == CUDA_R_32F)
    return static_cast<const float *>(base)[index];
  uint16_t bits = static_cast<const uint16_t *>(base)[index];
  return type == CUDA_R_16BF ? zest::rt::bf16ToFloat(bits)
                             : zest::rt::f16ToFloat(bits);
}

void store(void *base, cudaDataType_t type, int64_t index, float value) {
  if (type == CUDA_R_32F)
    static_cast<float *>(base)[index] = value;
  else
    static_cast<uint16_t *>(base)[index] = type == CUDA_R_16BF
                                               ? zest::rt::floatToBf16(value)
                                               : zest::rt::floatToF16(value);
}

float gelu(float v) {
  return 0.5f * v *
         (1 + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
}

float epilogue(const Desc &d, float value, cudaDataType_t type, int64_t row,
               int64_t auxIndex) {
  if (hasBias(d.epilogue))
    value += load(d.bias, type, row);
  if (isGeluAux(d.epilogue))
    store(d.aux, type, auxIndex, value);
  switch (d.epilogue) {
  case CUBLASLT_EPILOGUE_RELU:
  case CUBLASLT_EPILOGUE_RELU_BIAS:
    return value > 0 ? value : 0;
  case CUBLASLT_EPILOGUE_GELU:
  case CUBLASLT_EPILOGUE_GELU_BIAS:
  case CUBLASLT_EPILOGUE_GELU_AUX:
  case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
    return gelu(value);
  default:
    return value;
  }
}

/// D = alpha op(A) op(B) + beta C, then the epilogue, column-major.
void compute(const Desc &d, float alpha, float beta, const void *a,
             const Layout &la, const void *b, const Layout &lb, const void *c,
             const Layout &lc, void *out, const Layout &ld) {
  int64_t m = ld.rows, n = ld.cols;
  int64_t k = d.transA == CUBLAS_OP_N ? la.cols : la.rows;
  std::vector<float> result(size_t(m * n));
  for (int32_t batch = 0; batch < ld.batch; ++batch) {
    int64_t oa = batch * la.stride, ob = batch * lb.stride,
            oc = batch * lc.stride, od = batch * ld.stride;
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) {
        double sum = 0;
        for (int64_t l = 0; l < k; ++l) {
          int64_t ia = d.transA == CUBLAS_OP_N ? i + l * la.ld : l + i * la.ld;
          int64_t ib = d.transB == CUBLAS_OP_N ? l + j * lb.ld : j + l * lb.ld;
          sum += double(load(a, la.type, oa + ia)) *
                 double(load(b, lb.type, ob + ib));
        }
        double value = alpha * sum;
        if (beta != 0)
          value += beta * double(load(c, lc.type, oc + i + j * lc.ld));
        result[size_t(i + j * m)] =
            epilogue(d, float(value), ld.type, i, i + j * d.auxLd);
      }
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i)
        store(out, ld.type, od + i + j * ld.ld, result[size_t(i + j * m)]);
  }
}

/// Bytes a matrix spans, for the device-memory checks.
size_t span(const Layout &l) {
  if (l.rows == 0 || l.cols == 0)
    return 0;
  return ((l.batch - 1) * l.stride + (l.cols - 1) * l.ld + l.rows) *
         typeBytes(l.type);
}

cublasStatus_t checkAlignment(const Algo &algo, const Desc &d,
                              const void *ptrs[4], const Layout *ls[4]) {
  const char *names[4] = {"A", "B", "C", "D"};
  for (int i = 0; i < 4; ++i)
    if (offered(ptrs[i], *ls[i]) < algo.align[i])
      return fail(CUBLAS_STATUS_INVALID_VALUE,
                  std::string("matrix ") + names[i] +
                      " (pointer, leading "
                      "dimension or batch stride) is " +
                      std::to_string(offered(ptrs[i], *ls[i])) +
                      "-byte aligned, but the algorithm was chosen for " +
                      std::to_string(algo.align[i]) +
                      " bytes (set CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_" +
                      names[i] + "_BYTES to what the pointers offer)");
  if (hasBias(d.epilogue) && alignmentOf(uintptr_t(d.bias)) < algo.biasAlign)
    return fail(CUBLAS_STATUS_INVALID_VALUE,
                "the bias pointer is less aligned than the one the heuristic "
                "saw (set the bias pointer before choosing the algorithm)");
  if (isGeluAux(d.epilogue) && alignmentOf(uintptr_t(d.aux)) < algo.auxAlign)
    return fail(CUBLAS_STATUS_INVALID_VALUE,
                "the aux pointer is less aligned than the one the heuristic "
                "saw (set the aux pointer before choosing the algorithm)");
  return CUBLAS_STATUS_SUCCESS;
}

} // namespace

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
  static int dummy;
  *handle = reinterpret_cast<cublasLtHandle_t>(&dummy);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t) {
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d,
                                        cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F)
    return fail(CUBLAS_STATUS_NOT_SUPPORTED,
                "only f32 compute and scale types are emulated");
  *d = reinterpret_cast<cublasLtMatmulDesc_t>(new Desc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  delete &desc(d);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t handle,
                               cublasLtMatmulDescAttributes_t attribute,
                               const void *buffer, size_t bytes) {
  Desc &d = desc(handle);
  auto read = [&](auto &field) {
    if (bytes != sizeof(field))
      return fail(CUBLAS_STATUS_INVALID_VALUE, "an attribute's size is wrong");
    std::memcpy(&field, buffer, bytes);
    return CUBLAS_STATUS_SUCCESS;
  };
  switch (attribute) {
  case CUBLASLT_MATMUL_DESC_TRANSA:
    return read(d.transA);
  case CUBLASLT_MATMUL_DESC_TRANSB:
    return read(d.transB);
  case CUBLASLT_MATMUL_DESC_EPILOGUE:
    return read(d.epilogue);
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    return read(d.bias);
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
    return read(d.aux);
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
    return read(d.auxLd);
  default:
    return fail(CUBLAS_STATUS_NOT_SUPPORTED,
                "descriptor attribute " + std::to_string(int(attribute)) +
                    " is not emulated");
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l,
                                          cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  *l = reinterpret_cast<cublasLtMatrixLayout_t>(
      new Layout{type, rows, cols, ld, 1, 0});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  delete &layout(l);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t handle,
                                 cublasLtMatrixLayoutAttribute_t attribute,
                                 const void *buffer, size_t bytes) {
  Layout &l = layout(handle);
  if (attribute == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT &&
      bytes == sizeof(l.batch)) {
    std::memcpy(&l.batch, buffer, bytes);
    return CUBLAS_STATUS_SUCCESS;
  }
  if (attribute == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET &&
      bytes == sizeof(l.stride)) {
    std::memcpy(&l.stride, buffer, bytes);
    return CUBLAS_STATUS_SUCCESS;
  }
  return fail(CUBLAS_STATUS_NOT_SUPPORTED, "layout attribute " +
                                               std::to_string(int(attribute)) +
                                               " is not emulated");
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
  *p = reinterpret_cast<cublasLtMatmulPreference_t>(new Preference);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  delete reinterpret_cast<Preference *>(p);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t handle,
    cublasLtMatmulPreferenceAttributes_t attribute, const void *buffer,
    size_t bytes) {
  auto &p = *reinterpret_cast<Preference *>(handle);
  int index = int(attribute) - int(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES);
  if (index >= 0 && index < 4 && bytes == sizeof(uint32_t)) {
    std::memcpy(&p.align[index], buffer, bytes);
    return CUBLAS_STATUS_SUCCESS;
  }
  if (attribute == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES)
    return CUBLAS_STATUS_SUCCESS; // the reference needs none
  return fail(CUBLAS_STATUS_NOT_SUPPORTED, "preference attribute " +
                                               std::to_string(int(attribute)) +
                                               " is not emulated");
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t, cublasLtMatmulDesc_t handle, cublasLtMatrixLayout_t a,
    cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
    cublasLtMatrixLayout_t dl, cublasLtMatmulPreference_t preference,
    int requested, cublasLtMatmulHeuristicResult_t *results, int *found) {
  *found = 0;
  const Desc &d = desc(handle);
  const Layout *ls[4] = {&layout(a), &layout(b), &layout(c), &layout(dl)};
  if (cublasStatus_t status = checkLayouts(d, ls))
    return status;
  if (requested < 1)
    return CUBLAS_STATUS_INVALID_VALUE;
  const auto &p = *reinterpret_cast<Preference *>(preference);
  Algo algo{kAlgoMagic, {}, 0, 0};
  for (int i = 0; i < 4; ++i)
    algo.align[i] = p.align[i];
  algo.biasAlign = alignmentOf(uintptr_t(d.bias));
  algo.auxAlign = alignmentOf(uintptr_t(d.aux));
  std::memset(&results[0], 0, sizeof(results[0]));
  static_assert(sizeof(Algo) <= sizeof(results[0].algo), "algo fits");
  std::memcpy(&results[0].algo, &algo, sizeof(algo));
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1;
  *found = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t handle, const void *alpha,
               const void *a, cublasLtMatrixLayout_t la, const void *b,
               cublasLtMatrixLayout_t lb, const void *beta, const void *c,
               cublasLtMatrixLayout_t lc, void *d, cublasLtMatrixLayout_t ld,
               const cublasLtMatmulAlgo_t *algoHandle, void *workspace,
               size_t workspaceBytes, cudaStream_t stream) {
  const Desc &desc_ = desc(handle);
  const Layout *ls[4] = {&layout(la), &layout(lb), &layout(lc), &layout(ld)};
  Algo algo;
  std::memcpy(&algo, algoHandle, sizeof(algo));
  if (algo.magic != kAlgoMagic)
    return fail(CUBLAS_STATUS_INVALID_VALUE,
                "the algorithm did not come from the heuristic");
  const void *ptrs[4] = {a, b, c, d};
  if (cublasStatus_t status = checkLayouts(desc_, ls))
    return status;
  if (cublasStatus_t status = checkAlignment(algo, desc_, ptrs, ls))
    return status;
  const char *names[4] = {"A", "B", "C", "D"};
  for (int i = 0; i < 4; ++i)
    requireDevice(ptrs[i], span(*ls[i]),
                  std::string("cublasLtMatmul's matrix ") + names[i]);
  if (hasBias(desc_.epilogue))
    requireDevice(desc_.bias, ls[3]->rows * typeBytes(ls[3]->type),
                  "cublasLtMatmul's bias");
  if (isGeluAux(desc_.epilogue))
    requireDevice(desc_.aux,
                  ((ls[3]->cols - 1) * desc_.auxLd + ls[3]->rows) *
                      typeBytes(ls[3]->type),
                  "cublasLtMatmul's aux");
  if (workspaceBytes)
    requireDevice(workspace, workspaceBytes, "cublasLtMatmul's workspace");
  requireHost(alpha, "cublasLtMatmul's alpha (host pointer mode)");
  requireHost(beta, "cublasLtMatmul's beta (host pointer mode)");
  float alphaValue = *static_cast<const float *>(alpha);
  float betaValue = *static_cast<const float *>(beta);
  Layout copies[4] = {*ls[0], *ls[1], *ls[2], *ls[3]};
  enqueueWork(
      stream,
      [=] {
        compute(desc_, alphaValue, betaValue, a, copies[0], b, copies[1], c,
                copies[2], d, copies[3]);
      },
      "cublasLtMatmul");
  return CUBLAS_STATUS_SUCCESS;
}

} // extern "C"
