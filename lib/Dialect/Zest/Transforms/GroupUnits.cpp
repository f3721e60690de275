//===- GroupUnits.cpp - Group parameters into units -----------------------===//
//
// Chooses units the way DeepSpeed leaf modules and FSDP wrap policies do,
// then declares each with its flat, padded layout (zest.unit).
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/ModelContract.h"
#include "zest/Dialect/Zest/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/GlobPattern.h"

namespace mlir::zest {
#define GEN_PASS_DEF_GROUPUNITSPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

namespace {

/// A node of the module tree spanned by the parameters' module paths.
struct ModuleNode {
  std::string path;
  SmallVector<unsigned> children;
  /// Parameters owned directly by this module (indices into the contract).
  SmallVector<unsigned> params;
};

/// A unit before layout: a name, its distribution and its parameters.
struct UnitPlan {
  std::string name;
  UnitKind kind;
  SmallVector<unsigned> params;
  /// Expert parallelism: the ranks of an expert group its only parameter
  /// (split by zest-expert-parallel) is sharded over; 0 for other units.
  int64_t expertGroup = 0;
};

/// A user-given glob and whether it matched anything yet.
struct UserGlob {
  std::string text;
  llvm::GlobPattern glob;
  bool matched = false;
};

struct GroupUnitsPass : public zest::impl::GroupUnitsPassBase<GroupUnitsPass> {
  using Base::Base;
  void runOnOperation() override;

private:
  LogicalResult checkOptions(ModuleOp module);
  FailureOr<SmallVector<UserGlob>> compile(ModuleOp module, StringRef option,
                                           ArrayRef<std::string> texts);
  void buildTree();
  LogicalResult markLeafModules(ModuleOp module);
  /// Marks the modules of the repeated block classes as leaves; returns the
  /// policy in words.
  std::string markRepeatedBlocks();
  /// How the units are chosen, in words (`zest.unit_policy`).
  std::string describePolicy();
  /// Calls `fn` on every parameter of `node`'s subtree.
  void forEachParam(unsigned node, function_ref<void(unsigned)> fn);
  /// Assigns every unassigned parameter of `node`'s subtree to `unit`.
  void claimSubtree(unsigned node, unsigned unit);
  void collectLeafUnits(unsigned node);
  int64_t autoWrap(unsigned node);
  LogicalResult checkLeafConflicts(ModuleOp module);
  void declareUnits(ModuleOp module);
  /// One unit per parameter zest-expert-parallel split, sharded over its
  /// expert group.
  void claimExpertParams();
  void declareExpertUnit(OpBuilder &builder, const UnitPlan &plan,
                         llvm::StringSet<> &taken);

  unsigned addUnit(StringRef name, UnitKind kind) {
    // no-shard (DDP): every unit keeps its whole buffer on every rank.
    if (strategyKind == ShardingStrategy::NoShard)
      kind = UnitKind::Replicated;
    plans.push_back({name.str(), kind, {}});
    return plans.size() - 1;
  }

