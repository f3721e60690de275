//===- TrainState.cpp - This rank's shards and optimizer inputs -----------===//

#include "TrainState.h"
#include "Data.h"
#include "zest_runtime.h"

#include <algorithm>
#include <cmath>

using namespace zest;

std::vector<float> *UnitState::findState(const std::string &name) {
  for (auto &[stateName, values] : states)
    if (stateName == name)
      return &values;
  return nullptr;
}

/// Fills `shard`, the part of `unit` from element `begin` on, with the
/// parameters' seeded initial values.
static void initializeShard(const UnitInfo &unit, uint64_t seed, int64_t begin,
                            std::vector<float> &shard) {
  for (const ParamInfo &param : unit.params) {
    int64_t lo = std::max(begin, param.offset);
    int64_t hi =
        std::min(begin + unit.shard, param.offset + param.spec.numel());
    if (lo < hi)
      initialValues(param, seed, lo - param.offset, hi - param.offset,
                    &shard[lo - begin]);
  }
}

TrainState::TrainState(const ModelInfo &model, const FunctionInfo &function,
                       const Options &options, int rank)
    : optimizer(function.optimizer), rngSeed(options.seed),
      rngSeedGiven(options.seedGiven), options(options),
      scheduleSteps(options.scheduleSteps) {
  bool training = function.isTraining();
  if (training && optimizer.empty())
    usageError("entry point '" + function.name +
               "' returns gradients instead of applying them (compiled with "
               "zestc --optimizer=none): compile with --optimizer=sgd or "
               "adamw to train, or call it through --emit=shared");
  if (!options.optimizer.empty() && training && options.optimizer != optimizer)
    usageError("this executable was compiled with --optimizer=" + optimizer +
               ", not " + options.optimizer +
               "; recompile with zestc "
               "--optimizer=" +
               options.optimizer);
  for (const UnitInfo &unit : model.units) {
    if (unit.dtype.code != ZEST_F32)
      usageError("unit '" + unit.name + "' holds " + unit.dtype.name +
                 " parameters; the driver initialises and updates F32 "
                 "units only");
    UnitState state{&unit, std::vector<float>(unit.shard, 0.0f), {}, {}};
    // --load overwrites every unit's shard (or the run stops): seeded values
    // would be thrown away after a pass over the whole model.
    if (options.load.empty())
      initializeShard(unit, options.seed, unit.localBegin(rank), state.param);
    units.push_back(std::move(state));
  }
  bool hasMomentumBuffer = false;
  for (const ArgInfo &arg : function.args) {
    if (arg.kind == ArgInfo::State) {
      units[arg.unit].states.push_back(
          {arg.state, std::vector<float>(arg.spec.numel(), 0.0f)});
      hasMomentumBuffer |= arg.state == "momentum_buffer";
    } else if (arg.kind == ArgInfo::Accum && options.accum > 1) {
      units[arg.unit].accum.assign(arg.spec.numel(), 0.0f);
    } else if (arg.kind == ArgInfo::GradSum) {
      // Written by every call (the first micro-batch stores, later add).
      units[arg.unit].gradSum.assign(arg.spec.numel(), 0.0f);
    }
  }
  if (options.momentum >= 0 && training && !hasMomentumBuffer &&
      options.momentum != 0)
    usageError("--momentum needs an executable compiled with zestc "
               "--optimizer=sgd --momentum");
  momentum = options.momentum >= 0 ? options.momentum : 0.9;
  if (scheduleSteps == 0)
    scheduleSteps = options.steps;
}

void *TrainState::storage(const ArgInfo &arg) {
  UnitState &unit = units[arg.unit];
  switch (arg.kind) {
  case ArgInfo::Unit:
    return unit.param.data();
  case ArgInfo::State:
    return unit.findState(arg.state)->data();
  case ArgInfo::Accum:
    // Without accumulation the step never touches the accumulator (the
    // accumulate and store paths are off), so it needs no memory.
    return unit.accum.empty() ? nullptr : unit.accum.data();
  case ArgInfo::GradSum:
    return unit.gradSum.data();
  default:
    return nullptr;
  }
}

double TrainState::learningRate(int64_t step) const {
  double t = double(step + 1);
  if (options.warmupSteps > 0 && t <= double(options.warmupSteps))
    return options.lr * t / double(options.warmupSteps);
  if (options.schedule != "cosine")
    return options.lr;
  double span =
      double(std::max<int64_t>(1, scheduleSteps - options.warmupSteps));
  double progress = std::min(1.0, (t - double(options.warmupSteps)) / span);
  return options.minLr +
         (options.lr - options.minLr) * 0.5 * (1.0 + std::cos(M_PI * progress));
}

void TrainState::fillHyper(float *hyper, int64_t step, int64_t micro) const {
  double lr = learningRate(step);
  double t = double(step + 1);
  bool adamw = optimizer == "adamw";
  hyper[ZEST_HYPER_LR] = float(lr);
  hyper[ZEST_HYPER_WEIGHT_DECAY] = float(options.weightDecay);
  hyper[ZEST_HYPER_BETA1] = float(adamw ? options.beta1 : momentum);
  hyper[ZEST_HYPER_BETA2] = float(options.beta2);
  hyper[ZEST_HYPER_EPS] = float(options.eps);
  // Bias corrections once per step, as torch.optim.AdamW computes them.
  hyper[ZEST_HYPER_STEP_SIZE] = float(lr / (1.0 - std::pow(options.beta1, t)));
  hyper[ZEST_HYPER_BIAS_CORRECTION2_SQRT] =
      float(std::sqrt(1.0 - std::pow(options.beta2, t)));
  hyper[ZEST_HYPER_GRAD_SCALE] = float(1.0 / double(options.accum));
  hyper[ZEST_HYPER_ACCUMULATE] = micro > 0 ? 1.0f : 0.0f;
  hyper[ZEST_HYPER_APPLY] = micro + 1 == options.accum ? 1.0f : 0.0f;
}
