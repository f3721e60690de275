//===- CrossEntropy.cpp - Fused cross-entropy on the GPU ------------------===//
//
// The CUDA runtime's zest_cuda_cross_entropy_forward / _backward: the
// contracts of the CPU kernels (zest_runtime.h; device pointers), on the
// compute stream. The forward runs a block per row (its log-sum-exp and
// loss in one pass: an online softmax); for mean and sum, a thread per chunk of
// rows then sums its rows' losses and counts the rows kept, and one thread
// combines the chunks in order (deterministic; the scratch in pool memory for
// the call, which zest-plan-memory counts: zest_cuda_cross_entropy_scratch).
// The backward counts the same way for its scale, then writes a thread per
// gradient element (blocks of 256 classes of a row).
// zest_cuda_linear_cross_entropy runs the same kernels chunk by chunk of
// rows between the head's products on cuBLASLt. A target
// outside [0, classes) makes its row's loss and log-sum-exp NaN (a device
// cannot abort the step the way the CPU kernel does). Built as CUDA for a GPU
// and, through cuda-emulated/CrossEntropyHost.cpp, as C++ for the emulated
// device, which runs the same kernels (cuda-emulated/Simt.h).
//
//===----------------------------------------------------------------------===//

#include "../common/LinearHead.h"
#include "../cuda-nccl/Device.h"
#include "DeviceBuiltins.cuh"
#include "EpilogueKernels.cuh"
#include "zest_runtime.h"
#include "zest_runtime_cuda.h"

using namespace zest::rt;
using namespace zest::rt::cuda;

namespace {

/// The parameters every kernel shares.
struct LossShape {
  int64_t rows, classes, ld, ldGrad;
  int32_t targetBits;
  int64_t ignoreIndex;
  float smoothing;
  int32_t reduction;
};

/// Row i's target: -1 when ignored, -2 when outside [0, classes).
inline __device__ int64_t targetOf(const LossShape &s, const void *target,
                                   int64_t i) {
  int64_t t = s.targetBits == 32 ? static_cast<const int32_t *>(target)[i]
                                 : static_cast<const int64_t *>(target)[i];
  if (t == s.ignoreIndex)
    return -1;
  return t < 0 || t >= s.classes ? -2 : t;
}

/// A row's loss and log-sum-exp from its maximum, sum of exponentials
/// (relative to the maximum) and sum of logits.
template <typename T>
inline __device__ void
finishRow(const LossShape &s, const T *row, const void *target, int64_t i,
          float maximum, double sum, double total, float *rowLoss, float *lse) {
  int64_t t = targetOf(s, target, i);
  float rowLse = maximum + float(log(sum));
  lse[i] = t == -2 ? NAN : rowLse;
  if (t == -2)
    rowLoss[i] = NAN;
  else if (t == -1)
    rowLoss[i] = 0.0f;
  else
    rowLoss[i] = float(double(rowLse) - (1.0 - s.smoothing) * load(row[t]) -
                       double(s.smoothing) / double(s.classes) * total);
}

/// Threads of a block of crossEntropyRowBlockKernel.
constexpr int kRowThreads = 256;

/// (maximum, sum of exp(x - maximum)) of two parts of a row.
inline __device__ void combineSoftmax(float &maximum, float &sum,
                                      float otherMax, float otherSum) {
  float m = fmaxf(maximum, otherMax);
  if (m == -INFINITY)
    return;
  sum = sum * expf(maximum - m) + otherSum * expf(otherMax - m);
  maximum = m;
}

/// A block per row, one pass over its logits: each thread an online
/// softmax over a strided part, then the block's parts combined in a fixed
/// order (warp shuffles, then the warps): deterministic.
template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    crossEntropyRowBlockKernel(LossShape s, const T *logits, const void *target,
                               float *rowLoss, float *lse) {
  __shared__ float parts[3][kRowThreads / 32];
  int64_t i = blockIdx.x;
  const T *row = logits + i * s.ld;
  float maximum = -INFINITY, sum = 0.0f, total = 0.0f;
  for (int64_t c = threadIdx.x; c < s.classes; c += kRowThreads) {
    float x = load(row[c]);
    combineSoftmax(maximum, sum, x, 1.0f);
    total += x;
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    combineSoftmax(maximum, sum, __shfl_xor_sync(0xffffffffu, maximum, offset),
                   __shfl_xor_sync(0xffffffffu, sum, offset));
    total += __shfl_xor_sync(0xffffffffu, total, offset);
  }
  int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0)
    parts[0][warp] = maximum, parts[1][warp] = sum, parts[2][warp] = total;
  __syncthreads();
  if (threadIdx.x != 0)
    return;
  maximum = -INFINITY, sum = 0.0f, total = 0.0f;
  for (int w = 0; w < kRowThreads / 32; ++w) {
    combineSoftmax(maximum, sum, parts[0][w], parts[1][w]);
    total += parts[2][w];
  }
  finishRow(s, row, target, i, maximum, sum, total, rowLoss, lse);
}

