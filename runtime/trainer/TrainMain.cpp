//===- TrainMain.cpp - The training driver linked into every executable ---===//
//
//   mpirun -np W ./model --steps N [--lr F] [--accum A] ...
//
// Reads the model descriptor zestc embedded, sets up this rank's shards and
// optimizer state (TrainState), feeds each rank its part of every global
// batch (DataSource) and calls the compiled step, which gathers, computes,
// reduce-scatters and applies the optimizer to the local shard (ZeRO's
// partitioned optimizer) itself. The host does nothing per element.
// `--help` lists the options; docs/Runtime.md describes them.
//
//===----------------------------------------------------------------------===//

#include "Buffer.h"
#include "CheckpointIO.h"
#include "Data.h"
#include "DeviceMirrors.h"
#include "FaultInjection.h"
#include "HeapPages.h"
#include "ModelDescriptor.h"
#include "Options.h"
#include "Progress.h"
#include "RankAgreement.h"
#include "TrainState.h"
#include "zest_runtime.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

extern "C" {
extern const char zest_model_descriptor[];
extern void (*const zest_model_entries[])(void **);
/// "cpu", "cuda" or "cuda-emulated": where zestc compiled the step to
/// compute (--target).
extern const char zest_model_target[];
/// Nonzero: the entry points run as CUDA graphs (zestc --cuda-graphs).
extern const int zest_model_cuda_graphs;
}

using namespace zest;

namespace {

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

/// Resident set size now (/proc/self/statm), in bytes.
int64_t residentBytes() {
  long pages = 0, resident = 0;
  if (FILE *statm = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(statm, "%ld %ld", &pages, &resident) != 2)
      resident = 0;
    std::fclose(statm);
  }
  return int64_t(resident) * sysconf(_SC_PAGESIZE);
}

/// High-water mark of the resident set size, in bytes.
int64_t peakResidentBytes() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return int64_t(usage.ru_maxrss) * 1024;
}

/// One compiled entry point with host buffers for its arguments and results:
/// unit, state and accumulator arguments are the host's training state,
/// which the step updates in place; data and hyperparameters are refilled
/// before every call.
struct EntryCall {
  EntryCall(size_t index, const FunctionInfo &function, TrainState &train,
            DeviceMirrors &mirrors)
      : index(index), function(&function), mirrors(&mirrors) {
    for (const ArgInfo &arg : function.args) {
      bool perCall = arg.kind == ArgInfo::Data || arg.kind == ArgInfo::Hyper ||
                     arg.kind == ArgInfo::Rng;
      if (arg.kind == ArgInfo::Stage) {
        // Only the step's copies from the device land there: pinned memory
        // of its own, no host buffer to mirror.
        args.emplace_back(arg.spec, mirrors.pinnedScratch(arg.spec.bytes()));
        descriptors.push_back(args.back().descriptor);
        continue;
      }
      if (perCall)
        args.emplace_back(arg.spec);
      else
        args.emplace_back(arg.spec, train.storage(arg));
      if (arg.kind == ArgInfo::Hyper)
        hyper = args.back().f32();
      descriptors.push_back(
          arg.onHost ? mirrors.pinnedDescriptorFor(args.back(), !perCall)
                     : mirrors.descriptorFor(args.back(), !perCall));
      if (perCall)
        uploads.push_back(args.size() - 1);
    }
    for (const ResultInfo &result : function.results) {
      results.emplace_back(result.spec);
      descriptors.push_back(mirrors.descriptorFor(results.back(), false));
    }
    for (std::vector<int64_t> &descriptor : descriptors)
      pointers.push_back(descriptor.data());
  }
  EntryCall(const EntryCall &) = delete;

  /// Runs the entry point on this call's arguments (uploaded first where
  /// the step computes on a device). On a device the call only queues the
  /// work (from the second call on, one CUDA graph: zest_call_entry): the
  /// host arguments may be refilled at once, and the results are on the
  /// host after finish().
  void start() {
    for (size_t arg : uploads)
      mirrors->upload(args[arg]);
    zest_call_entry(int64_t(index), function->name.c_str(),
                    zest_model_entries[index], pointers.data());
  }
  void finish() {
    for (Buffer &result : results)
      mirrors->download(result);
  }

