//===- ModelDescriptor.cpp - Parse the embedded model descriptor ----------===//
//
// Reads the format of runtime/include/zest_model_descriptor.h.
//
//===----------------------------------------------------------------------===//

#include "ModelDescriptor.h"
#include "zest_layout_hash.h"
#include "zest_model_descriptor.h"

#include <cstdio>
#include <sstream>

using namespace zest;

DType DType::parse(const std::string &name) {
  static const struct {
    const char *name;
    zest_dtype_t code;
  } table[] = {{"F32", ZEST_F32},   {"F64", ZEST_F64}, {"F16", ZEST_F16},
               {"BF16", ZEST_BF16}, {"I32", ZEST_I32}, {"I64", ZEST_I64},
               {"I8", ZEST_I8},     {"U8", ZEST_U8}};
  for (const auto &entry : table)
    if (name == entry.name)
      return {name, entry.code, zest_dtype_size(entry.code)};
  zest_fatal(1,
             "unsupported element type '%s' (supported: F32, F64, F16, "
             "BF16, I32, I64, I8, U8)",
             name.c_str());
}

int64_t TensorSpec::numel() const {
  int64_t n = 1;
  for (int64_t dim : shape)
    n *= dim;
  return n;
}

bool FunctionInfo::isTraining() const {
  // A loss with gradients (applied by a compiled optimizer, or returned
  // under --optimizer=none); a loss alone is an evaluation.
  bool loss = false, grads = !optimizer.empty();
  for (const ResultInfo &result : results) {
    loss |= result.kind == ResultInfo::Loss;
    grads |= result.kind == ResultInfo::Grad;
  }
  return loss && grads;
}

std::string ModelInfo::layoutHash() const {
  LayoutHash hash;
  for (const UnitInfo &unit : units) {
    hash.mix(unit.name);
    hash.mix(unit.dtype.name);
    for (const ParamInfo &param : unit.params) {
      hash.mix(param.fqn);
      hash.mix(param.offset);
      for (int64_t dim : param.spec.shape)
        hash.mix(dim);
    }
  }
  return hash.hex();
}

static TensorSpec readSpec(std::istringstream &in) {
  std::string dtype;
  int rank = 0;
  in >> dtype >> rank;
  TensorSpec spec{DType::parse(dtype), {}};
  for (int i = 0; i < rank; ++i) {
    int64_t dim;
    in >> dim;
    spec.shape.push_back(dim);
  }
  return spec;
}

static int findUnit(const ModelInfo &model, const std::string &name) {
  for (size_t i = 0; i < model.units.size(); ++i)
    if (model.units[i].name == name)
      return int(i);
  zest_fatal(1, "model descriptor names unknown unit '%s'", name.c_str());
}

/// unit <name> <sharded|replicated> <dtype> <numel> <padded> <shard> <n>
static UnitInfo readUnit(std::istringstream &in) {
  UnitInfo unit;
  std::string kind, dtype;
  size_t count;
  in >> unit.name >> kind >> dtype >> unit.numel >> unit.padded >> unit.shard >>
      count;
  unit.experts = kind == ZEST_UNIT_EXPERTS;
  unit.sharded = kind == ZEST_UNIT_SHARDED || unit.experts;
  unit.dtype = DType::parse(dtype);
  return unit;
}

/// param <fqn> <dtype> <offset> <rank> <dim>...
static ParamInfo readParam(std::istringstream &in) {
  ParamInfo param;
  std::string dtype;
  int rank = 0;
  in >> param.fqn >> dtype >> param.offset >> rank;
  param.spec.dtype = DType::parse(dtype);
  for (int i = 0; i < rank; ++i) {
    int64_t dim;
    in >> dim;
    param.spec.shape.push_back(dim);
  }
  return param;
}

/// arg <role> ...: data and random streams by shape, the hyperparameters by
/// count, and a unit's shard, state, accumulator or gradient sum by unit.
static ArgInfo readArg(std::istringstream &in, const ModelInfo &model) {
  std::string kind;
  in >> kind;
  ArgInfo arg;
  if (kind == ZEST_ARG_DATA || kind == ZEST_ARG_STAGE) {
    arg.kind = kind == ZEST_ARG_DATA ? ArgInfo::Data : ArgInfo::Stage;
    arg.spec = readSpec(in);
    return arg;
  }
  if (kind == ZEST_ARG_RNG) {
    arg.kind = ArgInfo::Rng;
    arg.spec = {DType::parse("I64"), {2}};
    return arg;
  }
  if (kind == ZEST_ARG_HYPER) {
    arg.kind = ArgInfo::Hyper;
    int64_t count = 0;
    in >> count;
    arg.spec = {DType::parse("F32"), {count}};
    return arg;
  }
  arg.kind = kind == ZEST_ARG_UNIT       ? ArgInfo::Unit
             : kind == ZEST_ARG_STATE    ? ArgInfo::State
             : kind == ZEST_ARG_GRAD_SUM ? ArgInfo::GradSum
                                         : ArgInfo::Accum;
  std::string name;
  in >> name;
  if (arg.kind == ArgInfo::State)
    in >> arg.state;
  arg.unit = findUnit(model, name);
  const UnitInfo &unit = model.units[arg.unit];
  arg.spec = {unit.dtype,
              {arg.kind == ArgInfo::GradSum ? unit.padded : unit.shard}};
  return arg;
}

