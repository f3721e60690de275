//===- Progress.h - The per-step progress line (--progress) ----*- C++ -*-===//
//
// With --progress rank 0 prints, after each step's loss, one line with the
// step's figures: where the run is (step of last, ETA), how fast it goes
// (tokens/s where the first data argument holds token ids, else samples/s;
// the step's time and its communication wait) and the pool's peak. `zest
// train` redraws it in place on a terminal and leaves the lines as they are
// elsewhere (python/zest/progress.py).
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_TRAINER_PROGRESS_H
#define ZEST_RUNTIME_TRAINER_PROGRESS_H

#include "ModelDescriptor.h"

#include <cstdint>

namespace zest {

class ProgressLine {
public:
  /// Steps [firstStep, lastStep) of `function`, `samplesPerStep` samples of
  /// `microBatch` each per call.
  ProgressLine(const FunctionInfo &function, int64_t microBatch,
               int64_t samplesPerStep, int64_t firstStep, int64_t lastStep);

  /// Prints step `step` (0-based)'s line: its loss, learning rate, time
  /// and the counters since the previous step.
  void report(int64_t step, double loss, double lr, double stepUs);

  /// The evaluation loss after the step just reported: on the next lines.
  void noteEvaluation(double loss) { evalLoss = loss; }
  /// The global gradient norm before clipping of the step about to be
  /// reported (a step compiled with clipping).
  void noteGradNorm(double norm) { gradNorm = norm; }

private:
  double evalLoss = -1; // none yet
  double gradNorm = -1; // none: no clipping
  int64_t samplesPerStep, tokensPerSample = 0, firstStep, lastStep;
  double elapsedUs = 0, lastWaitUs = 0;
};

} // namespace zest

#endif // ZEST_RUNTIME_TRAINER_PROGRESS_H
