//===- CrossEntropy.cpp - Fused cross-entropy on the CPU ------------------===//
//
// PyTorch's cross_entropy with class-index targets as two kernels: the
// forward reads each row once (an online maximum and sum of exponentials,
// the row's sum and its target's logit) and keeps only its log-sum-exp;
// the backward writes each gradient element from its logit and its row's
// log-sum-exp. Neither forms log-probabilities or a softmax of the whole
// [rows, classes] array. Rows run in parallel (OpenMP where the build has
// it); sums over a row and over rows are in double, so the loss does not
// depend on the order.
//
//===----------------------------------------------------------------------===//

#include "../common/HalfFloat.h"
#include "zest_runtime.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <vector>

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

extern "C" {
ZEST_CROSS_ENTROPY_ENTRIES(, float, float)
ZEST_CROSS_ENTROPY_ENTRIES(_bf16, uint16_t, Half<1>)
ZEST_CROSS_ENTROPY_ENTRIES(_f16, uint16_t, Half<2>)
}