/// The scratch of a call (zest_cuda_cross_entropy_scratch): a partial sum
/// and count per chunk of rows, then the rows' losses of a reducing forward
/// or the backward's scale.
struct LossScratch {
  double *sums = nullptr, *kept = nullptr;
  float *rowLoss = nullptr, *scale = nullptr;
  void *base = nullptr;

  /// In `at` (pool bytes the caller took for the call and frees) or, when
  /// null, in pool bytes of its own.
  LossScratch(const LossShape &s, bool backward, void *at = nullptr) {
    int64_t bytes =
        zest_cuda_cross_entropy_scratch(backward, s.rows, s.reduction);
    if (bytes == 0)
      return;
    if (!at)
      at = base = zest_pool_alloc(bytes);
    sums = static_cast<double *>(at);
    kept = sums + ZEST_CUDA_LOSS_CHUNKS;
    float *after = reinterpret_cast<float *>(kept + ZEST_CUDA_LOSS_CHUNKS);
    (backward ? scale : rowLoss) = after;
  }
  /// Reused only by work later on the same stream.
  void release() {
    if (base)
      zest_pool_free(base);
  }
};

/// A thread per chunk of consecutive rows: the sum of their losses (none
/// without rowLoss) and the rows not ignored, each in row order.
__global__ void crossEntropyChunksKernel(LossShape s, const void *target,
                                         const float *rowLoss, double *sums,
                                         double *kept) {
  int64_t chunk = globalThreadIndex();
  if (chunk >= ZEST_CUDA_LOSS_CHUNKS)
    return;
  int64_t size = (s.rows + ZEST_CUDA_LOSS_CHUNKS - 1) / ZEST_CUDA_LOSS_CHUNKS;
  int64_t begin = chunk * size < s.rows ? chunk * size : s.rows;
  int64_t end = begin + size < s.rows ? begin + size : s.rows;
  double sum = 0, count = 0;
  for (int64_t i = begin; i < end; ++i) {
    if (rowLoss)
      sum += rowLoss[i];
    count += targetOf(s, target, i) != -1;
  }
  sums[chunk] = sum;
  kept[chunk] = count;
}

/// One thread: the chunks combined in order (deterministic) into the loss
/// (sum, or mean over the rows not ignored) or, with `scale`, the
/// gradient's scale (1 / kept rows for mean, else 1).
__global__ void crossEntropyCombineKernel(LossShape s, const double *sums,
                                          const double *kept, float *loss,
                                          float *scale) {
  if (globalThreadIndex() != 0)
    return;
  double sum = 0, count = 0;
  for (int c = 0; c < ZEST_CUDA_LOSS_CHUNKS; ++c)
    sum += sums[c], count += kept[c];
  bool mean = s.reduction == ZEST_LOSS_MEAN;
  if (scale)
    scale[0] = mean ? float(1.0 / count) : 1.0f;
  else
    loss[0] = mean ? float(sum / count) : float(sum);
}

/// Threads of a block of the gradient: a block takes kGradThreads classes
/// of a row (the grid's x: rows, y: blocks of classes), so that no thread
/// divides by the number of classes.
constexpr int kGradThreads = 256;

