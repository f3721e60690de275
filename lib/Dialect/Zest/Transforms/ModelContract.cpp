//===- ModelContract.cpp - Zest model-IR input contract -------------------===//

#include "zest/Dialect/Zest/Transforms/ModelContract.h"
#include "zest/Dialect/Zest/IR/ZestOps.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace mlir::zest;

StringRef mlir::zest::getModulePath(StringRef fqn) {
  size_t dot = fqn.rfind('.');
  return dot == StringRef::npos ? StringRef() : fqn.take_front(dot);
}

namespace {
/// Checks one module; `failed` records whether any error was reported so
/// that all violations are reported in one run.
class ContractChecker {
public:
  explicit ContractChecker(ModuleOp module) : module(module) {}

  FailureOr<ModelContract> run();

private:
  void checkModuleClasses();
  void checkFunction(func::FuncOp func);
  /// Returns the FQN of a `zest.param` argument, or null (and reports why).
  StringAttr checkParamArg(func::FuncOp func, unsigned index);
  void checkIndexBoundArg(func::FuncOp func, unsigned index);
  void checkRngArg(func::FuncOp func, unsigned index,
                   std::optional<unsigned> &rngArg);
  void checkResults(func::FuncOp func, ModelFunction &info,
                    const llvm::StringMap<unsigned> &paramArgs);

  InFlightDiagnostic error(Location loc) {
    failed = true;
    return emitError(loc);
  }

  ModuleOp module;
  ModelContract contract;
  bool failed = false;
};
} // namespace

/// Where argument `index` is written; a declaration has no block arguments,
/// so its errors point at the function.
static Location getArgLoc(func::FuncOp func, unsigned index) {
  return func.isExternal() ? func.getLoc() : func.getArgument(index).getLoc();
}

/// The entries of an optional attribute dictionary.
static ArrayRef<NamedAttribute> getAttrs(DictionaryAttr dict) {
  return dict ? dict.getValue() : ArrayRef<NamedAttribute>();
}

/// A FQN is a non-empty, dot-separated list of non-empty components.
static bool isWellFormedFqn(StringRef fqn) {
  if (fqn.empty())
    return false;
  SmallVector<StringRef> parts;
  fqn.split(parts, '.');
  return llvm::none_of(parts, [](StringRef part) { return part.empty(); });
}

/// Argument and result attributes this project knows (the input contract and
/// the sharded program); any other `zest.*` attribute is a typo.
static bool isKnownArgAttr(StringRef name) {
  return name == ZestDialect::kParamAttrName ||
         name == ZestDialect::kRngAttrName ||
         name == ZestDialect::kIndexBoundAttrName ||
         name == ZestDialect::kUnitArgAttrName ||
         name == ZestDialect::kExpertParallelAttrName;
}
static bool isKnownResultAttr(StringRef name) {
  return name == ZestDialect::kGradAttrName ||
         name == ZestDialect::kLossAttrName ||
         name == ZestDialect::kUnitGradAttrName;
}

void ContractChecker::checkModuleClasses() {
  Attribute attr = module->getAttr(ZestDialect::kModuleClassesAttrName);
  if (!attr)
    return;
  auto classes = dyn_cast<DictionaryAttr>(attr);
  if (!classes) {
    error(module.getLoc())
        << "'" << ZestDialect::kModuleClassesAttrName
        << "' must be a dictionary from module path to class name, e.g. "
        << "{\"layers.0\" = \"Block\"}";
    return;
  }
  for (NamedAttribute entry : classes) {
    auto className = dyn_cast<StringAttr>(entry.getValue());
    if (!className || className.getValue().empty())
      error(module.getLoc()) << "'" << ZestDialect::kModuleClassesAttrName
                             << "' entry '" << entry.getName().getValue()
                             << "' must map to a non-empty class name string";
  }
  contract.moduleClasses = classes;
}

StringAttr ContractChecker::checkParamArg(func::FuncOp func, unsigned index) {
  Location loc = getArgLoc(func, index);
  Type argType = func.getArgumentTypes()[index];
  Attribute attr = func.getArgAttr(index, ZestDialect::kParamAttrName);
  auto fqn = dyn_cast<StringAttr>(attr);
  if (!fqn) {
    error(loc) << "'" << ZestDialect::kParamAttrName
               << "' must be a string naming the parameter, got " << attr;
    return {};
  }
  if (!isWellFormedFqn(fqn.getValue())) {
    error(loc) << "parameter name '" << fqn.getValue()
               << "' is not a fully qualified name: expected "
               << "non-empty components separated by '.', e.g. "
               << "'layers.0.fc.weight'";
    return {};
  }
  auto type = dyn_cast<RankedTensorType>(argType);
  if (!type || !type.hasStaticShape()) {
    error(loc) << "parameter '" << fqn.getValue()
               << "' must be a statically shaped tensor, got " << argType;
    return {};
  }
  if (!type.getElementType().isIntOrFloat()) {
    error(loc) << "parameter '" << fqn.getValue()
               << "' must have an integer or float element type, "
               << "got " << type.getElementType();
    return {};
  }
  // A parameter shared by several functions (train step and eval, say) is
  // one parameter: it must have one type.
  auto [it, inserted] =
      contract.params.insert({fqn, ModelParam{fqn, type, loc}});
  if (!inserted && it->second.type != type) {
    InFlightDiagnostic diag = error(loc)
                              << "parameter '" << fqn.getValue()
                              << "' has type " << type << " here but "
                              << it->second.type << " in an earlier function";
    diag.attachNote(it->second.loc) << "first declared here";
  }
  return fqn;
}

