//===- Data.h - Deterministic values and per-rank data ---------*- C++ -*-===//

#ifndef ZEST_RUNTIME_TRAINER_DATA_H
#define ZEST_RUNTIME_TRAINER_DATA_H

#include "Buffer.h"
#include "IndexChecks.h"
#include "ModelDescriptor.h"
#include "Options.h"
#include "SampleFiles.h"
#include "TokenStream.h"
#include "zest_runtime.h"

#include <memory>
#include <string>
#include <vector>

namespace zest {

/// Counter-based generator: any element of any parameter or sample is
/// computed independently of the world size.
uint64_t mix(uint64_t x);
uint64_t hashString(const std::string &text);
/// Uniform in [-1, 1).
double uniform(uint64_t key);
/// Initial values of elements [begin, end) of `param` into `out`:
/// PyTorch-like defaults (Data.cpp).
void initialValues(const ParamInfo &param, uint64_t seed, int64_t begin,
                   int64_t end, float *out);

/// The random-stream key of 0-based training step `step` under `seed`
/// (python/zest_import/rng.py computes the same).
uint64_t rngStepKey(uint64_t seed, int64_t step);
/// Fills the `zest.rng` argument of `function`, if it has one, for the
/// micro-batch whose first sample is `offset` within step `step`'s global
/// batch: draws then depend on the sample, not on the world size.
void fillRandomStreams(std::vector<Buffer> &args, const FunctionInfo &function,
                       uint64_t seed, int64_t step, int64_t offset);

/// Feeds a function's data arguments: synthetic samples or samples read
/// from files (SampleFiles.h, docs/Runtime.md).
class DataSource {
public:
  /// `tokens`: a token stream to read instead of --data (--tokens, or
  /// --eval-tokens for the evaluation's source).
  DataSource(const Options &options, const FunctionInfo &function,
             const std::string &tokenPath)
      : options(options) {
    for (size_t i = 0; i < function.args.size(); ++i)
      if (function.args[i].kind == ArgInfo::Data)
        dataArgs.push_back(i);
    std::vector<TensorSpec> specs;
    for (size_t i : dataArgs) {
      const TensorSpec &spec = function.args[i].spec;
      // Synthetic ids stay inside the table they index.
      int64_t bound = function.args[i].indices.bound;
      intLimits.push_back(
          bound > 0 && bound < options.intBound ? bound : options.intBound);
      specs.push_back(spec);
      if (spec.shape.empty())
        usageError("data argument #" + std::to_string(i) +
                   " is a scalar; data arguments need a batch dimension");
      int64_t b = spec.shape[0];
      if (batch && b != batch)
        usageError("data arguments disagree on the batch dimension (" +
                   std::to_string(batch) + " vs " + std::to_string(b) + ")");
      batch = b;
    }
    if (!tokenPath.empty()) {
      tokens = std::make_unique<TokenStream>(
          tokenPath, specs, streamBound(function), options.seed);
      sourceName = "the token stream '" + tokenPath + "'";
    } else if (options.data != "synthetic" && !specs.empty()) {
      files = openSampleFiles(options.data, specs);
      sourceName = "'" + options.data + "'";
      for (size_t d = 0; d < dataArgs.size(); ++d)
        checkIndexColumn(files[d], specs[d], function.args[dataArgs[d]].indices,
                         d);
    }
  }

  int64_t microBatch() const { return batch; }

  /// Tells the runtime that the next calls compute on the micro-batch
  /// whose first sample is `first` (zest_check_failed names it).
  void noteMicroBatch(int64_t first) const {
    zest_set_data_context(sourceName.c_str(), first, batch);
  }

  /// Fills the data arguments with samples [first, first + batch).
  void fill(std::vector<Buffer> &args, int64_t first) {
    for (size_t d = 0; d < dataArgs.size(); ++d) {
      Buffer &buffer = args[dataArgs[d]];
      int64_t perSample = buffer.spec.numel() / batch;
      int64_t bytes = perSample * buffer.spec.dtype.bytes;
      for (int64_t s = 0; s < batch; ++s) {
        int64_t sample = first + s;
        char *out = static_cast<char *>(buffer.data()) + s * bytes;
        if (tokens) {
          tokens->read(sample, d, out);
          continue;
        }
        if (!files.empty()) {
          readSample(files[d], sample, out);
          continue;
        }
        if (options.datasetSize)
          sample %= options.datasetSize;
        uint64_t key =
            mix(mix(options.seed + 0x5eedull + d) ^ uint64_t(sample));
        synthesize(buffer.spec.dtype, out, perSample, key, intLimits[d]);
      }
    }
  }

private:
  /// What every token of a stream must satisfy: --token-bound's vocabulary,
  /// else the tightest table a data argument indexes.
  IndexBound streamBound(const FunctionInfo &function) const {
    IndexBound bound;
    bound.bound = options.tokenBound;
    for (size_t i : dataArgs) {
      const IndexBound &arg = function.args[i].indices;
      if (arg.bound > 0 && (bound.bound == 0 || arg.bound < bound.bound))
        bound = arg;
      else if (arg.bound == bound.bound && bound.table.empty())
        bound.table = arg.table;
    }
    bound.hasIgnore = false; // a stream holds ids, never a loss's ignored one
    return bound;
  }

  /// Synthetic integers lie in [0, limit).
  void synthesize(const DType &dtype, char *out, int64_t n, uint64_t key,
                  int64_t limit) {
    for (int64_t j = 0; j < n; ++j) {
      double u = uniform(key + uint64_t(j));
      switch (dtype.code) {
      case ZEST_F32:
        reinterpret_cast<float *>(out)[j] = float(u);
        break;
      case ZEST_F64:
        reinterpret_cast<double *>(out)[j] = u;
        break;
      case ZEST_I32:
        reinterpret_cast<int32_t *>(out)[j] =
            int32_t(mix(key + uint64_t(j)) % uint64_t(limit));
        break;
      case ZEST_I64:
        reinterpret_cast<int64_t *>(out)[j] =
            int64_t(mix(key + uint64_t(j)) % uint64_t(limit));
        break;
      default:
        usageError("synthetic data of type " + dtype.name +
                   " is not supported; use --data FILE");
      }
    }
  }

  const Options &options;
  /// Where the samples come from, for zest_check_failed.
  std::string sourceName = "the synthetic data";
  std::vector<size_t> dataArgs;
  /// Per data argument: synthetic integers' bound (--int-bound, or the
  /// table's size when smaller).
  std::vector<int64_t> intLimits;
  int64_t batch = 0;
  /// One per data argument when reading files.
  std::vector<SampleColumn> files;
  /// With --tokens.
  std::unique_ptr<TokenStream> tokens;
};

} // namespace zest

#endif // ZEST_RUNTIME_TRAINER_DATA_H
