//===- CrossEntropy.cpp - Fused cross-entropy on the CPU ------------------===//
//
// PyTorch's cross_entropy with class-index targets as two kernels: the
// forward reads each row once (an online maximum and sum of exponentials,
// the row's sum and its target's logit) and keeps only its log-sum-exp;
// the backward writes each gradient element from its logit and its row's
// log-sum-exp. Neither forms log-probabilities or a softmax of the whole
// [rows, classes] array. Rows run in parallel (OpenMP where the build has
// it); sums over a row and over rows are in double, so the loss does not
// depend on the order. zest_linear_cross_entropy runs the head's product
// and both kernels chunk by chunk of rows, with the head's gradients on the
// runtime's products after each, so that one chunk of logits exists at a
// time.
//
//===----------------------------------------------------------------------===//

#include "../common/HalfFloat.h"
#include "../common/LinearHead.h"
#include "zest_runtime.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <vector>

using zest::rt::LinearHead;

namespace {

/// The parameters both kernels share.
struct Loss {
  int64_t rows, classes, ld;
  const void *target;
  int32_t targetBits;
  int64_t ignoreIndex;
  float smoothing;
  int32_t reduction;

  /// Row i's target, or -1 when it is ignore_index; aborts outside
  /// [0, classes), as PyTorch raises.
  int64_t targetOf(int64_t i) const {
    int64_t t = targetBits == 32 ? static_cast<const int32_t *>(target)[i]
                                 : static_cast<const int64_t *>(target)[i];
    if (t == ignoreIndex)
      return -1;
    if (t < 0 || t >= classes) {
      std::fprintf(stderr,
                   "zest: cross-entropy target %lld of row %lld is outside "
                   "[0, %lld) and is not ignore_index %lld\n",
                   static_cast<long long>(t), static_cast<long long>(i),
                   static_cast<long long>(classes),
                   static_cast<long long>(ignoreIndex));
      std::abort();
    }
    return t;
  }

  /// The rows whose target is not ignored.
  int64_t countKept() const {
    int64_t kept = 0;
    for (int64_t i = 0; i < rows; ++i)
      kept += targetOf(i) >= 0;
    return kept;
  }
};

/// Storage kinds of 16-bit logits.
template <int Kind> struct Half { uint16_t bits; };

template <typename T> float load(const T *row, int64_t c);
template <> float load<float>(const float *row, int64_t c) { return row[c]; }
template <> float load<Half<1>>(const Half<1> *row, int64_t c) {
  return zest::rt::bf16ToFloat(row[c].bits);
}
template <> float load<Half<2>>(const Half<2> *row, int64_t c) {
  return zest::rt::f16ToFloat(row[c].bits);
}
template <typename T> void store(T *row, int64_t c, float v);
template <> void store<float>(float *row, int64_t c, float v) { row[c] = v; }
template <> void store<Half<1>>(Half<1> *row, int64_t c, float v) {
  row[c].bits = zest::rt::floatToBf16(v);
}
template <> void store<Half<2>>(Half<2> *row, int64_t c, float v) {
  row[c].bits = zest::rt::floatToF16(v);
}

/// Row i's log-sum-exp and loss (0 when ignored).
template <typename T>
void rowLoss(const Loss &l, const T *logits, int64_t i, float &lse,
             double &loss) {
  const T *row = logits + i * l.ld;
  float maximum = -std::numeric_limits<float>::infinity();
  for (int64_t c = 0; c < l.classes; ++c)
    maximum = std::max(maximum, load(row, c));
  double sum = 0, total = 0;
  for (int64_t c = 0; c < l.classes; ++c) {
    float x = load(row, c);
    sum += std::exp(x - maximum);
    total += x;
  }
  lse = maximum + float(std::log(sum));
  int64_t t = l.targetOf(i);
  if (t < 0) {
    loss = 0;
    return;
  }
  loss = double(lse) - (1.0 - l.smoothing) * load(row, t) -
         double(l.smoothing) / double(l.classes) * total;
}

template <typename T>
void forward(const Loss &l, const T *logits, float *loss, float *lse) {
  std::vector<double> losses(l.rows);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < l.rows; ++i)
    rowLoss(l, logits, i, lse[i], losses[i]);
  if (l.reduction == ZEST_LOSS_NONE) {
    for (int64_t i = 0; i < l.rows; ++i)
      loss[i] = float(losses[i]);
    return;
  }
  double sum = 0;
  for (double x : losses)
    sum += x;
  // 0 / 0 is NaN where every row is ignored, as in PyTorch.
  loss[0] = l.reduction == ZEST_LOSS_MEAN ? float(sum / double(l.countKept()))
                                          : float(sum);
}

template <typename T>
void backward(const Loss &l, const T *logits, const float *gradLoss,
              const float *lse, T *grad, int64_t ldGrad) {
  double scale = 1;
  if (l.reduction == ZEST_LOSS_MEAN)
    scale = 1.0 / double(l.countKept());
  float off = l.smoothing / float(l.classes);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < l.rows; ++i) {
    const T *row = logits + i * l.ld;
    T *out = grad + i * ldGrad;
    int64_t t = l.targetOf(i);
    float g =
        t < 0 ? 0.0f
              : float(double(gradLoss[l.reduction == ZEST_LOSS_NONE ? i : 0]) *
                      scale);
    for (int64_t c = 0; c < l.classes; ++c) {
      float p = std::exp(load(row, c) - lse[i]);
      float onehot = c == t ? 1.0f - l.smoothing : 0.0f;
      store(out, c, g * (p - onehot - off));
    }
  }
}

