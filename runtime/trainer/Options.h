//===- Options.h - Command-line options of the training driver --*- C++ -*-===//

#ifndef ZEST_RUNTIME_TRAINER_OPTIONS_H
#define ZEST_RUNTIME_TRAINER_OPTIONS_H

#include <cstdint>
#include <string>

namespace zest {

struct Options {
  int64_t steps = 10;
  uint64_t seed = 0;
  /// --seed was given (it then overrides a loaded checkpoint's rng_seed).
  bool seedGiven = false;
  // Optimizer hyperparameters (the optimizer itself is compiled in).
  std::string optimizer; // empty: whatever was compiled
  double lr = 0.01;
  double weightDecay = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double momentum = -1; // -1: 0.9 if a momentum buffer was compiled
  // Learning-rate schedule.
  std::string schedule = "constant";
  int64_t warmupSteps = 0;
  int64_t scheduleSteps = 0; // 0: the last step of this run
  double minLr = 0;
  int64_t accum = 1;
  std::string data = "synthetic";
  /// --tokens: a token stream cut into windows (TokenStream.h); ids must be
  /// below tokenBound when it is positive.
  std::string tokens;
  int64_t tokenBound = 0;
  /// --eval-tokens: the loss of the forward entry point (NAME_forward) on
  /// evalBatches fixed global batches of this stream's windows, every
  /// evalEvery steps (0: after the last).
  std::string evalTokens;
  int64_t evalEvery = 0, evalBatches = 4;
  int64_t datasetSize = 0;
  int64_t intBound = 16;
  std::string function;
  std::string save, load, trace;
  /// With --save: a checkpoint every N steps in DIR/step-NNNNNN (0: one
  /// after the last step, in DIR itself), keeping the newest `keep` (0: all).
  int64_t saveEvery = 0, keep = 0;
  double timeout = 0;
  /// --progress: a progress line per step on rank 0 (Progress.h).
  bool progress = false;
};

/// Parses argv (every rank parses the same arguments); `--help` and errors
/// exit every rank.
Options parseOptions(int argc, char **argv);

/// Exits every rank with status 2 after rank 0 explains; argument errors are
/// the same on every rank, so no rank is left waiting.
[[noreturn]] void usageError(const std::string &message);

/// Exits every rank with status 1 after rank 0 prints `message`: a data
/// file every rank reads and finds wrong in the same place (no usage text).
[[noreturn]] void dataError(const std::string &message);

} // namespace zest

#endif // ZEST_RUNTIME_TRAINER_OPTIONS_H
