//===- TrainMain.cpp - The training driver linked into every executable ---===//
//
//   mpirun -np W ./model --steps N [--optimizer sgd|adamw] [--lr F] ...
//
// Reads the model descriptor zestc embedded, initialises (or loads) this
// rank's parameter shards, feeds each rank its part of every global batch,
// calls the compiled step, applies the optimizer to the local shard only
// (ZeRO's partitioned optimizer) and reports losses and figures.
// `--help` lists the options; docs/Runtime.md describes them.
//
//===----------------------------------------------------------------------===//

#include "../checkpoint/Checkpoint.h"
#include "../checkpoint/Safetensors.h"
#include "ModelDescriptor.h"
#include "zest_runtime.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

extern "C" {
extern const char zest_model_descriptor[];
extern void (*const zest_model_entries[])(void **);
}

using namespace zest;

namespace {

//===----------------------------------------------------------------------===//
// Options
//===----------------------------------------------------------------------===//

struct Options {
  int64_t steps = 10;
  uint64_t seed = 0;
  double lr = 0.01;
  std::string optimizer = "sgd";
  double weightDecay = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  int64_t accum = 1;
  std::string data = "synthetic";
  int64_t datasetSize = 0;
  int64_t intBound = 16;
  std::string function;
  std::string save, load, trace;
  double timeout = 0;
};

const char *kHelp =
    "usage: mpirun -np W <model> [options]\n"
    "  --steps N            training (or forward) steps (10)\n"
    "  --seed S             parameter and synthetic data seed (0)\n"
    "  --lr F               learning rate (0.01)\n"
    "  --optimizer sgd|adamw  optimizer on the local shard (sgd)\n"
    "  --weight-decay F     decoupled weight decay (0)\n"
    "  --beta1 F --beta2 F --eps F   AdamW constants (0.9, 0.999, 1e-8)\n"
    "  --accum A            micro-batches per rank and step (1); the global\n"
    "                       batch is W * A * micro-batch\n"
    "  --data synthetic|FILE  data source (synthetic); FILE holds samples\n"
    "                       back to back, see docs/Runtime.md\n"
    "  --dataset-size N     synthetic samples before repeating (0: never)\n"
    "  --int-bound N        integer data is drawn from [0, N) (16)\n"
    "  --function NAME      entry point to run (first with a loss)\n"
    "  --save DIR           write a sharded checkpoint after the last step\n"
    "  --load DIR           resume from a sharded checkpoint\n"
    "  --trace FILE         write a Chrome trace (FILE.rankR.json per rank)\n"
    "  --timeout S          abort all ranks if a collective waits longer\n";

/// Exits every rank with status 2 after rank 0 explains; argument errors are
/// the same on every rank, so no rank is left waiting.
[[noreturn]] void usageError(const std::string &message) {
  if (zest_rank() == 0)
    std::fprintf(stderr, "error: %s\n%s", message.c_str(), kHelp);
  zest_finalize();
  std::exit(2);
}

Options parseOptions(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      if (zest_rank() == 0)
        std::printf("%s", kHelp);
      zest_finalize();
      std::exit(0);
    }
    if (i + 1 >= argc)
      usageError("option '" + flag + "' needs a value");
    std::string value = argv[++i];
    auto integer = [&](int64_t min) {
      char *end = nullptr;
      long long v = std::strtoll(value.c_str(), &end, 10);
      if (*end || end == value.c_str() || v < min)
        usageError("option '" + flag + "' expects an integer >= " +
                   std::to_string(min) + ", got '" + value + "'");
      return int64_t(v);
    };
    auto real = [&]() {
      char *end = nullptr;
      double v = std::strtod(value.c_str(), &end);
      if (*end || end == value.c_str() || !std::isfinite(v))
        usageError("option '" + flag + "' expects a number, got '" + value +
                   "'");
      return v;
    };
    if (flag == "--steps")
      o.steps = integer(0);
    else if (flag == "--seed")
      o.seed = uint64_t(integer(0));
    else if (flag == "--lr")
      o.lr = real();
    else if (flag == "--optimizer") {
      if (value != "sgd" && value != "adamw")
        usageError("--optimizer expects sgd or adamw, got '" + value + "'");
      o.optimizer = value;
    } else if (flag == "--weight-decay")
      o.weightDecay = real();
    else if (flag == "--beta1")
      o.beta1 = real();
    else if (flag == "--beta2")
      o.beta2 = real();
    else if (flag == "--eps")
      o.eps = real();
    else if (flag == "--accum")
      o.accum = integer(1);
    else if (flag == "--data")
      o.data = value;
    else if (flag == "--dataset-size")
      o.datasetSize = integer(0);
    else if (flag == "--int-bound")
      o.intBound = integer(1);
    else if (flag == "--function")
      o.function = value;
    else if (flag == "--save")
      o.save = value;
    else if (flag == "--load")
      o.load = value;
    else if (flag == "--trace")
      o.trace = value;
    else if (flag == "--timeout")
      o.timeout = real();
    else
      usageError("unknown option '" + flag + "'");
  }
  return o;
}