  size_t index;
  const FunctionInfo *function;
  DeviceMirrors *mirrors;
  std::vector<Buffer> args, results;
  std::vector<std::vector<int64_t>> descriptors;
  std::vector<void *> pointers;
  /// The arguments refilled before every call (data, hyperparameters,
  /// random streams).
  std::vector<size_t> uploads;
  float *hyper = nullptr;
};

/// The no-sync companion of training step `step` (its accumulate-only entry
/// point), or none. Its data arguments must sit where the step's do, so one
/// DataSource fills both.
std::optional<size_t> findAccumulateEntry(const ModelInfo &model,
                                          const FunctionInfo &step) {
  for (size_t i = 0; i < model.functions.size(); ++i) {
    const FunctionInfo &entry = model.functions[i];
    if (entry.accumulateFor != step.name)
      continue;
    for (size_t a = 0; a < step.args.size(); ++a) {
      ArgInfo::Kind kind = step.args[a].kind;
      bool data = kind == ArgInfo::Data || kind == ArgInfo::Rng;
      if (data && (a >= entry.args.size() || entry.args[a].kind != kind ||
                   entry.args[a].spec.shape != step.args[a].spec.shape))
        usageError("entry point '" + entry.name + "' does not take '" +
                   step.name + "''s data arguments; recompile the model");
    }
    return i;
  }
  return std::nullopt;
}

/// Starts the runtime; a step compiled for a GPU runs under a CUDA backend
/// (NCCL by default).
void startRuntime(int *argc, char ***argv) {
  zest_select_blas_kernels(*argv); // May re-execute: before MPI starts.
  // "cuda" or "cuda-emulated": the same program, on a GPU or emulated.
  bool cudaTarget = std::strncmp(zest_model_target, "cuda", 4) == 0;
  if (cudaTarget)
    setenv("ZEST_BACKEND", "nccl", /*overwrite=*/0);
  zest_init(argc, argv);
  if (cudaTarget && !zest_buffers_on_device())
    usageError(
        std::string("this executable was compiled with zestc "
                    "--target=") +
        zest_model_target +
        ": run it with ZEST_BACKEND=nccl (one GPU per rank, the default) or "
        "ZEST_BACKEND=staged (ranks sharing a GPU)");
  // As compiled (zestc --cuda-graphs), unless ZEST_CUDA_GRAPHS says.
  const char *graphs = std::getenv("ZEST_CUDA_GRAPHS");
  bool wanted = graphs && *graphs ? std::strcmp(graphs, "0") != 0
                                  : zest_model_cuda_graphs != 0;
  zest_set_cuda_graphs(cudaTarget && wanted);
}

/// The embedded model, checked against the ranks it runs on.
ModelInfo readModel(int world) {
  ModelInfo model = parseModelDescriptor(zest_model_descriptor);
  if (world != model.worldSize)
    usageError(
        "this executable was compiled for " + std::to_string(model.worldSize) +
        " ranks but runs on " + std::to_string(world) + ": use mpirun -np " +
        std::to_string(model.worldSize) +
        " or recompile with zestc --world-size=" + std::to_string(world));
  if (model.functions.empty())
    usageError("the model has no entry point");
  if (model.replicas > 1)
    zest_set_mesh(model.replicas, model.shards());
  if (model.expertGroup > 1)
    zest_set_expert_groups(model.expertGroup);
  return model;
}

/// The index of entry point `name`, or the number of entry points if the
/// model has none of that name.
size_t findEntry(const ModelInfo &model, const std::string &name) {
  size_t index = 0;
  while (index < model.functions.size() && model.functions[index].name != name)
    ++index;
  return index;
}