template <typename T>
__global__ void crossEntropyGradKernel(LossShape s, const T *logits,
                                       const void *target,
                                       const float *gradLoss, const float *lse,
                                       const float *scale, T *grad) {
  ThreadCoordinates at = coordinates();
  int64_t i = at.block.x, c = int64_t(at.block.y) * kGradThreads + at.thread.x;
  if (c >= s.classes)
    return;
  int64_t t = targetOf(s, target, i);
  float g =
      t < 0 ? 0.0f : gradLoss[s.reduction == ZEST_LOSS_NONE ? i : 0] * scale[0];
  float p = expf(load(logits[i * s.ld + c]) - lse[i]);
  float onehot = c == t ? 1.0f - s.smoothing : 0.0f;
  grad[i * s.ldGrad + c] =
      store<T>(g * (p - onehot - s.smoothing / float(s.classes)));
}

int64_t blocks(int64_t threads) { return (threads + 255) / 256; }

/// The chunks' partial sums and counts, then their combination.
void reduceRows(const LossShape &s, const void *target,
                const LossScratch &scratch, float *loss) {
  ZEST_LAUNCH(crossEntropyChunksKernel, blocks(ZEST_CUDA_LOSS_CHUNKS), 256,
              cuda::streams.compute, s, target,
              static_cast<const float *>(scratch.rowLoss), scratch.sums,
              scratch.kept);
  ZEST_LAUNCH(crossEntropyCombineKernel, 1, 1, cuda::streams.compute, s,
              static_cast<const double *>(scratch.sums),
              static_cast<const double *>(scratch.kept), loss, scratch.scale);
  cuda::checkCuda(cudaGetLastError(), "the cross-entropy's reduction");
}

/// Each row's log-sum-exp and loss (into rowLoss).
template <typename T>
void launchRows(const LossShape &s, const T *logits, const void *target,
                float *rowLoss, float *lse) {
  launchKernel("crossEntropyRowBlockKernel<T>", crossEntropyRowBlockKernel<T>,
               s.rows, kRowThreads, 0, cuda::streams.compute, s, logits, target,
               rowLoss, lse);
  cuda::checkCuda(cudaGetLastError(), "the cross-entropy's rows");
}

/// The logits' gradient, given the loss's gradient and its scale.
template <typename T>
void launchGradient(const LossShape &s, const T *logits, const void *target,
                    const float *gradLoss, const float *lse, const float *scale,
                    T *grad) {
  dim3 grid(unsigned(s.rows),
            unsigned((s.classes + kGradThreads - 1) / kGradThreads));
  ZEST_LAUNCH(crossEntropyGradKernel<T>, grid, kGradThreads,
              cuda::streams.compute, s, logits, target, gradLoss, lse, scale,
              grad);
  cuda::checkCuda(cudaGetLastError(), "the cross-entropy's gradient");
}

template <typename T>
void forward(const LossShape &s, const T *logits, const void *target,
             float *loss, float *lse) {
  if (s.rows == 0)
    return;
  LossScratch scratch(s, /*backward=*/false);
  launchRows(s, logits, target, scratch.rowLoss ? scratch.rowLoss : loss, lse);
  if (scratch.rowLoss)
    reduceRows(s, target, scratch, loss);
  scratch.release();
}

template <typename T>
void backward(const LossShape &s, const T *logits, const void *target,
              const float *gradLoss, const float *lse, T *grad) {
  if (s.rows * s.classes == 0)
    return;
  LossScratch scratch(s, /*backward=*/true);
  reduceRows(s, target, scratch, nullptr);
  launchGradient(s, logits, target, gradLoss, lse,
                 static_cast<const float *>(scratch.scale), grad);
  scratch.release();
}

/// zest_cuda_linear_cross_entropy: the scale of the gradient over all rows
/// first, then per chunk its logits, their losses (kept for the reduction)
/// and log-sum-exps, their gradient over them, and the head's gradients;
/// the loss last. One pool block holds both scratches. T is the kernels'
/// view of storage C.
template <typename T, typename C>
void linearCrossEntropy(const LossShape &all, const LinearHead<C> &head,
                        const void *target, const float *gradLoss,
                        int64_t chunkRows, C *logits, float *lse, float *loss) {
  if (all.rows == 0)
    return;
  int64_t forwardBytes =
      zest_cuda_cross_entropy_scratch(0, all.rows, all.reduction);
  void *base = zest_pool_alloc(
      zest_cuda_linear_cross_entropy_scratch(all.rows, all.reduction));
  LossScratch forward(all, /*backward=*/false, base);
  LossScratch backward(all, /*backward=*/true,
                       static_cast<char *>(base) + forwardBytes);
  reduceRows(all, target, backward, nullptr);
  T *chunk = reinterpret_cast<T *>(logits);
  for (int64_t begin = 0; begin < all.rows; begin += chunkRows) {
    LossShape part = all;
    part.rows = chunkRows < all.rows - begin ? chunkRows : all.rows - begin;
    const void *partTarget =
        static_cast<const char *>(target) + begin * (all.targetBits / 8);
    head.logitsOf(begin, part.rows, logits, all.ld);
    launchRows(part, static_cast<const T *>(chunk), partTarget,
               forward.rowLoss + begin, lse + begin);
    launchGradient(part, static_cast<const T *>(chunk), partTarget, gradLoss,
                   lse + begin, static_cast<const float *>(backward.scale),
                   chunk);
    head.addGradients(begin, part.rows, logits, all.ld);
  }
  reduceRows(all, target, forward, loss);
  zest_pool_free(base);
}

