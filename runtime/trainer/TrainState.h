//===- TrainState.h - This rank's shards and optimizer inputs ---*- C++ -*-===//
//
// What a rank keeps between steps: its part of every unit (ZeRO: only the
// shard it owns), the optimizer state of that part and, when accumulating,
// a gradient accumulator. The compiled step updates them in place; the host
// only computes the per-step hyperparameters (learning-rate schedule, bias
// corrections, accumulation flags).
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_TRAINER_TRAINSTATE_H
#define ZEST_RUNTIME_TRAINER_TRAINSTATE_H

#include "ModelDescriptor.h"
#include "Options.h"

#include <string>
#include <vector>

namespace zest {

struct UnitState {
  const UnitInfo *unit;
  std::vector<float> param;
  /// Optimizer state by name ("exp_avg", "momentum_buffer", ...).
  std::vector<std::pair<std::string, std::vector<float>>> states;
  /// Sum of the gradient shards of earlier micro-batches (--accum > 1 only).
  std::vector<float> accum;
  /// No-sync: the unreduced flat gradient summed over the step's
  /// micro-batches (the whole padded unit).
  std::vector<float> gradSum;

  std::vector<float> *findState(const std::string &name);
};

class TrainState {
public:
  /// Initializes this rank's shards (seeded, world-size independent) and the
  /// state `function` takes; checks the options against what was compiled.
  TrainState(const ModelInfo &model, const FunctionInfo &function,
             const Options &options, int rank);

  /// Host storage for an argument of the unit, state or accumulator kind.
  void *storage(const ArgInfo &arg);

  /// Fills the zest_hyper_t vector for micro-batch `micro` of 0-based
  /// `step`.
  void fillHyper(float *hyper, int64_t step, int64_t micro) const;
  /// Learning rate of 0-based `step` under the schedule.
  double learningRate(int64_t step) const;

  std::vector<UnitState> units;
  /// The compiled optimizer ("" for forward-only functions).
  std::string optimizer;
  /// Seed of the random streams (dropout): --seed, or on resume the
  /// checkpoint's unless --seed is given, so that a resumed run draws what
  /// the uninterrupted one would.
  uint64_t rngSeed;
  bool rngSeedGiven;

private:
  const Options &options;
  double momentum = 0;
  int64_t scheduleSteps;
};

} // namespace zest

#endif // ZEST_RUNTIME_TRAINER_TRAINSTATE_H