/// The entry point to run: --function, else the first training step (that
/// is not a no-sync companion), else the first entry point.
size_t chooseEntry(const ModelInfo &model, const Options &options) {
  size_t fn = 0;
  if (options.function.empty()) {
    for (size_t i = model.functions.size(); i-- > 0;)
      if (model.functions[i].isTraining() &&
          model.functions[i].accumulateFor.empty())
        fn = i;
    return fn;
  }
  fn = findEntry(model, options.function);
  if (fn == model.functions.size())
    usageError("no entry point named '" + options.function + "'");
  if (!model.functions[fn].accumulateFor.empty())
    usageError("entry point '" + options.function +
               "' only accumulates gradients for '" +
               model.functions[fn].accumulateFor + "'; run that one");
  return fn;
}

/// --fault: an injected failure of this rank before `step` (1-based).
void injectFault(const Fault &fault, int rank, int64_t step) {
  if (!fault.strikes(rank, step, "exit") && !fault.strikes(rank, step, "hang"))
    return;
  std::fprintf(stderr, "zest: rank %d: injected fault '%s' at step %lld\n",
               rank, fault.kind.c_str(), static_cast<long long>(step));
  std::fflush(stderr);
  if (fault.kind == "exit")
    std::_Exit(3);
  while (true)
    sleep(1);
}

/// A run of the chosen entry point: its calls, data and the figures the
/// summary line reports.
class Run {
public:
  Run(const ModelInfo &model, size_t fn, const Options &options, int rank,
      int world)
      : model(model), function(model.functions[fn]), options(options),
        rank(rank), world(world), training(function.isTraining()),
        train(model, function, options, model.shardOf(rank)),
        // Loaded before the entry points are set up: under --target=cuda
        // that uploads the persistent buffers.
        startStep(options.load.empty()
                      ? 0
                      : loadCheckpoint(options.load, model, train)),
        stepCall(fn, function, train, mirrors),
        data(options, function, options.tokens), micro(data.microBatch()),
        globalBatch(int64_t(world) * options.accum * micro) {
    // With no-sync every micro-batch but the last only accumulates
    // gradients (no reduction, no update), through the step's companion
    // entry point. Under --target=cuda the step's buffers are device mirrors
    // of the host's.
    if (std::optional<size_t> index = findAccumulateEntry(model, function))
      accumulateCall.emplace(*index, model.functions[*index], train, mirrors);
    if (options.progress && rank == 0 && training)
      progress.emplace(function, micro, globalBatch, startStep,
                       startStep + options.steps);
    if (!options.evalTokens.empty() && training)
      setUpEvaluation();
  }

  /// Runs --steps steps (after those of --load's checkpoint).
  void run();
  /// Prints the checksum (forward only) and the summary line on rank 0.
  void printSummary(int64_t baseRss);
  /// Saves what --save and --save-every ask for at the end, and the trace.
  void finish();

private:
  void printHeader() const;
  /// One micro-batch `a` of `step`; returns its loss (training).
  double callMicroBatch(int64_t step, int64_t a);
  /// Whether micro-batch `a` only accumulates (no-sync's companion entry).
  bool accumulatesOnly(int64_t a) const {
    return accumulateCall && a + 1 < options.accum;
  }
  /// The entry point that runs micro-batch `a`.
  EntryCall &entryFor(int64_t a) {
    return accumulatesOnly(a) ? *accumulateCall : stepCall;
  }
  /// --eval-tokens: the forward entry point on the same parameters, fed
  /// from the evaluation's stream.
  void setUpEvaluation();
  /// The forward entry point's loss on --eval-batches fixed global batches,
  /// averaged over them and the ranks, after step `step` (0-based).
  void evaluate(int64_t step);
  /// Where micro-batch `a` of this rank starts in a step's global batch.
  int64_t offsetInStep(int64_t a) const {
    return (int64_t(rank) * options.accum + a) * micro;
  }
  /// Fills the host arguments of micro-batch `a` of `step`.
  void fillMicroBatch(int64_t step, int64_t a);
  /// Where the step computes on a device, fills the micro-batch after `a`
  /// of `step` while the device computes `a`, so the device does not wait
  /// for the host between calls.
  void prefillNext(int64_t step, int64_t a);
  void runStep(int64_t step);

