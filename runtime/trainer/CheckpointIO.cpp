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
#include "../checkpoint/AtomicFile.h"
#include "../checkpoint/Checkpoint.h"
#include "../checkpoint/Safetensors.h"
#include "FaultInjection.h"
#include "zest_runtime.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace zest;

/// Every rank learns whether all succeeded; the failing ones explain. Used
/// for errors only some ranks may see (a corrupt file of one rank).
void zest::agreeOrExit(bool ok, const std::string &message) {
  int32_t local = ok ? 1 : 0, all = 0;
  zest_host_all_reduce(&local, &all, 1, ZEST_I32, ZEST_SUM);
  if (all == zest_world_size())
    return;
  if (!ok)
    std::fprintf(stderr, "zest: rank %d: error: %s\n", zest_rank(),
                 message.c_str());
  std::fflush(stderr);
  zest_finalize();
  std::exit(1);
}

/// Rank 0 creates `dir` (if missing); every rank learns whether it exists.
static void createFolder(const std::string &dir) {
  bool ok = true;
  if (zest_rank() == 0) {
    ::mkdir(dir.c_str(), 0755);
    struct stat info;
    ok = ::stat(dir.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
  }
  agreeOrExit(ok, "cannot create checkpoint folder '" + dir + "'");
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
    if (unit.experts)
      out.expertGroup = unit.padded / unit.shard;
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
  createFolder(dir);
  std::string error;
  bool ok = true;
  safetensors::File file;
  file.metadata = {{"format", "zest-checkpoint"},
                   {"version", "1"},
                   {"step", std::to_string(step)},
                   {"world_size", std::to_string(world)},
                   {"rank", std::to_string(shard)},
                   {"optimizer", train.optimizer},
                   {"model_hash", model.layoutHash()},
                   {"rng_seed", std::to_string(train.rngSeed)}};
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
  if (readFault().strikes(rank, step, "save")) {
    std::fprintf(stderr, "zest: rank %d: injected fault 'save' at step %lld\n",
                 rank, static_cast<long long>(step));
    std::fflush(stderr);
    std::_Exit(3);
  }
  if (ok && rank == 0) {
    std::string manifest = toManifest(model).toJson();
    ok = writeFileAtomically(dir + "/manifest.json",
                             {{manifest.data(), manifest.size()}}, error);
  }
  agreeOrExit(ok, error);
}

static void reportSaved(const std::string &dir, int64_t step) {
  if (zest_rank() == 0)
    std::printf("saved checkpoint '%s' at step %lld\n", dir.c_str(),
                static_cast<long long>(step));
}

/// Removes a checkpoint folder: its files and folders, then itself.
static void removeFolder(const std::string &dir) {
  if (DIR *folder = ::opendir(dir.c_str())) {
    while (dirent *entry = ::readdir(folder)) {
      std::string name = entry->d_name;
      if (name == "." || name == "..")
        continue;
      std::string path = dir + "/" + name;
      struct stat info;
      if (::lstat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode))
        removeFolder(path);
      else
        std::remove(path.c_str());
    }
    ::closedir(folder);
  }
  ::rmdir(dir.c_str());
}

/// The step folders of `root`, newest first.
static std::vector<std::pair<int64_t, std::string>>
listStepFolders(const std::string &root) {
  std::vector<std::pair<int64_t, std::string>> folders;
  if (DIR *folder = ::opendir(root.c_str())) {
    while (dirent *entry = ::readdir(folder)) {
      std::string name = entry->d_name;
      char *end = nullptr;
      long long step = name.rfind("step-", 0) == 0
                           ? std::strtoll(name.c_str() + 5, &end, 10)
                           : -1;
      if (step >= 0 && end && !*end)
        folders.push_back({step, name});
    }
    ::closedir(folder);
  }
  std::sort(folders.rbegin(), folders.rend());
  return folders;
}

void zest::saveStepCheckpoint(const std::string &root, const ModelInfo &model,
                              TrainState &train, int64_t step, int64_t keep) {
  int rank = zest_rank();
  bool ok = true;
  std::string error;
  createFolder(root);
  std::string name = checkpoint::stepFolderName(step);
  // Returns once every rank's files are written and fsynced.
  saveCheckpoint(root + "/" + name, model, train, step);
  reportSaved(root + "/" + name, step);
  if (rank == 0) {
    std::string latest = name + "\n";
    ok = writeFileAtomically(root + "/latest", {{latest.data(), latest.size()}},
                             error);
    if (ok && keep > 0) {
      std::vector<std::pair<int64_t, std::string>> folders =
          listStepFolders(root);
      for (size_t i = size_t(keep); i < folders.size(); ++i)
        if (folders[i].second != name)
          removeFolder(root + "/" + folders[i].second);
    }
  }
  agreeOrExit(ok, error);
}

void zest::saveCheckpointReplacing(const std::string &dir,
                                   const ModelInfo &model, TrainState &train,
                                   int64_t step) {
  std::string staging = dir + ".saving", previous = dir + ".previous";
  if (zest_rank() == 0)
    removeFolder(staging); // a save that died before; saveCheckpoint's
                           // createFolder orders this before any write
  saveCheckpoint(staging, model, train, step);
  bool ok = true;
  std::string error;
  if (zest_rank() == 0) {
    removeFolder(previous);
    struct stat info;
    bool had = ::stat(dir.c_str(), &info) == 0;
    if (had && ::rename(dir.c_str(), previous.c_str()) != 0)
      ok = false,
      error = "cannot move '" + dir + "' aside: " + std::strerror(errno);
    if (ok && ::rename(staging.c_str(), dir.c_str()) != 0)
      ok = false, error = "cannot move '" + staging + "' to '" + dir +
                          "': " + std::strerror(errno);
    if (ok)
      removeFolder(previous);
    ok = ok && syncParentFolder(dir, error);
  }
  agreeOrExit(ok, error);
  reportSaved(dir, step);
}

/// Loads this rank's shards; returns the step the checkpoint was taken at.
int64_t zest::loadCheckpoint(const std::string &root, const ModelInfo &model,
                             TrainState &train) {
  std::string dir = checkpoint::resolveLatest(root);
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
    if (ok) {
      step = std::atoll(it->second.c_str());
      // Older checkpoints have no seed: the streams follow --seed.
      auto seed = file.metadata.find("rng_seed");
      if (seed != file.metadata.end() && !train.rngSeedGiven) {
        uint64_t saved = std::strtoull(seed->second.c_str(), nullptr, 10);
        if (saved != train.rngSeed && rank == 0)
          std::printf("note: random streams continue from checkpoint '%s' "
                      "(seed %llu)\n",
                      dir.c_str(), static_cast<unsigned long long>(saved));
        train.rngSeed = saved;
      }
    } else
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
  // All ranks must resume from the same step: every rank gathers all the
  // steps and compares the smallest with the largest.
  int64_t ranks = zest_world_size();
  std::vector<int64_t> steps(size_t(ranks), 0);
  zest_host_all_gather(&step, steps.data(), 1, ZEST_I64);
  auto [lowest, highest] = std::minmax_element(steps.begin(), steps.end());
  agreeOrExit(*lowest == *highest,
              "checkpoint '" + dir + "' mixes steps across ranks (" +
                  std::to_string(*lowest) + " to " + std::to_string(*highest) +
                  "; a save was interrupted?)");
  return step;
}