//===----------------------------------------------------------------------===//
// Deterministic values: a counter-based generator, so any element of any
// parameter or sample is computed independently of the world size.
//===----------------------------------------------------------------------===//

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hashString(const std::string &text) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : text)
    hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

/// Uniform in [-1, 1).
double uniform(uint64_t key) {
  return double(mix(key) >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

/// Initial value of element `index` of `param`: PyTorch-like defaults.
/// Matrices and higher: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = all
/// dims but the first. Vectors named *weight/*scale/*gamma (norm scales): 1.
/// Other vectors and scalars (biases): 0.
float initialValue(const ParamInfo &param, uint64_t seed, int64_t index) {
  const std::vector<int64_t> &shape = param.spec.shape;
  if (shape.size() >= 2) {
    int64_t fanIn = param.spec.numel() / shape[0];
    return float(uniform(mix(seed ^ hashString(param.fqn)) + uint64_t(index)) /
                 std::sqrt(double(fanIn)));
  }
  auto endsWith = [&](const char *suffix) {
    size_t n = std::strlen(suffix);
    return param.fqn.size() >= n &&
           param.fqn.compare(param.fqn.size() - n, n, suffix) == 0;
  };
  return endsWith("weight") || endsWith("scale") || endsWith("gamma") ? 1.0f
                                                                      : 0.0f;
}

//===----------------------------------------------------------------------===//
// Buffers and memref descriptors
//===----------------------------------------------------------------------===//

/// A host buffer and the memref descriptor compiled code receives:
/// {allocated, aligned, offset, sizes[rank], strides[rank]}. It owns its
/// bytes, or describes `external` storage the caller keeps alive.
struct Buffer {
  TensorSpec spec;
  std::vector<char> bytes;
  char *storage;
  std::vector<int64_t> descriptor;

  explicit Buffer(const TensorSpec &spec, void *external = nullptr)
      : spec(spec), bytes(external ? 0 : size_t(spec.bytes()) + 64, 0),
        storage(external ? static_cast<char *>(external) : bytes.data()) {
    int64_t address = reinterpret_cast<int64_t>(storage);
    descriptor = {address, address, 0};
    for (int64_t dim : spec.shape)
      descriptor.push_back(dim);
    int64_t stride = 1;
    std::vector<int64_t> strides(spec.shape.size());
    for (int64_t i = int64_t(spec.shape.size()) - 1; i >= 0; --i) {
      strides[i] = stride;
      stride *= spec.shape[i];
    }
    descriptor.insert(descriptor.end(), strides.begin(), strides.end());
  }
  float *f32() { return reinterpret_cast<float *>(storage); }
  void *data() { return storage; }
};

/// Reads element `i` of a float buffer as double.
double readFloat(Buffer &buffer, int64_t i) {
  if (buffer.spec.dtype.code == ZEST_F64)
    return reinterpret_cast<double *>(buffer.data())[i];
  return buffer.f32()[i];
}

//===----------------------------------------------------------------------===//
// Data
//===----------------------------------------------------------------------===//

class DataSource {
public:
  DataSource(const Options &options, const FunctionInfo &function)
      : options(options) {
    for (size_t i = 0; i < function.args.size(); ++i)
      if (!function.args[i].isUnit)
        dataArgs.push_back(i);
    for (size_t i : dataArgs) {
      const TensorSpec &spec = function.args[i].spec;
      if (spec.shape.empty())
        usageError("data argument #" + std::to_string(i) +
                   " is a scalar; data arguments need a batch dimension");
      int64_t b = spec.shape[0];
      if (batch && b != batch)
        usageError("data arguments disagree on the batch dimension (" +
                   std::to_string(batch) + " vs " + std::to_string(b) + ")");
      batch = b;
      // Where this argument's slice starts inside a sample of a data file.
      sampleOffsets.push_back(sampleBytes);
      sampleBytes += spec.bytes() / b;
    }
    if (options.data != "synthetic")
      loadFile(options.data);
  }

  int64_t microBatch() const { return batch; }

  /// Fills the data arguments with samples [first, first + batch).
  void fill(std::vector<Buffer> &args, int64_t first) {
    for (size_t d = 0; d < dataArgs.size(); ++d) {
      Buffer &buffer = args[dataArgs[d]];
      int64_t perSample = buffer.spec.numel() / batch;
      int64_t bytes = perSample * buffer.spec.dtype.bytes;
      for (int64_t s = 0; s < batch; ++s) {
        int64_t sample = first + s;
        char *out = static_cast<char *>(buffer.data()) + s * bytes;
        if (!file.empty()) {
          int64_t count = int64_t(file.size()) / sampleBytes;
          const char *in =
              file.data() + (sample % count) * sampleBytes + sampleOffsets[d];
          std::memcpy(out, in, bytes);
          continue;
        }
        if (options.datasetSize)
          sample %= options.datasetSize;
        uint64_t key =
            mix(mix(options.seed + 0x5eedull + d) ^ uint64_t(sample));
        synthesize(buffer.spec.dtype, out, perSample, key);
      }
    }
  }

private:
  void synthesize(const DType &dtype, char *out, int64_t n, uint64_t key) {
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
            int32_t(mix(key + uint64_t(j)) % uint64_t(options.intBound));
        break;
      case ZEST_I64:
        reinterpret_cast<int64_t *>(out)[j] =
            int64_t(mix(key + uint64_t(j)) % uint64_t(options.intBound));
        break;
      default:
        usageError("synthetic data of type " + dtype.name +
                   " is not supported; use --data FILE");
      }
    }
  }

  void loadFile(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in)
      usageError("cannot open data file '" + path + "'");
    file.assign(std::istreambuf_iterator<char>(in),
                std::istreambuf_iterator<char>());
    if (file.empty() || int64_t(file.size()) % sampleBytes != 0)
      usageError("data file '" + path + "' has " + std::to_string(file.size()) +
                 " bytes, not a positive multiple of the " +
                 std::to_string(sampleBytes) + "-byte sample");
  }

  const Options &options;
  std::vector<size_t> dataArgs;
  std::vector<int64_t> sampleOffsets;
  int64_t batch = 0, sampleBytes = 0;
  std::vector<char> file;
};