void ContractChecker::checkResults(func::FuncOp func, ModelFunction &info,
                                   const llvm::StringMap<unsigned> &paramArgs) {
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    Type type = func.getResultTypes()[i];
    for (NamedAttribute attr : getAttrs(func.getResultAttrDict(i))) {
      StringRef name = attr.getName().getValue();
      if (name.starts_with("zest.") && !isKnownResultAttr(name))
        error(func.getLoc())
            << "result #" << i << " has unknown attribute '" << name
            << "' (expected " << ZestDialect::kGradAttrName << " or "
            << ZestDialect::kLossAttrName << ")";
    }
    if (func.getResultAttr(i, ZestDialect::kLossAttrName)) {
      auto tensor = dyn_cast<RankedTensorType>(type);
      bool scalarFloat =
          isa<FloatType>(type) ||
          (tensor && tensor.hasStaticShape() && tensor.getNumElements() == 1 &&
           isa<FloatType>(tensor.getElementType()));
      if (!scalarFloat)
        error(func.getLoc()) << "loss result #" << i
                             << " must be a float scalar or a one-element "
                             << "float tensor, got " << type;
      if (info.lossResult)
        error(func.getLoc()) << "results #" << *info.lossResult << " and #" << i
                             << " both carry '" << ZestDialect::kLossAttrName
                             << "'; a function has one loss";
      else
        info.lossResult = i;
    }
    Attribute gradAttr = func.getResultAttr(i, ZestDialect::kGradAttrName);
    if (!gradAttr)
      continue;
    auto fqn = dyn_cast<StringAttr>(gradAttr);
    if (!fqn) {
      error(func.getLoc()) << "'" << ZestDialect::kGradAttrName
                           << "' of result #" << i
                           << " must be a string naming a parameter";
      continue;
    }
    auto arg = paramArgs.find(fqn.getValue());
    if (arg == paramArgs.end()) {
      error(func.getLoc()) << "gradient result #" << i << " names '"
                           << fqn.getValue() << "', which is not a "
                           << "parameter of @" << func.getSymName();
      continue;
    }
    Type paramType = func.getArgumentTypes()[arg->second];
    if (type != paramType)
      error(func.getLoc()) << "gradient result #" << i << " for '"
                           << fqn.getValue() << "' has type " << type
                           << ", but the parameter has type " << paramType;
    auto [prev, inserted] = info.gradResults.insert({fqn.getValue(), i});
    if (!inserted)
      error(func.getLoc()) << "results #" << prev->second << " and #" << i
                           << " are both the gradient of '" << fqn.getValue()
                           << "'";
  }
  if (!info.gradResults.empty() && !info.lossResult)
    error(func.getLoc()) << "@" << func.getSymName()
                         << " returns gradients but no result carries '"
                         << ZestDialect::kLossAttrName << "'";
}

void ContractChecker::checkRngArg(func::FuncOp func, unsigned index,
                                  std::optional<unsigned> &rngArg) {
  Location loc = getArgLoc(func, index);
  Attribute attr = func.getArgAttr(index, ZestDialect::kRngAttrName);
  if (!isa<UnitAttr>(attr)) {
    error(loc) << "'" << ZestDialect::kRngAttrName
               << "' is a unit attribute, got " << attr;
    return;
  }
  if (func.getArgAttr(index, ZestDialect::kParamAttrName)) {
    error(loc) << "argument #" << index << " cannot be both a parameter and "
               << "the random streams ('" << ZestDialect::kRngAttrName << "')";
    return;
  }
  auto type = dyn_cast<RankedTensorType>(func.getArgumentTypes()[index]);
  if (!type || type.getShape() != ArrayRef<int64_t>{2} ||
      !type.getElementType().isSignlessInteger(64)) {
    error(loc) << "the random-stream argument ('" << ZestDialect::kRngAttrName
               << "') must be tensor<2xi64> (key, first sample), got "
               << func.getArgumentTypes()[index];
    return;
  }
  if (rngArg) {
    InFlightDiagnostic diag = error(loc)
                              << "@" << func.getSymName()
                              << " has two random-stream arguments (#"
                              << *rngArg << " and #" << index
                              << "); one carries all of a step's draws";
    diag.attachNote(getArgLoc(func, *rngArg)) << "first declared here";
    return;
  }
  rngArg = index;
}