/// The rows [begin, begin + n) of `all`, their logits `ld` apart.
Loss chunkOf(const Loss &all, int64_t begin, int64_t n, int64_t ld) {
  Loss part = all;
  part.rows = n;
  part.ld = ld;
  part.target =
      static_cast<const char *>(all.target) + begin * (all.targetBits / 8);
  return part;
}

/// zest_linear_cross_entropy: per chunk, its logits, their losses and
/// log-sum-exps, their gradient over them, and the head's gradients (T the
/// kernels' view of storage C).
template <typename T, typename C>
void linearCrossEntropy(const Loss &all, const LinearHead<C> &head,
                        const float *gradLoss, int64_t chunkRows, C *logits,
                        int64_t ld, float *lse, float *loss) {
  int64_t kept = all.countKept();
  // The gradient of every row not ignored, as the unfused backward forms
  // it; each chunk then scales by 1 (a sum).
  float rowGrad = float(double(gradLoss[0]) *
                        (all.reduction == ZEST_LOSS_MEAN ? 1.0 / kept : 1.0));
  T *chunk = reinterpret_cast<T *>(logits);
  std::vector<double> losses(all.rows);
  for (int64_t begin = 0; begin < all.rows; begin += chunkRows) {
    int64_t n = std::min(chunkRows, all.rows - begin);
    Loss part = chunkOf(all, begin, n, ld);
    part.reduction = ZEST_LOSS_SUM;
    head.logitsOf(begin, n, logits, ld);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      rowLoss(part, chunk, i, lse[begin + i], losses[begin + i]);
    backward(part, chunk, &rowGrad, lse + begin, chunk, ld);
    head.addGradients(begin, n, logits, ld);
  }
  if (all.rows == 0 && head.dw)
    for (int64_t r = 0, end = head.dwTransposed ? head.classes : head.k;
         r < end; ++r)
      std::fill_n(head.dw + r * head.lddw,
                  head.dwTransposed ? head.k : head.classes, 0.0f);
  double sum = 0;
  for (double x : losses)
    sum += x;
  loss[0] =
      all.reduction == ZEST_LOSS_MEAN ? float(sum / double(kept)) : float(sum);
}

Loss makeLoss(int64_t rows, int64_t classes, int64_t ld, const void *target,
              int32_t targetBits, int64_t ignoreIndex, float smoothing,
              int32_t reduction) {
  return {rows,       classes,     ld,        target,
          targetBits, ignoreIndex, smoothing, reduction};
}

} // namespace

/// The entry points of one storage type (T: float, Half<1> bf16, Half<2>
/// f16; C the C API's element type).
#define ZEST_CROSS_ENTROPY_ENTRIES(SUFFIX, C, T)                               \
  void zest_cross_entropy_forward##SUFFIX(                                     \
      ZEST_cross_entropy_forward_PARAMS(C)) {                                  \
    zest_progress();                                                           \
    forward(makeLoss(rows, classes, ld, target, target_bits, ignore_index,     \
                     label_smoothing, reduction),                              \
            reinterpret_cast<const T *>(logits), loss, lse);                   \
  }                                                                            \
  void zest_cross_entropy_backward##SUFFIX(                                    \
      ZEST_cross_entropy_backward_PARAMS(C)) {                                 \
    zest_progress();                                                           \
    backward(makeLoss(rows, classes, ld, target, target_bits, ignore_index,    \
                      label_smoothing, reduction),                             \
             reinterpret_cast<const T *>(logits), grad_loss, lse,              \
             reinterpret_cast<T *>(grad_logits), ld_grad);                     \
  }

/// The head fused into the loss for one storage type: its products are
/// FORWARD (rounded logits) and GEMM (f32 gradients).
#define ZEST_LINEAR_CROSS_ENTROPY_ENTRY(SUFFIX, C, T, FORWARD, GEMM)           \
  void zest_linear_cross_entropy##SUFFIX(                                      \
      ZEST_linear_cross_entropy_PARAMS(C)) {                                   \
    zest_progress();                                                           \
    LinearHead<C> head = ZEST_LINEAR_HEAD(C, FORWARD, GEMM);                   \
    linearCrossEntropy<T>(makeLoss(rows, classes, ld_logits, target,           \
                                   target_bits, ignore_index, label_smoothing, \
                                   reduction),                                 \
                          head, grad_loss, std::max<int64_t>(1, chunk_rows),   \
                          logits, ld_logits, lse, loss);                       \
  }

extern "C" {
ZEST_CROSS_ENTROPY_ENTRIES(, float, float)
ZEST_CROSS_ENTROPY_ENTRIES(_bf16, uint16_t, Half<1>)
ZEST_CROSS_ENTROPY_ENTRIES(_f16, uint16_t, Half<2>)
ZEST_LINEAR_CROSS_ENTROPY_ENTRY(, float, float, zest_linear_forward, zest_sgemm)
ZEST_LINEAR_CROSS_ENTROPY_ENTRY(_bf16, uint16_t, Half<1>,
                                zest_linear_forward_bf16,
                                zest_widening_gemm_bf16)
ZEST_LINEAR_CROSS_ENTROPY_ENTRY(_f16, uint16_t, Half<2>,
                                zest_linear_forward_f16, zest_widening_gemm_f16)
}