  ModelContract contract;
  /// The options `strategy`, `param-dtype` and `reduce-dtype`, parsed.
  ShardingStrategy strategyKind = ShardingStrategy::FullShard;
  WireType paramType = WireType::F32, reduceType = WireType::F32;
  std::vector<ModuleNode> nodes;
  llvm::StringMap<unsigned> nodeByPath;
  SmallVector<bool> isLeaf;
  /// Unit of each parameter (index into plans), or -1.
  SmallVector<int> unitOf;
  SmallVector<bool> ignored;
  SmallVector<UnitPlan> plans;
};

} // namespace

/// The `gather_type` / `reduce_type` of a unit of `elementType` under the
/// option `wire`: mixed precision applies to f32 units only.
static TypeAttr communicationType(WireType wire, Type elementType) {
  MLIRContext *ctx = elementType.getContext();
  if (!elementType.isF32() || wire == WireType::F32)
    return {};
  return TypeAttr::get(wire == WireType::BF16 ? Type(BFloat16Type::get(ctx))
                                              : Type(Float16Type::get(ctx)));
}

LogicalResult GroupUnitsPass::checkOptions(ModuleOp module) {
  std::optional<ShardingStrategy> parsed = symbolizeShardingStrategy(strategy);
  if (!parsed)
    return emitError(module.getLoc())
           << "unknown strategy '" << strategy
           << "': use full-shard, shard-grad-op, no-shard or hybrid-shard";
  strategyKind = *parsed;
  if (worldSize < 1)
    return emitError(module.getLoc())
           << "world-size must be at least 1, got " << worldSize.getValue();
  if (replicas < 1 || worldSize % replicas != 0)
    return emitError(module.getLoc())
           << "replicas=" << replicas.getValue()
           << " must be a positive divisor of world-size="
           << worldSize.getValue();
  if (replicas > 1 && strategyKind != ShardingStrategy::HybridShard)
    return emitError(module.getLoc())
           << "replicas=" << replicas.getValue()
           << " needs strategy=hybrid-shard (got " << strategy << ")";
  if (minUnitNumel < 0)
    return emitError(module.getLoc())
           << "min-unit-numel must be non-negative, got "
           << minUnitNumel.getValue();
  for (auto [name, value, wire] :
       {std::make_tuple("param-dtype", &paramDtype, &paramType),
        std::make_tuple("reduce-dtype", &reduceDtype, &reduceType)}) {
    StringRef text = value->getValue();
    std::optional<WireType> parsedWire =
        text.empty() ? WireType::F32 : symbolizeWireType(text);
    if (!parsedWire)
      return emitError(module.getLoc())
             << name << " must be bf16, f16 or f32, got '" << text << "'";
    *wire = *parsedWire;
  }
  if (!module.getOps<UnitOp>().empty())
    return emitError(module.getLoc())
           << "module already declares zest.unit ops: grouping runs once, "
           << "on the unsharded model";
  if (!leafClasses.empty() && !contract.moduleClasses)
    return emitError(module.getLoc())
           << "leaf-classes needs the module attribute '"
           << ZestDialect::kModuleClassesAttrName
           << "' mapping module paths to class names";
  return success();
}

FailureOr<SmallVector<UserGlob>>
GroupUnitsPass::compile(ModuleOp module, StringRef option,
                        ArrayRef<std::string> texts) {
  SmallVector<UserGlob> patterns;
  for (const std::string &text : texts) {
    if (text.empty())
      continue;
    auto glob = llvm::GlobPattern::create(text);
    if (!glob)
      return emitError(module.getLoc())
             << "invalid " << option << " pattern '" << text
             << "': " << llvm::toString(glob.takeError());
    patterns.push_back({text, std::move(*glob)});
  }
  return patterns;
}

void GroupUnitsPass::buildTree() {
  nodes.push_back({"", {}, {}});
  nodeByPath[""] = 0;
  // Creates the node for `path` and its ancestors; returns its index.
  std::function<unsigned(StringRef)> getNode = [&](StringRef path) {
    auto it = nodeByPath.find(path);
    if (it != nodeByPath.end())
      return it->second;
    unsigned parent = getNode(getModulePath(path));
    unsigned index = nodes.size();
    nodes.push_back({path.str(), {}, {}});
    nodeByPath[path] = index;
    nodes[parent].children.push_back(index);
    return index;
  };
  for (auto [index, entry] : llvm::enumerate(contract.params))
    nodes[getNode(getModulePath(entry.first.getValue()))].params.push_back(
        index);
}

LogicalResult GroupUnitsPass::markLeafModules(ModuleOp module) {
  FailureOr<SmallVector<UserGlob>> globs =
      compile(module, "leaf-modules", leafModules);
  if (failed(globs))
    return failure();
  isLeaf.assign(nodes.size(), false);
  // The root module is the fallback unit, never a leaf.
  for (unsigned i = 1; i < nodes.size(); ++i) {
    for (UserGlob &pattern : *globs) {
      if (pattern.glob.match(nodes[i].path)) {
        pattern.matched = true;
        isLeaf[i] = true;
      }
    }
  }
  for (const UserGlob &pattern : *globs)
    if (!pattern.matched)
      return emitError(module.getLoc())
             << "no module matches '" << pattern.text
             << "' (leaf-modules): module paths are parameter names without "
             << "their last component, e.g. 'layers.0'";
  for (const std::string &className : leafClasses) {
    if (className.empty())
      continue;
    bool found = false;
    for (NamedAttribute entry : contract.moduleClasses) {
      if (cast<StringAttr>(entry.getValue()).getValue() != className)
        continue;
      found = true;
      // A module of the class that owns no parameters yields no unit.
      auto node = nodeByPath.find(entry.getName().getValue());
      if (node != nodeByPath.end() && node->second != 0)
        isLeaf[node->second] = true;
    }
    if (!found)
      return emitError(module.getLoc())
             << "no module matches class '" << className
             << "' (leaf-classes) in '" << ZestDialect::kModuleClassesAttrName
             << "'";
  }
  return success();
}

/// Whether `path`'s last component is an index (`layers.3`).
static bool isIndexed(StringRef path) {
  StringRef last = path.substr(path.rfind('.') + 1);
  return !last.empty() && llvm::all_of(last, llvm::isDigit);
}

/// The repeated block classes of `classes` (module path -> class) and their
/// modules: classes with at least two modules that are indexed children of
/// one container and have submodules of their own.
static llvm::MapVector<StringRef, SmallVector<StringRef>>
findRepeatedBlocks(DictionaryAttr classes) {
  // Modules with submodules: every proper ancestor of a recorded path.
  llvm::StringSet<> composite;
  for (NamedAttribute entry : classes)
    for (StringRef path = entry.getName().getValue(); !path.empty();)
      composite.insert(path = getModulePath(path));
  // (container, class) -> its indexed composite children.
  llvm::MapVector<std::pair<StringRef, StringRef>, SmallVector<StringRef>>
      siblings;
  for (NamedAttribute entry : classes) {
    StringRef path = entry.getName().getValue();
    auto className = dyn_cast<StringAttr>(entry.getValue());
    if (className && isIndexed(path) && composite.contains(path))
      siblings[{getModulePath(path), className.getValue()}].push_back(path);
  }
  llvm::MapVector<StringRef, SmallVector<StringRef>> blocks;
  for (auto &[key, paths] : siblings)
    if (paths.size() >= 2)
      llvm::append_range(blocks[key.second], paths);
  return blocks;
}

std::string GroupUnitsPass::markRepeatedBlocks() {
  auto blocks = findRepeatedBlocks(contract.moduleClasses);
  SmallVector<std::pair<StringRef, unsigned>> marked; // (class, node)
  for (auto &[className, paths] : blocks) {
    for (StringRef path : paths) {
      auto node = nodeByPath.find(path);
      if (node == nodeByPath.end() || node->second == 0)
        continue; // owns no parameters
      isLeaf[node->second] = true;
      marked.push_back({className, node->second});
    }
  }
  // Report the classes whose modules become units: those not inside
  // another block.
  llvm::MapVector<StringRef, unsigned> units;
  for (auto [className, node] : marked) {
    bool nested = false;
    for (StringRef path = getModulePath(nodes[node].path); !path.empty();
         path = getModulePath(path))
      nested |= isLeaf[nodeByPath.lookup(path)];
    if (!nested)
      ++units[className];
  }
  if (units.empty())
    return "one root unit: no leaf option and no repeated block class";
  std::string policy;
  llvm::raw_string_ostream os(policy);
  os << "repeated block class ";
  llvm::interleaveComma(units, os, [&](auto entry) {
    os << entry.first << " (" << entry.second << " modules)";
  });
  os << "; the rest in root";
  return policy;
}

std::string GroupUnitsPass::describePolicy() {
  std::string policy;
  llvm::raw_string_ostream os(policy);
  auto list = [&](StringRef name, ArrayRef<std::string> values) {
    if (values.empty())
      return;
    os << (policy.empty() ? "" : ", ") << name << "=";
    llvm::interleave(values, os, ",");
  };
  list("leaf-modules", leafModules);
  list("leaf-classes", leafClasses);
  if (minUnitNumel > 0)
    os << (policy.empty() ? "" : ", ") << "min-unit-numel=" << minUnitNumel;
  if (policy.empty())
    return "one root unit: no leaf option";
  os << "; the rest in root";
  return policy;
}

void GroupUnitsPass::forEachParam(unsigned node,
                                  function_ref<void(unsigned)> fn) {
  for (unsigned param : nodes[node].params)
    fn(param);
  for (unsigned child : nodes[node].children)
    forEachParam(child, fn);
}

void GroupUnitsPass::claimSubtree(unsigned node, unsigned unit) {
  forEachParam(node, [&](unsigned param) {
    if (unitOf[param] < 0 && !ignored[param])
      unitOf[param] = unit;
  });
}

void GroupUnitsPass::collectLeafUnits(unsigned node) {
  if (isLeaf[node]) {
    // Outermost match wins: the whole subtree is one unit.
    claimSubtree(node, addUnit(nodes[node].path, UnitKind::Sharded));
    return;
  }
  for (unsigned child : nodes[node].children)
    collectLeafUnits(child);
}

int64_t GroupUnitsPass::autoWrap(unsigned node) {
  // FSDP's size_based_auto_wrap_policy: count the elements of this module
  // not yet wrapped by a descendant; wrap once they reach the threshold.
  int64_t pending = 0;
  for (unsigned param : nodes[node].params)
    if (unitOf[param] < 0 && !ignored[param])
      pending += contract.params.begin()[param].second.type.getNumElements();
  for (unsigned child : nodes[node].children)
    pending += autoWrap(child);
  if (node == 0 || pending < minUnitNumel || pending == 0)
    return pending;
  claimSubtree(node, addUnit(nodes[node].path, UnitKind::Sharded));
  return 0;
}

LogicalResult GroupUnitsPass::checkLeafConflicts(ModuleOp module) {
  // A leaf module whose parameters are all ignored asks for two
  // contradictory things.
  for (unsigned i = 0; i < nodes.size(); ++i) {
    if (!isLeaf[i])
      continue;
    bool any = false, allIgnored = true;
    forEachParam(i, [&](unsigned param) {
      any = true;
      allIgnored &= ignored[param];
    });
    if (any && allIgnored)
      return emitError(module.getLoc())
             << "conflicting options: leaf module '" << nodes[i].path
             << "' is chosen as a unit but all its parameters are ignored";
  }
  return success();
}

/// Returns `base`, or `base_N` for the first N that is not taken yet.
static std::string uniqueName(StringRef base, llvm::StringSet<> &taken) {
  std::string name = base.str();
  for (unsigned n = 1; taken.contains(name); ++n)
    name = (base + "_" + Twine(n)).str();
  taken.insert(name);
  return name;
}

void GroupUnitsPass::claimExpertParams() {
  for (ModelFunction &function : contract.functions)
    for (auto [argIndex, fqn] : function.params) {
      auto group = function.func.getArgAttrOfType<IntegerAttr>(
          argIndex, ZestDialect::kExpertParallelAttrName);
      unsigned param = contract.params.find(fqn) - contract.params.begin();
      if (!group || unitOf[param] >= 0)
        continue;
      plans.push_back({fqn.str(), UnitKind::Sharded, {}, group.getInt()});
      unitOf[param] = plans.size() - 1;
    }
}

/// The experts' parameter `local` is this rank's part of: `groupSize`
/// times its first dimension.
static RankedTensorType getAllExpertsType(RankedTensorType local,
                                          int64_t groupSize) {
  SmallVector<int64_t> shape(local.getShape());
  shape[0] *= groupSize;
  return local.clone(shape);
}

void GroupUnitsPass::declareExpertUnit(OpBuilder &builder, const UnitPlan &plan,
                                       llvm::StringSet<> &taken) {
  const ModelParam &info = contract.params.begin()[plan.params.front()].second;
  RankedTensorType type = getAllExpertsType(info.type, plan.expertGroup);
  int64_t numel = type.getNumElements();
  int64_t replicaGroups = worldSize / plan.expertGroup;
  Type elementType = type.getElementType();
  auto unit = UnitOp::create(
      builder, info.loc, uniqueName(plan.name, taken), UnitKind::Sharded,
      elementType, plan.expertGroup,
      replicaGroups > 1 ? builder.getI64IntegerAttr(replicaGroups)
                        : IntegerAttr(),
      numel, numel / plan.expertGroup,
      builder.getArrayAttr(
          {ParamAttr::get(builder.getContext(), info.fqn.getValue(), type, 0)}),
      communicationType(paramType, elementType),
      communicationType(reduceType, elementType));
  unit.setExperts(true);
}

void GroupUnitsPass::declareUnits(ModuleOp module) {
  // Units in order of their first parameter; parameters in contract order.
  for (UnitPlan &plan : plans)
    llvm::sort(plan.params);
  llvm::erase_if(plans,
                 [](const UnitPlan &plan) { return plan.params.empty(); });
  llvm::stable_sort(plans, [](const UnitPlan &a, const UnitPlan &b) {
    return a.params.front() < b.params.front();
  });

  llvm::StringSet<> taken;
  for (Operation &op : *module.getBody())
    if (auto symbol = dyn_cast<SymbolOpInterface>(op))
      taken.insert(symbol.getName());

  MLIRContext *ctx = module.getContext();
  OpBuilder builder = OpBuilder::atBlockBegin(module.getBody());
  for (const UnitPlan &plan : plans) {
    if (plan.expertGroup) {
      declareExpertUnit(builder, plan, taken);
      continue;
    }
    // One element type per unit: split mixed units by type, in order of
    // first appearance.
    llvm::MapVector<Type, SmallVector<unsigned>> byType;
    for (unsigned param : plan.params)
      byType[contract.params.begin()[param].second.type.getElementType()]
          .push_back(param);
    for (auto &[elementType, params] : byType) {
      std::string base = plan.name;
      if (byType.size() > 1) {
        llvm::raw_string_ostream os(base);
        os << "[" << elementType << "]";
      }
      SmallVector<Attribute> entries;
      int64_t offset = 0;
      for (unsigned param : params) {
        const ModelParam &info = contract.params.begin()[param].second;
        entries.push_back(
            ParamAttr::get(ctx, info.fqn.getValue(), info.type, offset));
        offset += info.type.getNumElements();
      }
      // Hybrid sharding lays a unit out for the ranks of one replica group.
      int64_t shards = worldSize / replicas;
      bool sharded = plan.kind == UnitKind::Sharded;
      int64_t padded =
          sharded ? llvm::divideCeil(offset, shards) * shards : offset;
      int64_t shard = sharded ? padded / shards : padded;
      Location loc = contract.params.begin()[params.front()].second.loc;
      UnitOp::create(
          builder, loc, uniqueName(base, taken), plan.kind, elementType, shards,
          replicas > 1 ? builder.getI64IntegerAttr(replicas) : IntegerAttr(),
          padded, shard, builder.getArrayAttr(entries),
          communicationType(paramType, elementType),
          communicationType(reduceType, elementType));
    }
  }
}

void GroupUnitsPass::runOnOperation() {
  ModuleOp module = getOperation();
  FailureOr<ModelContract> analyzed = ModelContract::analyze(module);
  if (failed(analyzed))
    return signalPassFailure();
  contract = std::move(*analyzed);
  if (failed(checkOptions(module)))
    return signalPassFailure();

  size_t numParams = contract.params.size();
  unitOf.assign(numParams, -1);
  ignored.assign(numParams, false);

  claimExpertParams();
  FailureOr<SmallVector<UserGlob>> ignoreGlobs =
      compile(module, "ignore", ignore);
  if (failed(ignoreGlobs))
    return signalPassFailure();
  std::optional<unsigned> ignoredUnit;
  for (auto [index, entry] : llvm::enumerate(contract.params)) {
    for (UserGlob &pattern : *ignoreGlobs) {
      if (!pattern.glob.match(entry.first.getValue()))
        continue;
      pattern.matched = true;
      if (unitOf[index] >= 0) {
        emitError(entry.second.loc)
            << "'" << entry.first.getValue() << "' matches ignore '"
            << pattern.text
            << "' but is split by expert parallelism: it cannot be "
               "replicated";
        return signalPassFailure();
      }
      if (!ignoredUnit)
        ignoredUnit = addUnit("ignored", UnitKind::Replicated);
      ignored[index] = true;
      unitOf[index] = *ignoredUnit;
    }
  }
  for (const UserGlob &pattern : *ignoreGlobs)
    if (!pattern.matched) {
      emitError(module.getLoc())
          << "no parameter matches '" << pattern.text << "' (ignore)";
      return signalPassFailure();
    }

  buildTree();
  if (failed(markLeafModules(module)))
    return signalPassFailure();
  bool explicitPolicy =
      !leafModules.empty() || !leafClasses.empty() || minUnitNumel > 0;
  std::string policy = blockUnits && !explicitPolicy && contract.moduleClasses
                           ? markRepeatedBlocks()
                           : describePolicy();
  module->setAttr(ZestDialect::kUnitPolicyAttrName,
                  StringAttr::get(module.getContext(), policy));
  if (failed(checkLeafConflicts(module)))
    return signalPassFailure();
  collectLeafUnits(0);
  if (minUnitNumel > 0)
    autoWrap(0);
  // Whatever no policy claimed belongs to the root unit.
  unsigned root = addUnit("root", UnitKind::Sharded);
  for (auto [param, unit] : llvm::enumerate(unitOf))
    plans[unit < 0 ? root : unit].params.push_back(param);
  declareUnits(module);
}