  const ModelInfo &model;
  const FunctionInfo &function;
  const Options &options;
  int rank, world;
  bool training;
  TrainState train;
  int64_t startStep;
  DeviceMirrors mirrors;
  EntryCall stepCall;
  std::optional<EntryCall> accumulateCall;
  DataSource data;
  std::optional<EntryCall> evalCall;
  std::unique_ptr<DataSource> evalData;
  size_t evalResult = 0; // the forward entry's loss among its results
  int64_t micro, globalBatch;
  std::optional<ProgressLine> progress;
  /// The (step, micro-batch) prefillNext filled, if any.
  std::optional<std::pair<int64_t, int64_t>> prefilled;
  double checksum = 0, measuredUs = 0;
  int64_t measuredSteps = 0, lastStepFaults = 0;
  HeapPrefaulter heap;
};

void Run::printHeader() const {
  if (rank != 0)
    return;
  std::printf("model: %s, %zu units, world size %d, %s, global batch %lld "
              "(%d ranks x %lld micro-batches x %lld)\n",
              function.name.c_str(), model.units.size(), world,
              training ? "training" : "forward only",
              static_cast<long long>(globalBatch), world,
              static_cast<long long>(options.accum),
              static_cast<long long>(micro));
}

void Run::fillMicroBatch(int64_t step, int64_t a) {
  EntryCall &entry = entryFor(a);
  int64_t offset = offsetInStep(a);
  data.fill(entry.args, step * globalBatch + offset);
  fillRandomStreams(entry.args, *entry.function, train.rngSeed, step, offset);
  if (entry.hyper)
    train.fillHyper(entry.hyper, step, a);
}

void Run::setUpEvaluation() {
  std::string name = function.name + "_forward";
  size_t index = findEntry(model, name);
  if (index == model.functions.size())
    usageError("--eval-tokens runs the entry point '" + name +
               "' (the loss in eval mode), which this executable lacks: "
               "import the model with zest-import --forward");
  const FunctionInfo &forward = model.functions[index];
  evalData = std::make_unique<DataSource>(options, forward, options.evalTokens);
  if (evalData->microBatch() != micro)
    usageError("'" + name + "' takes micro-batches of " +
               std::to_string(evalData->microBatch()) + ", the step " +
               std::to_string(micro) + "; import both from one example batch");
  // A forward entry's loss is its scalar float result.
  const std::vector<ResultInfo> &results = forward.results;
  auto scalar = [](const ResultInfo &result) {
    zest_dtype_t code = result.spec.dtype.code;
    return result.spec.numel() == 1 && (code == ZEST_F32 || code == ZEST_F64);
  };
  evalResult = size_t(std::find_if(results.begin(), results.end(), scalar) -
                      results.begin());
  if (evalResult == results.size())
    usageError("'" + name + "' returns no scalar loss to evaluate");
  evalCall.emplace(index, forward, train, mirrors);
}

void Run::evaluate(int64_t step) {
  // Its own numbering: the same windows at every evaluation.
  double total = 0;
  int64_t perBatch = int64_t(world) * micro;
  for (int64_t b = 0; b < options.evalBatches; ++b) {
    int64_t first = b * perBatch + int64_t(rank) * micro;
    evalData->fill(evalCall->args, first);
    evalData->noteMicroBatch(first);
    fillRandomStreams(evalCall->args, *evalCall->function, train.rngSeed, b,
                      int64_t(rank) * micro);
    evalCall->start();
    evalCall->finish();
    total += readFloat(evalCall->results[evalResult], 0);
  }
  double local = total / double(options.evalBatches), global = 0;
  zest_host_all_reduce(&local, &global, 1, ZEST_F64, ZEST_AVG);
  if (rank == 0)
    std::printf("eval step %lld loss %.9g\n", static_cast<long long>(step + 1),
                global);
  if (progress)
    progress->noteEvaluation(global);
}