/// result loss|output|grad_norm <dtype> <rank> <dim>... | result grad <unit>
static ResultInfo readResult(std::istringstream &in, const ModelInfo &model) {
  std::string kind;
  in >> kind;
  ResultInfo result;
  if (kind == ZEST_RESULT_GRAD) {
    std::string name;
    in >> name;
    result.kind = ResultInfo::Grad;
    result.unit = findUnit(model, name);
    const UnitInfo &unit = model.units[result.unit];
    result.spec = {unit.dtype, {unit.shard}};
    return result;
  }
  result.kind = kind == ZEST_RESULT_LOSS        ? ResultInfo::Loss
                : kind == ZEST_RESULT_GRAD_NORM ? ResultInfo::GradNorm
                                                : ResultInfo::Output;
  result.spec = readSpec(in);
  return result;
}

/// `index_bound <N> <table|-> <ignore|->`.
static IndexBound readIndexBound(std::istream &in) {
  IndexBound bound;
  std::string ignore;
  in >> bound.bound >> bound.table >> ignore;
  if (bound.table == "-")
    bound.table.clear();
  if (ignore != "-") {
    bound.hasIgnore = true;
    bound.ignore = std::stoll(ignore);
  }
  return bound;
}

/// Reads one record into `model`; false at `end`.
static bool readRecord(std::istringstream &in, ModelInfo &model) {
  std::string record;
  in >> record;
  if (record == ZEST_RECORD_WORLD_SIZE) {
    in >> model.worldSize;
  } else if (record == ZEST_RECORD_MESH) {
    int shards = 0;
    in >> model.replicas >> shards;
    if (model.replicas < 1 || model.replicas * shards != model.worldSize)
      zest_fatal(1, "this executable's model descriptor has a mesh that "
                    "does not cover its world; recompile it");
  } else if (record == ZEST_RECORD_EXPERT_GROUPS) {
    in >> model.expertGroup;
    if (model.expertGroup < 1 || model.worldSize % model.expertGroup != 0)
      zest_fatal(1, "this executable's model descriptor has expert groups "
                    "that do not divide its world; recompile it");
  } else if (record == ZEST_RECORD_UNIT) {
    model.units.push_back(readUnit(in));
  } else if (record == ZEST_RECORD_PARAM) {
    model.units.back().params.push_back(readParam(in));
  } else if (record == ZEST_RECORD_FUNCTION) {
    FunctionInfo function;
    in >> function.name;
    model.functions.push_back(function);
  } else if (record == ZEST_RECORD_OPTIMIZER) {
    in >> model.functions.back().optimizer;
  } else if (record == ZEST_RECORD_ACCUMULATE_FOR) {
    in >> model.functions.back().accumulateFor;
  } else if (record == ZEST_RECORD_ARG) {
    model.functions.back().args.push_back(readArg(in, model));
  } else if (record == ZEST_RECORD_HOST) {
    model.functions.back().args.back().onHost = true;
  } else if (record == ZEST_RECORD_INDEX_BOUND) {
    model.functions.back().args.back().indices = readIndexBound(in);
  } else if (record == ZEST_RECORD_RESULT) {
    model.functions.back().results.push_back(readResult(in, model));
  } else if (record == ZEST_RECORD_END) {
    return false;
  }
  return true;
}

ModelInfo zest::parseModelDescriptor(const char *text) {
  ModelInfo model;
  std::istringstream lines(text);
  std::string line;
  std::getline(lines, line);
  if (line != ZEST_DESCRIPTOR_HEADER)
    zest_fatal(1,
               "this executable's model descriptor has an unknown format "
               "('%s'); recompile with a matching zestc",
               line.c_str());
  while (std::getline(lines, line)) {
    std::istringstream in(line);
    if (!readRecord(in, model))
      break;
  }
  return model;
}