//===----------------------------------------------------------------------===//
// Training state of one unit on this rank
//===----------------------------------------------------------------------===//

struct UnitState {
  const UnitInfo *unit;
  std::vector<float> param, grad, expAvg, expAvgSq;
};

/// Every rank learns whether all succeeded; the failing ones explain. Used
/// for errors only some ranks may see (a corrupt file of one rank).
void agreeOrExit(bool ok, const std::string &message) {
  int32_t local = ok ? 1 : 0, all = 0;
  zest_wait(
      zest_all_reduce_start(&local, &all, 1, ZEST_I32, ZEST_SUM, "agree"));
  if (all == zest_world_size())
    return;
  if (!ok)
    std::fprintf(stderr, "zest: rank %d: error: %s\n", zest_rank(),
                 message.c_str());
  std::fflush(stderr);
  zest_finalize();
  std::exit(1);
}

checkpoint::Manifest toManifest(const ModelInfo &model) {
  checkpoint::Manifest manifest;
  manifest.worldSize = model.worldSize;
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

void saveCheckpoint(const std::string &dir, const ModelInfo &model,
                    std::vector<UnitState> &states, const Options &options,
                    int64_t step) {
  int rank = zest_rank(), world = zest_world_size();
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
      {"rank", std::to_string(rank)},    {"optimizer", options.optimizer},
      {"model_hash", model.layoutHash()}};
  for (UnitState &state : states) {
    int64_t n = int64_t(state.param.size());
    file.tensors.push_back(
        {state.unit->name, safetensors::f32Tensor({n}, state.param.data())});
    if (!state.expAvg.empty()) {
      file.tensors.push_back(
          {state.unit->name + ".exp_avg",
           safetensors::f32Tensor({n}, state.expAvg.data())});
      file.tensors.push_back(
          {state.unit->name + ".exp_avg_sq",
           safetensors::f32Tensor({n}, state.expAvgSq.data())});
    }
  }
  ok = safetensors::write(checkpoint::rankFileName(dir, rank, world), file,
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
int64_t loadCheckpoint(const std::string &dir, const ModelInfo &model,
                       std::vector<UnitState> &states, const Options &options) {
  int rank = zest_rank(), world = zest_world_size();
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
            std::to_string(world) + "; convert it with: zest-ckpt reshard " +
            dir + " <out> --world-size " + std::to_string(world);
  }
  safetensors::File file;
  if (ok)
    ok = safetensors::read(checkpoint::rankFileName(dir, rank, world), file,
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
  for (UnitState &state : states) {
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
    if (ok && options.optimizer == "adamw")
      ok = take(state.unit->name + ".exp_avg", state.expAvg) &&
           take(state.unit->name + ".exp_avg_sq", state.expAvgSq);
  }
  agreeOrExit(ok, error);
  // All ranks must resume from the same step.
  int64_t steps[2] = {step, -step}, extremes[2];
  zest_wait(
      zest_all_reduce_start(steps, extremes, 2, ZEST_I64, ZEST_SUM, "agree"));
  agreeOrExit(extremes[0] == step * world,
              "checkpoint '" + dir +
                  "' mixes steps across ranks (a save was "
                  "interrupted?)");
  return step;
}

std::string traceFile(const std::string &path, int rank, int world) {
  if (world == 1)
    return path;
  std::string base = path;
  std::string ext;
  size_t dot = path.rfind('.');
  if (dot != std::string::npos && path.find('/', dot) == std::string::npos) {
    base = path.substr(0, dot);
    ext = path.substr(dot);
  }
  return base + ".rank" + std::to_string(rank) + ext;
}

} // namespace

int main(int argc, char **argv) {
  zest_init(&argc, &argv);
  Options options = parseOptions(argc, argv);
  if (options.timeout > 0)
    zest_set_timeout(options.timeout);
  ModelInfo model = parseModelDescriptor(zest_model_descriptor);
  int rank = zest_rank(), world = zest_world_size();
  if (world != model.worldSize)
    usageError(
        "this executable was compiled for " + std::to_string(model.worldSize) +
        " ranks but runs on " + std::to_string(world) + ": use mpirun -np " +
        std::to_string(model.worldSize) +
        " or recompile with zestc --world-size=" + std::to_string(world));
  if (model.functions.empty())
    usageError("the model has no entry point");

  size_t fn = 0;
  if (!options.function.empty()) {
    fn = model.functions.size();
    for (size_t i = 0; i < model.functions.size(); ++i)
      if (model.functions[i].name == options.function)
        fn = i;
    if (fn == model.functions.size())
      usageError("no entry point named '" + options.function + "'");
  } else {
    for (size_t i = model.functions.size(); i-- > 0;)
      if (model.functions[i].isTraining())
        fn = i;
  }
  const FunctionInfo &function = model.functions[fn];
  bool training = function.isTraining();

  // Parameters: this rank's part of every unit, F32 for the optimizer.
  std::vector<UnitState> states;
  for (const UnitInfo &unit : model.units) {
    if (unit.dtype.code != ZEST_F32)
      usageError("unit '" + unit.name + "' holds " + unit.dtype.name +
                 " parameters; the driver initialises and updates F32 "
                 "units only");
    UnitState state{&unit, std::vector<float>(unit.shard, 0.0f), {}, {}, {}};
    int64_t begin = unit.localBegin(rank);
    for (const ParamInfo &param : unit.params) {
      int64_t lo = std::max(begin, param.offset);
      int64_t hi =
          std::min(begin + unit.shard, param.offset + param.spec.numel());
      for (int64_t i = lo; i < hi; ++i)
        state.param[i - begin] =
            initialValue(param, options.seed, i - param.offset);
    }
    if (training) {
      state.grad.assign(unit.shard, 0.0f);
      if (options.optimizer == "adamw") {
        state.expAvg.assign(unit.shard, 0.0f);
        state.expAvgSq.assign(unit.shard, 0.0f);
      }
    }
    states.push_back(std::move(state));
  }
  int64_t startStep = 0;
  if (!options.load.empty())
    startStep = loadCheckpoint(options.load, model, states, options);

  // Unit arguments describe the optimizer's shards directly: entry points
  // never write their arguments (zest-prepare-entry-points), so no copy.
  std::vector<Buffer> args, results;
  for (const ArgInfo &arg : function.args)
    args.emplace_back(arg.spec,
                      arg.isUnit ? states[arg.unit].param.data() : nullptr);
  for (const ResultInfo &result : function.results)
    results.emplace_back(result.spec);
  std::vector<void *> descriptors;
  for (Buffer &buffer : args)
    descriptors.push_back(buffer.descriptor.data());
  for (Buffer &buffer : results)
    descriptors.push_back(buffer.descriptor.data());
  DataSource data(options, function);
  int64_t micro = data.microBatch();
  int64_t globalBatch = int64_t(world) * options.accum * micro;

  if (!options.trace.empty())
    zest_trace_enable(1);
  if (rank == 0)
    std::printf("model: %s, %zu units, world size %d, %s, global batch %lld "
                "(%d ranks x %lld micro-batches x %lld)\n",
                function.name.c_str(), model.units.size(), world,
                training ? "training" : "forward only",
                static_cast<long long>(globalBatch), world,
                static_cast<long long>(options.accum),
                static_cast<long long>(micro));

  double checksum = 0, measuredUs = 0;
  int64_t measuredSteps = 0;
  zest_reset_counters();
  // Fault injection for the failure tests (docs/Runtime.md):
  // ZEST_TEST_FAULT=<rank>:<step>:exit|hang makes that rank die or stall.
  int faultRank = -1;
  int64_t faultStep = -1;
  std::string faultKind;
  if (const char *fault = std::getenv("ZEST_TEST_FAULT")) {
    char kind[16] = "";
    long long stepValue = -1;
    if (std::sscanf(fault, "%d:%lld:%15s", &faultRank, &stepValue, kind) == 3)
      faultStep = stepValue, faultKind = kind;
  }
  for (int64_t step = startStep; step < startStep + options.steps; ++step) {
    if (rank == faultRank && step + 1 == faultStep) {
      std::fprintf(stderr, "zest: rank %d: injected fault '%s' at step %lld\n",
                   rank, faultKind.c_str(), static_cast<long long>(step + 1));
      std::fflush(stderr);
      if (faultKind == "exit")
        std::_Exit(3);
      while (faultKind == "hang")
        sleep(1);
    }
    double stepStart = zest_now_us();
    for (UnitState &state : states)
      std::fill(state.grad.begin(), state.grad.end(), 0.0f);
    double loss = 0;
    for (int64_t a = 0; a < options.accum; ++a) {
      data.fill(args, step * globalBatch +
                          (int64_t(rank) * options.accum + a) * micro);
      double computeStart = zest_now_us();
      zest_model_entries[fn](descriptors.data());
      zest_trace_span(training ? "forward+backward" : "forward", "compute",
                      computeStart, zest_now_us());
      for (size_t r = 0; r < function.results.size(); ++r) {
        const ResultInfo &result = function.results[r];
        if (result.kind == ResultInfo::Loss) {
          loss += readFloat(results[r], 0);
        } else if (result.kind == ResultInfo::Grad) {
          std::vector<float> &grad = states[result.unit].grad;
          const float *g = results[r].f32();
          for (size_t i = 0; i < grad.size(); ++i)
            grad[i] += g[i];
        } else if (!training) {
          for (int64_t i = 0; i < results[r].spec.numel(); ++i)
            checksum += results[r].spec.dtype.code == ZEST_F32 ||
                                results[r].spec.dtype.code == ZEST_F64
                            ? readFloat(results[r], i)
                            : 0.0;
        }
      }
    }
    if (training) {
      double optStart = zest_now_us();
      // ZeRO: each rank updates only the shard it owns.
      float scale = 1.0f / float(options.accum);
      int64_t t = step + 1;
      for (UnitState &state : states) {
        for (size_t i = 0; i < state.param.size(); ++i) {
          float g = state.grad[i] * scale;
          float &p = state.param[i];
          if (options.optimizer == "sgd") {
            p -= float(options.lr) * (g + float(options.weightDecay) * p);
            continue;
          }
          float &m = state.expAvg[i], &v = state.expAvgSq[i];
          m = float(options.beta1) * m + float(1 - options.beta1) * g;
          v = float(options.beta2) * v + float(1 - options.beta2) * g * g;
          double mHat = m / (1 - std::pow(options.beta1, double(t)));
          double vHat = v / (1 - std::pow(options.beta2, double(t)));
          p -= float(options.lr * (mHat / (std::sqrt(vHat) + options.eps) +
                                   options.weightDecay * p));
        }
      }
      zest_trace_span("optimizer", "compute", optStart, zest_now_us());
      double local = loss / double(options.accum), global = 0;
      zest_wait(zest_all_reduce_start(&local, &global, 1, ZEST_F64, ZEST_AVG,
                                      "loss"));
      if (rank == 0)
        std::printf("step %lld loss %.9g\n", static_cast<long long>(step + 1),
                    global);
    }
    double stepUs = zest_now_us() - stepStart;
    zest_trace_span(("step " + std::to_string(step + 1)).c_str(), "step",
                    stepStart, stepStart + stepUs);
    // The first step warms up the pool and caches; time the rest.
    if (step > startStep || options.steps == 1) {
      measuredUs += stepUs;
      ++measuredSteps;
    }
  }

  zest_counters_t counters;
  zest_get_counters(&counters);
  if (!training) {
    double global = 0;
    zest_wait(zest_all_reduce_start(&checksum, &global, 1, ZEST_F64, ZEST_SUM,
                                    "checksum"));
    checksum = global;
  }
  if (rank == 0) {
    double stepMs = measuredSteps ? measuredUs / measuredSteps / 1000 : 0;
    if (!training)
      std::printf("checksum %.9g\n", checksum);
    std::printf("summary: steps %lld, step time %.3f ms, samples/s %.1f, "
                "peak gathered parameter bytes per rank %lld, bytes sent per "
                "step per rank %lld, peak pool bytes per rank %lld\n",
                static_cast<long long>(options.steps), stepMs,
                stepMs > 0 ? globalBatch / (stepMs / 1000) : 0.0,
                static_cast<long long>(counters.gathered_peak_bytes),
                static_cast<long long>(
                    options.steps ? counters.bytes_sent / options.steps : 0),
                static_cast<long long>(counters.pool_peak_bytes));
  }
  if (!options.save.empty() && training)
    saveCheckpoint(options.save, model, states, options,
                   startStep + options.steps);
  if (!options.trace.empty()) {
    std::string path = traceFile(options.trace, rank, world);
    agreeOrExit(zest_trace_write(path.c_str()) == 0,
                "cannot write trace '" + path + "'");
  }
  std::fflush(stdout);
  zest_finalize();
  return 0;
}