void Run::prefillNext(int64_t step, int64_t a) {
  if (!mirrors.computesOnDevice())
    return;
  std::pair<int64_t, int64_t> next = a + 1 < options.accum
                                         ? std::pair(step, a + 1)
                                         : std::pair(step + 1, int64_t(0));
  if (next.first >= startStep + options.steps)
    return;
  fillMicroBatch(next.first, next.second);
  prefilled = next;
}

double Run::callMicroBatch(int64_t step, int64_t a) {
  EntryCall &entry = entryFor(a);
  std::vector<Buffer> &results = entry.results;
  if (prefilled != std::pair(step, a))
    fillMicroBatch(step, a);
  prefilled.reset();
  double computeStart = zest_now_us();
  data.noteMicroBatch(step * globalBatch + offsetInStep(a));
  entry.start();
  prefillNext(step, a);
  entry.finish();
  zest_trace_span(accumulatesOnly(a) ? "forward, backward (no sync)"
                  : training         ? "step (forward, backward, optimizer)"
                                     : "forward",
                  "compute", computeStart, zest_now_us());
  double loss = 0;
  for (size_t r = 0; r < entry.function->results.size(); ++r) {
    const ResultInfo &result = entry.function->results[r];
    if (result.kind == ResultInfo::Loss && training) {
      loss += readFloat(results[r], 0);
    } else if (result.kind == ResultInfo::GradNorm) {
      // The same on every rank: the norm over all ranks' shards.
      if (progress)
        progress->noteGradNorm(readFloat(results[r], 0));
    } else if (!training) {
      for (int64_t i = 0; i < results[r].spec.numel(); ++i)
        checksum += results[r].spec.dtype.code == ZEST_F32 ||
                            results[r].spec.dtype.code == ZEST_F64
                        ? readFloat(results[r], i)
                        : 0.0;
    }
  }
  return loss;
}

void Run::runStep(int64_t step) {
  double stepStart = zest_now_us();
  int64_t faultsBefore = pageFaults();
  double loss = 0;
  for (int64_t a = 0; a < options.accum; ++a)
    loss += callMicroBatch(step, a);
  if (training) {
    double local = loss / double(options.accum), global = 0;
    zest_host_all_reduce(&local, &global, 1, ZEST_F64, ZEST_AVG);
    if (rank == 0)
      std::printf("step %lld loss %.9g\n", static_cast<long long>(step + 1),
                  global);
    loss = global;
  }
  double stepUs = zest_now_us() - stepStart;
  // After the step's time, before its progress line, which shows it.
  bool last = step + 1 == startStep + options.steps;
  if (evalCall &&
      (options.evalEvery ? (step + 1) % options.evalEvery == 0 : last))
    evaluate(step);
  if (progress)
    progress->report(step, loss, training ? train.learningRate(step) : 0,
                     stepUs);
  lastStepFaults = pageFaults() - faultsBefore;
  if (training && options.saveEvery && (step + 1) % options.saveEvery == 0) {
    mirrors.downloadPersistent();
    saveStepCheckpoint(options.save, model, train, step + 1, options.keep);
  }
  zest_trace_span(("step " + std::to_string(step + 1)).c_str(), "step",
                  stepStart, stepStart + stepUs);
  zest_step_end();
  // The first step warms up the pool and caches; time the rest.
  if (step > startStep || options.steps == 1) {
    measuredUs += stepUs;
    ++measuredSteps;
  }
}

void Run::run() {
  if (!options.trace.empty())
    zest_trace_enable(1);
  printHeader();
  zest_reset_counters();
  Fault fault = readFault();
  for (int64_t step = startStep; step < startStep + options.steps; ++step) {
    injectFault(fault, rank, step + 1);
    runStep(step);
    heap.afterStep();
  }
}

