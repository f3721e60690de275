//===- Checkpoint.cpp - Sharded Zest checkpoints --------------------------===//

#include "Checkpoint.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

using namespace zest;
using namespace zest::checkpoint;

std::optional<Manifest> Manifest::withWorldSize(int64_t world,
                                                int64_t expertGroup,
                                                std::string &error) const {
  Manifest out = *this;
  out.worldSize = world;
  for (ManifestUnit &unit : out.units) {
    if (!unit.sharded())
      continue;
    if (!unit.expertGroup) {
      unit.padded = (unit.numel + world - 1) / world * world;
      unit.shard = unit.padded / world;
      continue;
    }
    int64_t group = expertGroup ? expertGroup : unit.expertGroup;
    std::string held = "unit '" + unit.name +
                       "' holds experts split over expert groups of " +
                       std::to_string(unit.expertGroup) + " ranks";
    if (group < 2) {
      error = held + ": without expert parallelism the experts belong to "
                     "their layers' units; consolidate, then split with the "
                     "new executable's manifest";
      return std::nullopt;
    }
    if (world % group != 0 || unit.numel % group != 0) {
      error = held + ", which groups of " + std::to_string(group) +
              " ranks cannot hold at world size " + std::to_string(world) +
              " (the group must divide the world size and the experts)";
      return std::nullopt;
    }
    unit.expertGroup = group;
    unit.padded = unit.numel;
    unit.shard = unit.numel / group;
  }
  return out;
}

std::string Manifest::toJson() const {
  std::ostringstream os;
  os << "{\n  \"format\": \"zest-manifest\",\n  \"version\": 1,\n"
     << "  \"world_size\": " << worldSize << ",\n";
  if (!modelHash.empty())
    os << "  \"model_hash\": " << json::quote(modelHash) << ",\n";
  os << "  \"units\": [";
  for (size_t u = 0; u < units.size(); ++u) {
    const ManifestUnit &unit = units[u];
    os << (u ? "," : "") << "\n    {\"name\": " << json::quote(unit.name)
       << ", \"kind\": " << json::quote(unit.kind)
       << ", \"dtype\": " << json::quote(unit.dtype)
       << ", \"world_size\": " << worldSize << ", \"numel\": " << unit.numel
       << ", \"padded_size\": " << unit.padded
       << ", \"shard_size\": " << unit.shard;
    if (unit.expertGroup)
      os << ", \"expert_group\": " << unit.expertGroup;
    os << ",\n     \"params\": [";
    for (size_t p = 0; p < unit.params.size(); ++p) {
      const ManifestParam &param = unit.params[p];
      os << (p ? "," : "") << "\n       {\"fqn\": " << json::quote(param.fqn)
         << ", \"shape\": [";
      for (size_t i = 0; i < param.shape.size(); ++i)
        os << (i ? ", " : "") << param.shape[i];
      os << "], \"dtype\": " << json::quote(unit.dtype)
         << ", \"offset\": " << param.offset << ", \"numel\": " << param.numel
         << "}";
    }
    os << "]}";
  }
  os << "\n  ]\n}\n";
  return os.str();
}

bool checkpoint::readManifest(const std::string &path, Manifest &out,
                              std::string &error) {
  std::ifstream file(path);
  if (!file) {
    error = "cannot open manifest '" + path + "': " + std::strerror(errno);
    return false;
  }
  std::stringstream buffer;
  buffer << file.rdbuf();
  json::Value root;
  std::string jsonError;
  if (!json::parse(buffer.str(), root, jsonError))
    return error = "manifest '" + path + "' is not valid JSON: " + jsonError,
           false;
  const json::Value *format = root.find("format");
  const json::Value *world = root.find("world_size");
  const json::Value *units = root.find("units");
  if (!format || format->string != "zest-manifest" || !world || !units)
    return error = "'" + path +
                   "' is not a Zest manifest (no format "
                   "\"zest-manifest\", world_size and units)",
           false;
  out.worldSize = world->asInt();
  if (const json::Value *hash = root.find("model_hash"))
    out.modelHash = hash->string;
  for (const json::Value &u : units->array) {
    ManifestUnit unit;
    auto str = [&](const char *key) {
      const json::Value *v = u.find(key);
      return v ? v->string : std::string();
    };
    auto num = [&](const char *key) {
      const json::Value *v = u.find(key);
      return v ? v->asInt() : int64_t(-1);
    };
    unit.name = str("name");
    unit.kind = str("kind");
    unit.dtype = str("dtype");
    unit.numel = num("numel");
    unit.padded = num("padded_size");
    unit.shard = num("shard_size");
    unit.expertGroup = std::max<int64_t>(0, num("expert_group"));
    const json::Value *params = u.find("params");
    if (unit.name.empty() || unit.padded < 0 || unit.shard < 0 || !params)
      return error = "manifest '" + path + "' has a malformed unit", false;
    for (const json::Value &p : params->array) {
      ManifestParam param;
      const json::Value *fqn = p.find("fqn"), *shape = p.find("shape"),
                        *offset = p.find("offset"), *numel = p.find("numel");
      if (!fqn || !shape || !offset || !numel)
        return error = "manifest '" + path +
                       "' has a malformed parameter in "
                       "unit '" +
                       unit.name + "'",
               false;
      param.fqn = fqn->string;
      for (const json::Value &dim : shape->array)
        param.shape.push_back(dim.asInt());
      param.offset = offset->asInt();
      param.numel = numel->asInt();
      unit.params.push_back(param);
    }
    out.units.push_back(unit);
  }
  return true;
}

std::string checkpoint::stepFolderName(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%06lld",
                static_cast<long long>(step));
  return name;
}

std::string checkpoint::resolveLatest(const std::string &dir) {
  // A replacing save that died between its two renames left the previous
  // checkpoint as dir.previous.
  struct stat info;
  if (::stat(dir.c_str(), &info) != 0 &&
      ::stat((dir + ".previous").c_str(), &info) == 0)
    return resolveLatest(dir + ".previous");
  std::ifstream latest(dir + "/latest");
  std::string name;
  if (!latest || !std::getline(latest, name) || name.empty())
    return dir;
  return dir + "/" + name;
}

std::string checkpoint::shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string checkpoint::rankFileName(const std::string &dir, int64_t rank,
                                     int64_t worldSize) {
  char name[64];
  std::snprintf(name, sizeof(name), "/rank-%05lld-of-%05lld.safetensors",
                static_cast<long long>(rank),
                static_cast<long long>(worldSize));
  return dir + name;
}
