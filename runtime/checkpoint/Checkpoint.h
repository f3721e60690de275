//===- Checkpoint.h - Sharded Zest checkpoints ------------------*- C++ -*-===//
//
// A checkpoint is a folder: manifest.json (the flat layout, world size and
// model hash) and one safetensors file per rank, rank-RRRRR-of-WWWWW, holding
// per unit its local part of the flat parameter buffer ("<unit>") and of
// the optimizer state ("<unit>.<state>", kOptimizerStates: torch.optim's
// state names).
// Metadata records step, world size, rank, optimizer and model hash.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_CHECKPOINT_CHECKPOINT_H
#define ZEST_RUNTIME_CHECKPOINT_CHECKPOINT_H

#include "AtomicFile.h"
#include "Json.h"

#include <optional>
#include <string>
#include <vector>

namespace zest::checkpoint {

/// Optimizer state a checkpoint may hold per unit: AdamW's exp_avg and
/// exp_avg_sq, SGD's momentum_buffer (the names of torch.optim's state).
inline constexpr const char *kOptimizerStates[] = {"exp_avg", "exp_avg_sq",
                                                   "momentum_buffer"};

struct ManifestParam {
  std::string fqn;
  std::vector<int64_t> shape;
  int64_t offset, numel;
};

struct ManifestUnit {
  std::string name, kind, dtype;
  int64_t numel, padded, shard;
  std::vector<ManifestParam> params;
  /// Expert parallelism: the ranks of the expert group the unit is sharded
  /// over (each shard whole experts); 0: sharded over all ranks.
  int64_t expertGroup = 0;
  bool sharded() const { return kind == "sharded"; }
  /// Shards of the flat buffer: one per rank, or for an expert-parallel
  /// unit one per rank of an expert group (the next groups repeat them).
  int64_t shards() const { return sharded() && shard > 0 ? padded / shard : 1; }
  /// Where rank `rank`'s part of the flat buffer begins.
  int64_t shardBegin(int64_t rank) const {
    return sharded() ? rank % shards() * shard : 0;
  }
};

struct Manifest {
  int64_t worldSize = 1;
  std::string modelHash; // empty for a manifest written by zest-opt
  std::vector<ManifestUnit> units;

  /// The same layout for `worldSize` ranks: units sharded over all ranks
  /// padded for them, expert-parallel units over groups of `expertGroup`
  /// ranks (0: their own). None, with `error` set, where that layout cannot
  /// be (a group that does not divide the ranks or the unit).
  std::optional<Manifest> withWorldSize(int64_t worldSize, int64_t expertGroup,
                                        std::string &error) const;
  std::string toJson() const;
};

/// Reads a manifest (zest-opt's --zest-manifest or a checkpoint's).
bool readManifest(const std::string &path, Manifest &out, std::string &error);

/// The file of `rank` in a checkpoint folder.
std::string rankFileName(const std::string &dir, int64_t rank,
                         int64_t worldSize);

/// A shape for messages: "[2, 3]".
std::string shapeText(const std::vector<int64_t> &shape);

/// Periodic checkpoints (--save-every) live in `<root>/step-NNNNNN`, and
/// `<root>/latest` names the newest complete one.
std::string stepFolderName(int64_t step);
/// The checkpoint folder `dir` designates: the one its `latest` names, or
/// `dir` itself; `dir.previous` if `dir` is missing (an interrupted
/// replacing save).
std::string resolveLatest(const std::string &dir);

} // namespace zest::checkpoint

#endif // ZEST_RUNTIME_CHECKPOINT_CHECKPOINT_H