void Run::printSummary(int64_t baseRss) {
  zest_counters_t counters;
  zest_get_counters(&counters);
  if (!training) {
    double global = 0;
    zest_host_all_reduce(&checksum, &global, 1, ZEST_F64, ZEST_SUM);
    checksum = global;
  }
  // Every rank's: a page one rank faults holds up its peers' collectives.
  double faults = double(lastStepFaults), allFaults = 0;
  zest_host_all_reduce(&faults, &allFaults, 1, ZEST_F64, ZEST_SUM);
  lastStepFaults = int64_t(allFaults);
  if (rank != 0)
    return;
  double stepMs = measuredSteps ? measuredUs / measuredSteps / 1000 : 0;
  if (!training)
    std::printf("checksum %.9g\n", checksum);
  std::printf("summary: steps %lld, step time %.3f ms, samples/s %.1f, "
              "peak gathered parameter bytes per rank %lld, bytes sent per "
              "step per rank %lld, peak pool bytes per rank %lld, pool "
              "footprint bytes per rank %lld, peak RSS above base bytes per "
              "rank %lld, communication wait ms per "
              "step %.3f, page faults in the last step %lld\n",
              static_cast<long long>(options.steps), stepMs,
              stepMs > 0 ? globalBatch / (stepMs / 1000) : 0.0,
              static_cast<long long>(counters.gathered_peak_bytes),
              static_cast<long long>(
                  options.steps ? counters.bytes_sent / options.steps : 0),
              static_cast<long long>(counters.pool_peak_bytes),
              static_cast<long long>(counters.pool_held_peak_bytes),
              static_cast<long long>(peakResidentBytes() - baseRss),
              options.steps ? counters.wait_us / 1000.0 / options.steps : 0.0,
              static_cast<long long>(lastStepFaults));
  // Expert parallelism's exchanges move what the routing sends (the report
  // gives their worst case).
  if (counters.exchange_bytes > 0)
    std::printf("expert parallelism: all-to-all bytes sent per step per rank "
                "%lld (rank 0)\n",
                static_cast<long long>(options.steps ? counters.exchange_bytes /
                                                           options.steps
                                                     : 0));
  // Where the step's arguments live (the plan's argument bytes).
  if (zest_buffers_on_device())
    std::printf("device memory: argument bytes per rank %lld on the device, "
                "%lld in pinned host memory\n",
                static_cast<long long>(counters.buffer_bytes),
                static_cast<long long>(counters.pinned_bytes));
}

void Run::finish() {
  int64_t lastStep = startStep + options.steps;
  mirrors.downloadPersistent();
  if (!options.save.empty() && training && !options.saveEvery)
    saveCheckpointReplacing(options.save, model, train, lastStep);
  else if (training && options.saveEvery && lastStep % options.saveEvery != 0)
    saveStepCheckpoint(options.save, model, train, lastStep, options.keep);
  if (!options.trace.empty()) {
    std::string path = traceFile(options.trace, rank, world);
    agreeOrExit(zest_trace_write(path.c_str()) == 0,
                "cannot write trace '" + path + "'");
  }
}

} // namespace

int main(int argc, char **argv) {
  keepFreedMemory();
  startRuntime(&argc, &argv);
  // Before anything else communicates: ranks of different programs or
  // arguments would meet in mismatched collectives.
  checkRanksAgree(argc, argv,
                  std::string(zest_model_descriptor) + zest_model_target);
  // The process base: runtime, MPI and the program, before any model memory.
  int64_t baseRss = residentBytes();
  Options options = parseOptions(argc, argv);
  if (options.timeout > 0)
    zest_set_timeout(options.timeout);
  int rank = zest_rank(), world = zest_world_size();
  ModelInfo model = readModel(world);
  {
    // Gone before zest_finalize: its device mirrors are freed.
    Run run(model, chooseEntry(model, options), options, rank, world);
    run.run();
    run.printSummary(baseRss);
    run.finish();
  }
  std::fflush(stdout);
  zest_finalize();
  return 0;
}
