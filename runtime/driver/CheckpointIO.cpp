//===- CheckpointIO.cpp - Sharded checkpoints of the training state -------===//
//
// One safetensors file per shard (its unit shards and optimizer state, named
// "<unit>" and "<unit>.<state>") plus the layout manifest, written
// crash-safely; docs/Runtime.md describes the format. Under hybrid sharding
// the replicas hold identical shards: the first replica writes them, and
// every replica reads them, so a checkpoint only knows its shard count.
//
//===----------------------------------------------------------------------===//

#include "CheckpointIO.h"
#include "../checkpoint/Checkpoint.h"
#include "../checkpoint/Safetensors.h"
#include "zest_runtime.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>

using namespace zest;

/// Every rank learns whether all succeeded; the failing ones explain. Used
/// for errors only some ranks may see (a corrupt file of one rank).
void zest::agreeOrExit(bool ok, const std::string &message) {
  int32_t local = ok ? 1 : 0, all = 0;
  zest_wait(zest_all_reduce_start(&local, &all, 1, ZEST_I32, ZEST_SUM,
                                  ZEST_GROUP_WORLD, "agree"));
  if (all == zest_world_size())
    return;
  if (!ok)
    std::fprintf(stderr, "zest: rank %d: error: %s\n", zest_rank(),
                 message.c_str());
  std::fflush(stderr);
  zest_finalize();
  std::exit(1);
}

static checkpoint::Manifest toManifest(const ModelInfo &model) {
  checkpoint::Manifest manifest;
  manifest.worldSize = model.shards();
  manifest.modelHash = model.layoutHash();
  for (const UnitInfo &unit : model.units) {
    checkpoint::ManifestUnit out{unit.name,
                                 unit.sharded ? "sharded" : "replicated",
                                 unit.dtype.name,
                                 unit.numel,
                                 unit.padded,
                                 unit.shard,
                                 {}};
    for (const ParamInfo &param : unit.params)
      out.params.push_back(
          {param.fqn, param.spec.shape, param.offset, param.spec.numel()});
    manifest.units.push_back(out);
  }
  return manifest;
}

void zest::saveCheckpoint(const std::string &dir, const ModelInfo &model,
                          TrainState &train, int64_t step) {
  int rank = zest_rank(), world = model.shards(), shard = model.shardOf(rank);
  bool writer = rank < world; // the first replica
  std::string error;
  bool ok = true;
  if (rank == 0) {
    ::mkdir(dir.c_str(), 0755);
    struct stat info;
    ok = ::stat(dir.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
    if (!ok)
      error = "cannot create checkpoint folder '" + dir + "'";
  }
  agreeOrExit(ok, error);
  safetensors::File file;
  file.metadata = {
      {"format", "zest-checkpoint"},     {"version", "1"},
      {"step", std::to_string(step)},    {"world_size", std::to_string(world)},
      {"rank", std::to_string(shard)},   {"optimizer", train.optimizer},
      {"model_hash", model.layoutHash()}};
  for (UnitState &state : train.units) {
    int64_t n = int64_t(state.param.size());
    file.tensors.push_back(
        {state.unit->name, safetensors::f32Tensor({n}, state.param.data())});
    for (auto &[name, values] : state.states)
      file.tensors.push_back({state.unit->name + "." + name,
                              safetensors::f32Tensor({n}, values.data())});
  }
  if (writer)
    ok = safetensors::write(checkpoint::rankFileName(dir, shard, world), file,
                            error);
  if (ok && rank == 0) {
    std::string manifest = toManifest(model).toJson();
    ok = writeFileAtomically(dir + "/manifest.json",
                             {{manifest.data(), manifest.size()}}, error);
  }
  agreeOrExit(ok, error);
  if (rank == 0)
    std::printf("saved checkpoint '%s' at step %lld\n", dir.c_str(),
                static_cast<long long>(step));
}

/// Loads this rank's shards; returns the step the checkpoint was taken at.
int64_t zest::loadCheckpoint(const std::string &dir, const ModelInfo &model,
                             TrainState &train) {
  int rank = zest_rank(), world = model.shards(), shard = model.shardOf(rank);
  checkpoint::Manifest manifest;
  std::string error;
  bool ok = checkpoint::readManifest(dir + "/manifest.json", manifest, error);
  if (!ok)
    error = "cannot load checkpoint '" + dir + "': " + error;
  if (ok && manifest.modelHash != model.layoutHash()) {
    ok = false;
    error = "checkpoint '" + dir +
            "' is from another model: its parameter "
            "layout (hash " +
            manifest.modelHash +
            ") differs from this "
            "executable's (hash " +
            model.layoutHash() + ")";
  }
  if (ok && manifest.worldSize != world) {
    ok = false;
    error = "checkpoint '" + dir + "' was saved with world size " +
            std::to_string(manifest.worldSize) + " but this run has " +
            std::to_string(world) +
            (model.replicas > 1 ? " shards per replica" : "") +
            "; convert it with: zest-ckpt reshard " + dir +
            " <out> --world-size " + std::to_string(world);
  }
  safetensors::File file;
  if (ok)
    ok = safetensors::read(checkpoint::rankFileName(dir, shard, world), file,
                           error);
  int64_t step = 0;
  if (ok) {
    auto it = file.metadata.find("step");
    ok = it != file.metadata.end() &&
         file.metadata["model_hash"] == model.layoutHash();
    if (ok)
      step = std::atoll(it->second.c_str());
    else
      error = "checkpoint file of rank " + std::to_string(rank) + " in '" +
              dir + "' lacks its step or belongs to another model";
  }
  std::vector<std::string> freshStates;
  for (UnitState &state : train.units) {
    if (!ok)
      break;
    auto take = [&](const std::string &name, std::vector<float> &into) {
      const safetensors::Tensor *tensor = file.find(name);
      if (!tensor || tensor->dtype != "F32" || tensor->shape.size() != 1 ||
          tensor->shape[0] != int64_t(into.size())) {
        error = "checkpoint '" + dir + "' rank " + std::to_string(rank) +
                ": tensor '" + name + "' is missing or not F32[" +
                std::to_string(into.size()) + "]";
        return false;
      }
      std::memcpy(into.data(), tensor->data.data(), tensor->data.size());
      return true;
    };
    ok = take(state.unit->name, state.param);
    // Optimizer state the checkpoint lacks (saved by another optimizer, or
    // parameters only) starts from zeros, as a fresh torch.optim does.
    for (auto &[name, values] : state.states) {
      std::string tensor = state.unit->name + "." + name;
      if (ok && file.find(tensor))
        ok = take(tensor, values);
      else if (ok)
        freshStates.push_back(tensor);
    }
  }
  if (ok && rank == 0 && !freshStates.empty())
    std::printf("note: checkpoint '%s' has no %s (and %zu more optimizer "
                "state tensors); starting them from zeros\n",
                dir.c_str(), freshStates.front().c_str(),
                freshStates.size() - 1);
  agreeOrExit(ok, error);
  // All ranks must resume from the same step: the steps' sum and sum of
  // squares are those of W equal steps only if no step differs (their
  // variance is zero), which a sum alone cannot tell.
  int64_t ranks = zest_world_size();
  int64_t moments[2] = {step, step * step}, sums[2];
  zest_wait(zest_all_reduce_start(moments, sums, 2, ZEST_I64, ZEST_SUM,
                                  ZEST_GROUP_WORLD, "agree"));
  agreeOrExit(sums[0] == step * ranks && sums[1] == step * step * ranks,
              "checkpoint '" + dir +
                  "' mixes steps across ranks (a save was "
                  "interrupted?)");
  return step;
}
