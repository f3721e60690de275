//===- zest-ckpt.cpp - Consolidate, split and reshard Zest checkpoints ----===//
//
//   zest-ckpt info <ckpt-dir>
//   zest-ckpt consolidate <ckpt-dir> <full.safetensors> [--optimizer]
//   zest-ckpt split <full.safetensors> <manifest.json> <out-dir>
//                   [--world-size W [--expert-parallel N]]
//   zest-ckpt reshard <ckpt-dir> <out-dir> --world-size W
//                     [--expert-parallel N]
//
// A consolidated file holds one tensor per parameter, keyed by FQN, as
// Hugging Face / PyTorch users load it; with --optimizer also the optimizer
// state as "<fqn>.exp_avg", "<fqn>.exp_avg_sq" or "<fqn>.momentum_buffer".
// Splitting lays the full parameters out in each unit's flat buffer (zero
// padding) for any world size, so a checkpoint saved at W=4 loads at W=2 after
// a reshard. An expert-parallel unit keeps whole experts per shard, over
// expert groups of its own size or of --expert-parallel's.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"
#include "Safetensors.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/stat.h>
#include <vector>

using namespace zest;
using namespace zest::checkpoint;

namespace {

[[noreturn]] void fail(const std::string &message) {
  std::fprintf(stderr, "zest-ckpt: error: %s\n", message.c_str());
  std::exit(1);
}

const char *kUsage =
    "usage:\n"
    "  zest-ckpt info <ckpt-dir>\n"
    "  zest-ckpt consolidate <ckpt-dir> <full.safetensors> [--optimizer]\n"
    "  zest-ckpt split <full.safetensors> <manifest.json> <out-dir> "
    "[--world-size W [--expert-parallel N]]\n"
    "  zest-ckpt reshard <ckpt-dir> <out-dir> --world-size W "
    "[--expert-parallel N]\n";

/// Tensor-name suffixes per unit: "" for parameters, then optimizer state.
std::vector<std::string> stateSuffixes(bool withParams) {
  std::vector<std::string> suffixes;
  if (withParams)
    suffixes.push_back("");
  for (const char *state : kOptimizerStates)
    suffixes.push_back(std::string(".") + state);
  return suffixes;
}

/// A whole checkpoint in memory: per unit and state ("" for parameters) the
/// full, unpadded flat buffer.
struct FullState {
  Manifest manifest;
  std::map<std::string, std::string> metadata;
  std::map<std::string, std::vector<float>> flat; // unit + suffix -> values
};

FullState loadCheckpointDir(const std::string &root) {
  // A folder of periodic checkpoints stands for its latest.
  std::string dir = resolveLatest(root);
  FullState state;
  std::string error;
  if (!readManifest(dir + "/manifest.json", state.manifest, error))
    fail("'" + dir + "' is not a Zest checkpoint: " + error);
  int64_t world = state.manifest.worldSize;
  for (int64_t rank = 0; rank < world; ++rank) {
    safetensors::File file;
    if (!safetensors::read(rankFileName(dir, rank, world), file, error))
      fail(error);
    if (rank == 0)
      state.metadata = file.metadata;
    else if (file.metadata["step"] != state.metadata["step"])
      fail("'" + dir + "' mixes steps across ranks (rank 0 at " +
           state.metadata["step"] + ", rank " + std::to_string(rank) + " at " +
           file.metadata["step"] + ")");
    for (const ManifestUnit &unit : state.manifest.units) {
      for (const std::string &suffix : stateSuffixes(/*withParams=*/true)) {
        const safetensors::Tensor *tensor = file.find(unit.name + suffix);
        if (!tensor) {
          if (suffix.empty())
            fail("rank " + std::to_string(rank) + " of '" + dir +
                 "' has no tensor '" + unit.name + "'");
          continue;
        }
        if (tensor->dtype != "F32" || tensor->shape.size() != 1 ||
            tensor->shape[0] != unit.shard)
          fail("tensor '" + unit.name + suffix + "' of rank " +
               std::to_string(rank) + " is not F32[" +
               std::to_string(unit.shard) + "]");
        std::vector<float> &flat = state.flat[unit.name + suffix];
        if (rank == 0)
          flat.assign(unit.padded, 0.0f);
        // A replicated unit is whole on every rank: take rank 0's copy; an
        // expert-parallel unit has a shard per rank of an expert group,
        // which the next groups' ranks repeat.
        if (rank >= unit.shards())
          continue;
        std::memcpy(flat.data() + unit.shardBegin(rank), tensor->data.data(),
                    tensor->data.size());
      }
    }
  }
  return state;
}

safetensors::File consolidate(const FullState &state, bool optimizer) {
  safetensors::File out;
  out.metadata = state.metadata;
  out.metadata["format"] = "zest-consolidated";
  out.metadata.erase("rank");
  out.metadata.erase("world_size");
  for (const ManifestUnit &unit : state.manifest.units) {
    for (const ManifestParam &param : unit.params) {
      out.tensors.push_back(
          {param.fqn,
           safetensors::f32Tensor(param.shape, state.flat.at(unit.name).data() +
                                                   param.offset)});
      if (!optimizer)
        continue;
      for (const std::string &suffix : stateSuffixes(/*withParams=*/false)) {
        auto it = state.flat.find(unit.name + suffix);
        if (it != state.flat.end())
          out.tensors.push_back(
              {param.fqn + suffix,
               safetensors::f32Tensor(param.shape,
                                      it->second.data() + param.offset)});
      }
    }
  }
  return out;
}

void split(const safetensors::File &full, const Manifest &layout,
           const std::string &dir) {
  ::mkdir(dir.c_str(), 0755);
  std::string error;
  int64_t world = layout.worldSize;
  std::vector<safetensors::File> ranks(world);
  for (int64_t rank = 0; rank < world; ++rank) {
    ranks[rank].metadata = full.metadata;
    ranks[rank].metadata["format"] = "zest-checkpoint";
    ranks[rank].metadata["rank"] = std::to_string(rank);
    ranks[rank].metadata["world_size"] = std::to_string(world);
    if (!layout.modelHash.empty())
      ranks[rank].metadata["model_hash"] = layout.modelHash;
    if (!ranks[rank].metadata.count("step"))
      ranks[rank].metadata["step"] = "0";
  }
  for (const ManifestUnit &unit : layout.units) {
    for (const std::string &suffix : stateSuffixes(/*withParams=*/true)) {
      std::vector<float> flat(unit.padded, 0.0f);
      bool any = false;
      for (const ManifestParam &param : unit.params) {
        const safetensors::Tensor *tensor = full.find(param.fqn + suffix);
        if (!tensor) {
          if (suffix.empty())
            fail("the full checkpoint has no parameter '" + param.fqn + "'");
          continue;
        }
        if (tensor->dtype != "F32" || tensor->shape != param.shape)
          fail("parameter '" + param.fqn + suffix + "' is " + tensor->dtype +
               shapeText(tensor->shape) + " but the manifest says F32" +
               shapeText(param.shape));
        std::memcpy(flat.data() + param.offset, tensor->data.data(),
                    tensor->data.size());
        any = true;
      }
      if (!any)
        continue;
      for (int64_t rank = 0; rank < world; ++rank)
        ranks[rank].tensors.push_back(
            {unit.name + suffix,
             safetensors::f32Tensor({unit.shard},
                                    flat.data() + unit.shardBegin(rank))});
    }
  }
  for (int64_t rank = 0; rank < world; ++rank)
    if (!safetensors::write(rankFileName(dir, rank, world), ranks[rank], error))
      fail(error);
  std::string manifest = layout.toJson();
  if (!writeFileAtomically(dir + "/manifest.json",
                           {{manifest.data(), manifest.size()}}, error))
    fail(error);
}

/// The value of option `name` (at least 1) among argv[from..]; 0 if absent
/// and not `required`.
int64_t parseCount(int argc, char **argv, int from, const char *name,
                   bool required) {
  for (int i = from; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) {
      int64_t value = std::atoll(argv[i + 1]);
      if (value < 1)
        fail(std::string(name) + " must be at least 1");
      return value;
    }
  if (required)
    fail(std::string("missing ") + name);
  return 0;
}

/// `manifest` laid out for --world-size (and --expert-parallel) in argv.
Manifest relayout(const Manifest &manifest, int64_t world, int argc,
                  char **argv, int from) {
  int64_t group = parseCount(argc, argv, from, "--expert-parallel", false);
  std::string error;
  std::optional<Manifest> out = manifest.withWorldSize(world, group, error);
  if (!out)
    fail(error);
  return *out;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  std::string command = argv[1];
  if (command == "info") {
    FullState state = loadCheckpointDir(argv[2]);
    std::printf("checkpoint %s: step %s, world size %lld, optimizer %s, "
                "model %s\n",
                argv[2], state.metadata["step"].c_str(),
                static_cast<long long>(state.manifest.worldSize),
                state.metadata["optimizer"].c_str(),
                state.manifest.modelHash.c_str());
    for (const ManifestUnit &unit : state.manifest.units)
      std::printf("  unit %s: %s, %zu params, %lld elements, shard %lld\n",
                  unit.name.c_str(), unit.kind.c_str(), unit.params.size(),
                  static_cast<long long>(unit.numel),
                  static_cast<long long>(unit.shard));
    return 0;
  }
  if (command == "consolidate" && argc >= 4) {
    bool optimizer = argc >= 5 && std::strcmp(argv[4], "--optimizer") == 0;
    std::string error;
    if (!safetensors::write(
            argv[3], consolidate(loadCheckpointDir(argv[2]), optimizer), error))
      fail(error);
    return 0;
  }
  if (command == "split" && argc >= 5) {
    safetensors::File full;
    std::string error;
    if (!safetensors::read(argv[2], full, error))
      fail(error);
    Manifest manifest;
    if (!readManifest(argv[3], manifest, error))
      fail(error);
    int64_t world = parseCount(argc, argv, 5, "--world-size", false);
    split(full, world ? relayout(manifest, world, argc, argv, 5) : manifest,
          argv[4]);
    return 0;
  }
  if (command == "reshard" && argc >= 4) {
    int64_t world = parseCount(argc, argv, 4, "--world-size", true);
    FullState state = loadCheckpointDir(argv[2]);
    split(consolidate(state, /*optimizer=*/true),
          relayout(state.manifest, world, argc, argv, 4), argv[3]);
    return 0;
  }
  std::fprintf(stderr, "%s", kUsage);
  return 2;
}