LossShape makeShape(int64_t rows, int64_t classes, int64_t ld, int64_t ldGrad,
                    int32_t targetBits, int64_t ignoreIndex, float smoothing,
                    int32_t reduction) {
  return {rows,       classes,     ld,        ldGrad,
          targetBits, ignoreIndex, smoothing, reduction};
}

} // namespace

#define ZEST_CUDA_CROSS_ENTROPY_ENTRIES(SUFFIX, C, T)                          \
  void zest_cuda_cross_entropy_forward##SUFFIX(                                \
      ZEST_cross_entropy_forward_PARAMS(C)) {                                  \
    forward(makeShape(rows, classes, ld, 0, target_bits, ignore_index,         \
                      label_smoothing, reduction),                             \
            reinterpret_cast<const T *>(logits), target, loss, lse);           \
  }                                                                            \
  void zest_cuda_cross_entropy_backward##SUFFIX(                               \
      ZEST_cross_entropy_backward_PARAMS(C)) {                                 \
    backward(makeShape(rows, classes, ld, ld_grad, target_bits, ignore_index,  \
                       label_smoothing, reduction),                            \
             reinterpret_cast<const T *>(logits), target, grad_loss, lse,      \
             reinterpret_cast<T *>(grad_logits));                              \
  }

/// The head fused into the loss for one storage type: its products are
/// FORWARD (rounded logits) and GEMM (f32 gradients). A loss per row has no
/// single gradient: it is taken as their sum (the op's verifier admits mean
/// and sum only).
#define ZEST_CUDA_LINEAR_CROSS_ENTROPY_ENTRY(SUFFIX, C, T, FORWARD, GEMM)      \
  void zest_cuda_linear_cross_entropy##SUFFIX(                                 \
      ZEST_linear_cross_entropy_PARAMS(C)) {                                   \
    int32_t kind =                                                             \
        reduction == ZEST_LOSS_MEAN ? ZEST_LOSS_MEAN : ZEST_LOSS_SUM;          \
    LinearHead<C> head = ZEST_LINEAR_HEAD(C, FORWARD, GEMM);                   \
    linearCrossEntropy<T>(makeShape(rows, classes, ld_logits, ld_logits,       \
                                    target_bits, ignore_index,                 \
                                    label_smoothing, kind),                    \
                          head, target, grad_loss,                             \
                          chunk_rows > 0 ? chunk_rows : 1, logits, lse, loss); \
  }

extern "C" {
ZEST_CUDA_CROSS_ENTROPY_ENTRIES(, float, float)
ZEST_CUDA_CROSS_ENTROPY_ENTRIES(_bf16, uint16_t, __nv_bfloat16)
ZEST_CUDA_CROSS_ENTROPY_ENTRIES(_f16, uint16_t, __half)
ZEST_CUDA_LINEAR_CROSS_ENTROPY_ENTRY(, float, float, zest_cuda_linear_forward,
                                     zest_cuda_sgemm)
ZEST_CUDA_LINEAR_CROSS_ENTROPY_ENTRY(_bf16, uint16_t, __nv_bfloat16,
                                     zest_cuda_linear_forward_bf16,
                                     zest_cuda_widening_gemm_bf16)
ZEST_CUDA_LINEAR_CROSS_ENTROPY_ENTRY(_f16, uint16_t, __half,
                                     zest_cuda_linear_forward_f16,
                                     zest_cuda_widening_gemm_f16)
}
