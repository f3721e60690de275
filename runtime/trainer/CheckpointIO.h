//===- CheckpointIO.h - Sharded checkpoints of the training state -*- C++
//-*-===//

#ifndef ZEST_RUNTIME_TRAINER_CHECKPOINTIO_H
#define ZEST_RUNTIME_TRAINER_CHECKPOINTIO_H

#include "ModelDescriptor.h"
#include "TrainState.h"

#include <string>

namespace zest {

/// Every rank learns whether all succeeded; the failing ones explain and
/// every rank exits with status 1. For errors only some ranks may see (a
/// corrupt file of one rank).
void agreeOrExit(bool ok, const std::string &message);

/// Writes this rank's shards and optimizer state after `step` steps.
void saveCheckpoint(const std::string &dir, const ModelInfo &model,
                    TrainState &train, int64_t step);

/// A checkpoint that replaces `dir` (--save without --save-every): written
/// to `dir.saving`; once every rank's files are durable, `dir` moves to
/// `dir.previous`, `dir.saving` to `dir`, and `dir.previous` goes. A crash
/// at any point leaves a complete checkpoint: `dir`, or `dir.previous`,
/// which loading falls back to when `dir` is missing.
void saveCheckpointReplacing(const std::string &dir, const ModelInfo &model,
                             TrainState &train, int64_t step);

/// A periodic checkpoint (--save-every): saved into `root/step-NNNNNN`;
/// once every rank's files are durable, `root/latest` names it (atomically,
/// so a crash mid-save leaves `latest` on the previous one); then all but
/// the newest `keep` step folders go (0: none).
void saveStepCheckpoint(const std::string &root, const ModelInfo &model,
                        TrainState &train, int64_t step, int64_t keep);

/// Loads this rank's shards and optimizer state from `dir`, or from the
/// checkpoint `dir/latest` names; returns the step the checkpoint was
/// taken at. All ranks agree or all exit.
int64_t loadCheckpoint(const std::string &dir, const ModelInfo &model,
                       TrainState &train);

} // namespace zest

#endif // ZEST_RUNTIME_TRAINER_CHECKPOINTIO_H
