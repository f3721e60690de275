//===- Progress.cpp - The per-step progress line (--progress) -------------===//

#include "Progress.h"

#include "zest_runtime.h"

#include <cstdio>

using namespace zest;

ProgressLine::ProgressLine(const FunctionInfo &function, int64_t microBatch,
                           int64_t samplesPerStep, int64_t firstStep,
                           int64_t lastStep)
    : samplesPerStep(samplesPerStep), firstStep(firstStep), lastStep(lastStep) {
  // Token ids: the first data argument, if it holds integers.
  for (const ArgInfo &arg : function.args) {
    if (arg.kind != ArgInfo::Data)
      continue;
    zest_dtype_t code = arg.spec.dtype.code;
    if ((code == ZEST_I64 || code == ZEST_I32) && microBatch > 0)
      tokensPerSample = arg.spec.numel() / microBatch;
    break;
  }
  // lastWaitUs stays 0: the run resets the counters before its first step
  // (start-up waits, rank agreement and loading, are not a step's).
}

void ProgressLine::report(int64_t step, double loss, double lr, double stepUs) {
  zest_counters_t counters;
  zest_get_counters(&counters);
  double waitUs = double(counters.wait_us) - lastWaitUs;
  lastWaitUs = double(counters.wait_us);
  elapsedUs += stepUs;
  int64_t done = step + 1 - firstStep, left = lastStep - step - 1;
  double perSecond = stepUs > 0 ? samplesPerStep / (stepUs / 1e6) : 0;
  const char *unit = tokensPerSample ? "tokens/s" : "samples/s";
  if (tokensPerSample)
    perSecond *= double(tokensPerSample);
  double etaS = done > 0 ? elapsedUs / double(done) * double(left) / 1e6 : 0;
  char eval[32] = "", norm[40] = "";
  if (evalLoss >= 0)
    std::snprintf(eval, sizeof(eval), " eval %.4f", evalLoss);
  if (gradNorm >= 0)
    std::snprintf(norm, sizeof(norm), " grad norm %.6g", gradNorm);
  std::printf("progress: step %lld/%lld loss %.4f%s%s lr %.4g %s %.0f step "
              "%.1f ms wait %.1f ms pool peak %.1f MiB eta %.0f s\n",
              static_cast<long long>(step + 1),
              static_cast<long long>(lastStep), loss, eval, norm, lr, unit,
              perSecond, stepUs / 1e3, waitUs / 1e3,
              double(counters.pool_held_peak_bytes) / (1 << 20), etaS);
  std::fflush(stdout);
}
