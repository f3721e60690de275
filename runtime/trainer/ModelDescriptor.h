//===- ModelDescriptor.h - What a compiled model looks like ----*- C++ -*-===//
//
// Parses `zest_model_descriptor`, the text record zestc embeds in every
// model (format: runtime/include/zest_model_descriptor.h).
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_TRAINER_MODELDESCRIPTOR_H
#define ZEST_RUNTIME_TRAINER_MODELDESCRIPTOR_H

#include "zest_runtime.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zest {

/// A dtype by its safetensors name.
struct DType {
  std::string name; // "F32", "I64", ...
  zest_dtype_t code;
  int64_t bytes;
  static DType parse(const std::string &name); // fatal if unsupported
};

struct TensorSpec {
  DType dtype;
  std::vector<int64_t> shape;
  int64_t numel() const;
  int64_t bytes() const { return numel() * dtype.bytes; }
};

struct ParamInfo {
  std::string fqn;
  int64_t offset;
  TensorSpec spec;
};

struct UnitInfo {
  std::string name;
  bool sharded;
  /// Sharded over an expert group (expert parallelism), not all ranks.
  bool experts = false;
  DType dtype;
  int64_t numel, padded, shard;
  std::vector<ParamInfo> params;
  /// Elements of the flat buffer shard `rank` holds: [begin, begin +
  /// shard). An expert-parallel unit has fewer shards than ranks (one per
  /// rank of an expert group): rank r holds shard r % its shards.
  int64_t localBegin(int rank) const {
    return sharded && shard > 0 ? rank % (padded / shard) * shard : 0;
  }
};

/// A data argument that indexes a table (an embedding's ids, a loss's
/// targets): each value in [0, bound), or equal to `ignore` where it has one.
struct IndexBound {
  int64_t bound = 0; // 0: not an index
  /// The table's parameter, for messages; empty when it is not one (a
  /// loss's classes).
  std::string table;
  bool hasIgnore = false;
  int64_t ignore = 0;
  bool allows(int64_t value) const {
    return (value >= 0 && value < bound) || (hasIgnore && value == ignore);
  }
};

struct ArgInfo {
  /// Data: per-rank input. Unit: this rank's shard. State: optimizer state
  /// of `unit` named `state`. Accum: gradient accumulator of `unit`. Hyper:
  /// the zest_hyper_t vector. GradSum: the unreduced flat gradient of `unit`
  /// summed over micro-batches (no-sync). Rng: the micro-batch's random
  /// streams (step key, first sample in the step). Unit, state and accum are
  /// updated in place by training steps with an optimizer, grad sums by both
  /// entry points of a no-sync step.
  /// Stage: a host buffer the step copies a gradient or the hyperparameters
  /// into (offload); the host never reads it.
  enum Kind { Data, Unit, State, Accum, Hyper, GradSum, Rng, Stage } kind;
  /// Offload: the argument lives in pinned host memory, not on the device.
  bool onHost = false;
  int unit = -1; // Unit, State, Accum, GradSum
  std::string state;
  TensorSpec spec;
  /// Data: what the values index, if anything.
  IndexBound indices;
};

struct ResultInfo {
  /// GradNorm: the global gradient norm before clipping (with clipping).
  enum Kind { Loss, Grad, Output, GradNorm } kind;
  int unit = -1; // when Grad
  TensorSpec spec;
};

struct FunctionInfo {
  std::string name;
  /// The optimizer compiled into this training step, or empty.
  std::string optimizer;
  /// No-sync: the training step this entry point accumulates for, or empty.
  std::string accumulateFor;
  std::vector<ArgInfo> args;
  std::vector<ResultInfo> results;
  /// A loss and gradients (applied by the compiled optimizer, or returned
  /// under --optimizer=none); a loss alone is an evaluation, run forward only.
  bool isTraining() const;
};

struct ModelInfo {
  int worldSize = 1;
  /// Hybrid sharding: the ranks form `replicas` groups of shards(); rank r
  /// holds shard r % shards() (1 x worldSize without).
  int replicas = 1;
  int shards() const { return worldSize / replicas; }
  int shardOf(int rank) const { return rank % shards(); }
  /// Expert parallelism: the ranks of an expert group (1 without).
  int expertGroup = 1;
  std::vector<UnitInfo> units;
  std::vector<FunctionInfo> functions;
  /// A hash of the parameter layout (names, dtypes, shapes, offsets), the
  /// same for every world size: identifies the model in checkpoints.
  std::string layoutHash() const;
};

ModelInfo parseModelDescriptor(const char *text);

} // namespace zest

#endif // ZEST_RUNTIME_TRAINER_MODELDESCRIPTOR_H