void ContractChecker::checkIndexBoundArg(func::FuncOp func, unsigned index) {
  Location loc = getArgLoc(func, index);
  Attribute attr = func.getArgAttr(index, ZestDialect::kIndexBoundAttrName);
  auto dict = dyn_cast<DictionaryAttr>(attr);
  auto bound = dict ? dict.getAs<IntegerAttr>("bound") : IntegerAttr();
  auto table = dict ? dict.get("table") : Attribute();
  auto ignore = dict ? dict.get("ignore") : Attribute();
  if (!bound || bound.getInt() <= 0 || (table && !isa<StringAttr>(table)) ||
      (ignore && !isa<IntegerAttr>(ignore)) ||
      llvm::any_of(dict, [](NamedAttribute entry) {
        return !llvm::is_contained({"bound", "table", "ignore"},
                                   entry.getName().getValue());
      })) {
    error(loc) << "'" << ZestDialect::kIndexBoundAttrName
               << "' must be {bound = N (positive), table = \"fqn\" "
               << "(optional), ignore = I (optional)}, got " << attr;
    return;
  }
  if (func.getArgAttr(index, ZestDialect::kParamAttrName) ||
      func.getArgAttr(index, ZestDialect::kRngAttrName)) {
    error(loc) << "'" << ZestDialect::kIndexBoundAttrName
               << "' belongs on a data argument, not on a parameter or the "
               << "random streams";
    return;
  }
  auto type = dyn_cast<RankedTensorType>(func.getArgumentTypes()[index]);
  if (!type || !type.getElementType().isSignlessInteger())
    error(loc) << "'" << ZestDialect::kIndexBoundAttrName
               << "' needs an integer tensor argument (indices), got "
               << func.getArgumentTypes()[index];
}

void ContractChecker::checkFunction(func::FuncOp func) {
  ModelFunction info;
  info.func = func;
  llvm::StringMap<unsigned> paramArgs;
  std::optional<unsigned> rngArg;
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    for (NamedAttribute attr : getAttrs(func.getArgAttrDict(i))) {
      StringRef name = attr.getName().getValue();
      if (name.starts_with("zest.") && !isKnownArgAttr(name))
        error(getArgLoc(func, i))
            << "unknown argument attribute '" << name << "' (expected "
            << ZestDialect::kParamAttrName << ", " << ZestDialect::kRngAttrName
            << " or " << ZestDialect::kIndexBoundAttrName << ")";
    }
    if (func.getArgAttr(i, ZestDialect::kIndexBoundAttrName))
      checkIndexBoundArg(func, i);
    if (func.getArgAttr(i, ZestDialect::kRngAttrName)) {
      checkRngArg(func, i, rngArg);
      continue;
    }
    if (!func.getArgAttr(i, ZestDialect::kParamAttrName))
      continue;
    StringAttr fqn = checkParamArg(func, i);
    if (!fqn)
      continue;
    auto [prev, inserted] = paramArgs.insert({fqn.getValue(), i});
    if (!inserted) {
      InFlightDiagnostic diag = error(getArgLoc(func, i))
                                << "duplicate parameter '" << fqn.getValue()
                                << "' in @" << func.getSymName()
                                << " (arguments #" << prev->second << " and #"
                                << i << ")";
      diag.attachNote(getArgLoc(func, prev->second)) << "first declared here";
      continue;
    }
    info.params.push_back({i, fqn});
  }
  // Gradient attributes only make sense next to parameters, but a function
  // without parameters may still carry a stray one: check results always.
  checkResults(func, info, paramArgs);
  if (info.params.empty())
    return;
  if (func.isExternal()) {
    error(func.getLoc()) << "@" << func.getSymName()
                         << " takes parameters but has no body";
    return;
  }
  if (!func.getBody().hasOneBlock())
    error(func.getLoc()) << "@" << func.getSymName()
                         << " takes parameters and must have a single block "
                         << "(structured control flow only), it has "
                         << func.getBlocks().size();
  // The signature is rewritten by sharding, so nothing may call it.
  if (std::optional<SymbolTable::UseRange> uses =
          SymbolTable::getSymbolUses(func, module)) {
    for (const SymbolTable::SymbolUse &use : *uses) {
      error(use.getUser()->getLoc())
          << "@" << func.getSymName()
          << " takes parameters and cannot be called: its signature is "
          << "rewritten by sharding; pass the parameters' values instead";
      break;
    }
  }
  contract.functions.push_back(std::move(info));
}

FailureOr<ModelContract> ContractChecker::run() {
  checkModuleClasses();
  for (auto func : module.getOps<func::FuncOp>())
    checkFunction(func);
  if (failed)
    return failure();
  return std::move(contract);
}

FailureOr<ModelContract> ModelContract::analyze(ModuleOp module) {
  return ContractChecker(module).run();
}
