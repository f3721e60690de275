//===- Data.cpp - Deterministic values ------------------------------------===//

#include "Data.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace zest;

uint64_t zest::mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t zest::hashString(const std::string &text) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : text)
    hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

/// Uniform in [-1, 1).
double zest::uniform(uint64_t key) {
  return double(mix(key) >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

/// PyTorch-like defaults. Matrices and higher: U(-1/sqrt(fan_in),
/// 1/sqrt(fan_in)), fan_in = all dims but the first. Vectors named
/// *weight/*scale/*gamma (norm scales): 1. Other vectors and scalars
/// (biases): 0. The key, bound and constant are computed once per call, not
/// per element.
void zest::initialValues(const ParamInfo &param, uint64_t seed, int64_t begin,
                         int64_t end, float *out) {
  const std::vector<int64_t> &shape = param.spec.shape;
  if (shape.size() >= 2) {
    double fanIn = std::sqrt(double(param.spec.numel() / shape[0]));
    uint64_t key = mix(seed ^ hashString(param.fqn));
    for (int64_t i = begin; i < end; ++i)
      out[i - begin] = float(uniform(key + uint64_t(i)) / fanIn);
    return;
  }
  auto endsWith = [&](const char *suffix) {
    size_t n = std::strlen(suffix);
    return param.fqn.size() >= n &&
           param.fqn.compare(param.fqn.size() - n, n, suffix) == 0;
  };
  float value = endsWith("weight") || endsWith("scale") || endsWith("gamma")
                    ? 1.0f
                    : 0.0f;
  std::fill(out, out + (end - begin), value);
}

uint64_t zest::rngStepKey(uint64_t seed, int64_t step) {
  return mix(mix(seed ^ 0xd5090d095eedull) + uint64_t(step));
}

void zest::fillRandomStreams(std::vector<Buffer> &args,
                             const FunctionInfo &function, uint64_t seed,
                             int64_t step, int64_t offset) {
  for (size_t i = 0; i < function.args.size(); ++i) {
    if (function.args[i].kind != ArgInfo::Rng)
      continue;
    auto *streams = static_cast<int64_t *>(args[i].data());
    streams[0] = int64_t(rngStepKey(seed, step));
    streams[1] = offset;
  }
}
