//===- ZestOps.cpp - Zest dialect operations ------------------------------===//

#include "zest/Dialect/Zest/IR/ZestOps.h"
#include "zest_runtime.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::zest;

//===----------------------------------------------------------------------===//
// Unit parameter list: one `"fqn" : type at offset` per line.
//===----------------------------------------------------------------------===//

static ParseResult parseUnitParams(OpAsmParser &parser, ArrayAttr &params) {
  SmallVector<Attribute> entries;
  auto parseEntry = [&]() -> ParseResult {
    std::string name;
    RankedTensorType type;
    int64_t offset = 0;
    SMLoc loc = parser.getCurrentLocation();
    if (parser.parseString(&name) || parser.parseColon() ||
        parser.parseType(type) || parser.parseKeyword("at") ||
        parser.parseInteger(offset))
      return failure();
    auto emitError = [&]() { return parser.emitError(loc); };
    ParamAttr param = ParamAttr::getChecked(emitError, parser.getContext(),
                                            StringRef(name), type, offset);
    if (!param)
      return failure();
    entries.push_back(param);
    return success();
  };
  if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Square,
                                     parseEntry))
    return failure();
  params = parser.getBuilder().getArrayAttr(entries);
  return success();
}

static void printUnitParams(OpAsmPrinter &printer, UnitOp, ArrayAttr params) {
  printer << "[";
  printer.increaseIndent();
  llvm::interleave(
      params.getAsRange<ParamAttr>(),
      [&](ParamAttr param) {
        printer.printNewline();
        printer.printString(param.getName());
        printer << " : " << param.getValueType() << " at " << param.getOffset();
      },
      [&] { printer << ","; });
  printer.decreaseIndent();
  if (!params.empty())
    printer.printNewline();
  printer << "]";
}

#define GET_OP_CLASSES
#include "zest/Dialect/Zest/IR/ZestOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

/// Resolves `ref` to a unit declaration, or reports where it is missing.
static UnitOp lookupUnit(Operation *op, SymbolTableCollection &symbolTables,
                         FlatSymbolRefAttr ref) {
  auto unit = symbolTables.lookupNearestSymbolFrom<UnitOp>(op, ref);
  if (!unit)
    op->emitOpError() << "refers to " << ref
                      << ", which is not a zest.unit declaration";
  return unit;
}

/// The layout of one unit, as a collective sees it.
static CollectiveLayout getUnitLayout(UnitOp unit) {
  CollectiveLayout layout;
  layout.name = unit.getSymName();
  layout.sharded = unit.isSharded();
  layout.experts = unit.getExperts();
  layout.worldSize = unit.getWorldSize();
  layout.replicas = unit.getNumReplicas();
  layout.shardType = unit.getShardType();
  layout.flatType = unit.getFlatType();
  layout.gatherType = unit.getGatherType().value_or(Type());
  layout.reduceType = unit.getReduceType().value_or(Type());
  layout.units.push_back(unit);
  return layout;
}

/// Checks that `actual` is the type `expected` that `layout` (a unit's or a
/// bucket's) prescribes for the operand or result called `what`.
static LogicalResult checkLayoutType(Operation *op,
                                     const CollectiveLayout &layout,
                                     StringRef what, Type actual,
                                     Type expected) {
  if (actual == expected)
    return success();
  return op->emitOpError() << what << " must be " << expected << " for "
                           << (layout.units.size() == 1 ? "unit" : "bucket")
                           << " @" << layout.name << " ("
                           << (layout.sharded ? "sharded" : "replicated")
                           << ", world_size = " << layout.worldSize << "), got "
                           << actual;
}

static LogicalResult checkUnitType(Operation *op, UnitOp unit, StringRef what,
                                   Type actual, Type expected) {
  return checkLayoutType(op, getUnitLayout(unit), what, actual, expected);
}

bool mlir::zest::haveSameLayout(UnitOp a, UnitOp b) {
  return a.getKind() == b.getKind() && a.getExperts() == b.getExperts() &&
         a.getElementType() == b.getElementType() &&
         a.getWorldSize() == b.getWorldSize() &&
         a.getNumReplicas() == b.getNumReplicas() &&
         a.getGatherType() == b.getGatherType() &&
         a.getReduceType() == b.getReduceType();
}

/// Why the members of `bucket` cannot be packed together, or "" if they
/// can; `units` receives the members found.
static std::string getBucketMembers(BucketOp bucket,
                                    SymbolTableCollection *symbolTables,
                                    SmallVectorImpl<UnitOp> &units) {
  llvm::SmallDenseSet<Attribute> seen;
  for (auto ref : bucket.getUnits().getAsRange<FlatSymbolRefAttr>()) {
    auto unit = symbolTables
                    ? symbolTables->lookupNearestSymbolFrom<UnitOp>(bucket, ref)
                    : SymbolTable::lookupNearestSymbolFrom<UnitOp>(bucket, ref);
    if (!unit)
      return ("@" + ref.getValue() + " is not a zest.unit declaration").str();
    if (!seen.insert(ref).second)
      return ("@" + ref.getValue() + " is listed twice").str();
    if (!units.empty() && !haveSameLayout(units.front(), unit))
      return ("@" + ref.getValue() + " differs from @" +
              units.front().getSymName() +
              " in kind, element type, world_size, replicas or "
              "communication types")
          .str();
    units.push_back(unit);
  }
  if (units.size() < 2)
    return "a bucket holds at least two units";
  return "";
}

std::optional<CollectiveLayout>
mlir::zest::lookupCollectiveLayout(Operation *from, FlatSymbolRefAttr ref,
                                   SymbolTableCollection *symbolTables) {
  Operation *symbol = symbolTables
                          ? symbolTables->lookupNearestSymbolFrom(from, ref)
                          : SymbolTable::lookupNearestSymbolFrom(from, ref);
  if (auto unit = dyn_cast_or_null<UnitOp>(symbol))
    return getUnitLayout(unit);
  auto bucket = dyn_cast_or_null<BucketOp>(symbol);
  if (!bucket)
    return std::nullopt;
  SmallVector<UnitOp> units;
  if (!getBucketMembers(bucket, symbolTables, units).empty())
    return std::nullopt;
  CollectiveLayout layout = getUnitLayout(units.front());
  layout.name = bucket.getSymName();
  int64_t shard = 0, flat = 0;
  for (UnitOp unit : units) {
    shard += unit.getShardSize();
    flat += unit.getPaddedSize();
  }
  Type elementType = units.front().getElementType();
  layout.shardType = RankedTensorType::get({shard}, elementType);
  layout.flatType = RankedTensorType::get({flat}, elementType);
  layout.units = std::move(units);
  return layout;
}

/// The tensor a collective produces: its result, or the value type of its
/// future for the asynchronous forms.
static Type collectiveValueType(Value result) {
  if (auto future = dyn_cast<FutureType>(result.getType()))
    return future.getValueType();
  return result.getType();
}

namespace {
enum class CollectiveKind {
  AllGather,
  ReduceScatter,
  AllReduce,
  ReplicaAllReduce
};
} // namespace

/// Verifies a collective's operand and result against its unit. Gathers and
/// reduce-scatters move between the shard and the full buffer of a sharded
/// unit; all-reduces keep the full buffer of a replicated unit, or across
/// replicas the shard of a sharded unit that has replicas.
static LogicalResult verifyCollective(Operation *op,
                                      SymbolTableCollection &symbolTables,
                                      FlatSymbolRefAttr unitRef,
                                      CollectiveKind kind, Value input,
                                      Value result) {
  std::optional<CollectiveLayout> layout =
      lookupCollectiveLayout(op, unitRef, &symbolTables);
  if (!layout)
    return op->emitOpError()
           << "refers to " << unitRef
           << ", which is not a zest.unit or a valid zest.bucket declaration";
  bool wantSharded = kind != CollectiveKind::AllReduce;
  if (layout->sharded != wantSharded)
    return op->emitOpError()
           << "requires a " << (wantSharded ? "sharded" : "replicated")
           << " unit, but @" << layout->name << " is "
           << (layout->sharded ? "sharded" : "replicated");
  if (kind == CollectiveKind::ReplicaAllReduce && layout->replicas == 1)
    return op->emitOpError()
           << "across_replicas requires a unit with replicas > 1, but @"
           << layout->name << " has one copy";
  Type shard = layout->shardType, flat = layout->flatType;
  bool inShard = kind == CollectiveKind::AllGather ||
                 kind == CollectiveKind::ReplicaAllReduce;
  bool outShard = kind == CollectiveKind::ReduceScatter ||
                  kind == CollectiveKind::ReplicaAllReduce;
  Type expectedIn = inShard ? shard : flat;
  Type expectedOut = outShard ? shard : flat;
  if (failed(
          checkLayoutType(op, *layout, "operand", input.getType(), expectedIn)))
    return failure();
  return checkLayoutType(op, *layout, "result", collectiveValueType(result),
                         expectedOut);
}

/// Local checks shared by all collectives: element types are preserved and
/// the future of an asynchronous form is consumed by exactly one zest.wait.
static LogicalResult verifyCollectiveLocal(Operation *op, Value input,
                                           Value result) {
  Type inElt = cast<ShapedType>(input.getType()).getElementType();
  Type outElt = cast<ShapedType>(collectiveValueType(result)).getElementType();
  if (inElt != outElt)
    return op->emitOpError()
           << "element type changes from " << inElt << " to " << outElt;
  if (!isa<FutureType>(result.getType()))
    return success();
  if (!result.hasOneUse() || !isa<WaitOp>(*result.getUsers().begin()))
    return op->emitOpError()
           << "future must be consumed by exactly one zest.wait";
  return success();
}

//===----------------------------------------------------------------------===//
// UnitOp
//===----------------------------------------------------------------------===//

ParamAttr UnitOp::lookupParam(StringRef fqn) {
  for (auto param : getParams().getAsRange<ParamAttr>())
    if (param.getName() == fqn)
      return param;
  return {};
}

int64_t UnitOp::getNumElements() {
  int64_t numel = 0;
  for (auto param : getParams().getAsRange<ParamAttr>())
    numel += param.getNumElements();
  return numel;
}

RankedTensorType UnitOp::getFlatType() {
  return RankedTensorType::get({static_cast<int64_t>(getPaddedSize())},
                               getElementType());
}

RankedTensorType UnitOp::getShardType() {
  return RankedTensorType::get({static_cast<int64_t>(getShardSize())},
                               getElementType());
}

RankedTensorType UnitOp::getLocalExpertsType() {
  RankedTensorType type =
      (*getParams().getAsRange<ParamAttr>().begin()).getValueType();
  SmallVector<int64_t> shape(type.getShape());
  shape[0] /= getWorldSize();
  return type.clone(shape);
}

LogicalResult UnitOp::verify() {
  Type elementType = getElementType();
  if (!elementType.isIntOrFloat())
    return emitOpError() << "element type must be an integer or float type, "
                         << "got " << elementType;
  for (auto [name, type] : {std::make_pair("gather_type", getGatherType()),
                            std::make_pair("reduce_type", getReduceType())}) {
    if (!type)
      continue;
    if (!type->isBF16() && !type->isF16())
      return emitOpError() << name << " must be bf16 or f16, got " << *type;
    if (!elementType.isF32())
      return emitOpError() << name << " needs an f32 unit (an f32 master "
                           << "copy), this one holds " << elementType;
  }
  if (isSharded() && getPaddedSize() != getShardSize() * getWorldSize())
    return emitOpError() << "padded_size (" << getPaddedSize()
                         << ") must equal shard_size (" << getShardSize()
                         << ") times world_size (" << getWorldSize() << ")";
  if (getExperts()) {
    auto params = getParams().getAsRange<ParamAttr>();
    int64_t experts = llvm::range_size(params) == 1
                          ? (*params.begin()).getValueType().getDimSize(0)
                          : 0;
    if (!isSharded() || experts == 0 || experts % getWorldSize() != 0 ||
        static_cast<int64_t>(getPaddedSize()) != getNumElements())
      return emitOpError()
             << "experts: must be a sharded unit of one parameter whose "
                "first dimension (the experts) world_size divides, unpadded";
  }
  if (!isSharded() && getPaddedSize() != getShardSize())
    return emitOpError() << "replicated unit must have shard_size ("
                         << getShardSize() << ") equal to padded_size ("
                         << getPaddedSize() << ")";
  llvm::StringSet<> names;
  int64_t end = 0;
  for (auto param : getParams().getAsRange<ParamAttr>()) {
    if (!names.insert(param.getName()).second)
      return emitOpError() << "parameter '" << param.getName()
                           << "' is listed twice";
    if (param.getValueType().getElementType() != elementType)
      return emitOpError() << "parameter '" << param.getName()
                           << "' has element type "
                           << param.getValueType().getElementType()
                           << " but the unit holds " << elementType;
    if (param.getOffset() < end)
      return emitOpError() << "parameter '" << param.getName() << "' at offset "
                           << param.getOffset()
                           << " overlaps the previous parameter, which ends "
                           << "at " << end
                           << " (parameters are listed in flat order)";
    end = param.getEnd();
  }
  if (end > static_cast<int64_t>(getPaddedSize()))
    return emitOpError() << "parameters end at element " << end
                         << ", past padded_size (" << getPaddedSize() << ")";
  return success();
}

//===----------------------------------------------------------------------===//
// BucketOp, PackOp, UnpackOp
//===----------------------------------------------------------------------===//

LogicalResult BucketOp::verifySymbolUses(SymbolTableCollection &symbolTables) {
  SmallVector<UnitOp> units;
  std::string problem = getBucketMembers(*this, &symbolTables, units);
  if (!problem.empty())
    return emitOpError() << "cannot pack its units: " << problem;
  return success();
}

/// Checks that `packed` holds the `parts` piece by piece: each part splits
/// into `pieces` equal parts, all of the packed element type, and their
/// sizes add up to the packed size.
static LogicalResult verifyPacking(Operation *op, Value packed, TypeRange parts,
                                   int64_t pieces) {
  auto packedType = cast<RankedTensorType>(packed.getType());
  int64_t total = 0;
  for (Type part : parts) {
    auto type = cast<RankedTensorType>(part);
    if (type.getElementType() != packedType.getElementType())
      return op->emitOpError()
             << "packs " << type << " into " << packedType
             << ": every buffer must have the same element type";
    if (type.getNumElements() % pieces != 0)
      return op->emitOpError()
             << type << " does not split into " << pieces << " equal pieces";
    total += type.getNumElements();
  }
  if (parts.empty() || total != packedType.getNumElements())
    return op->emitOpError()
           << "the packed buffer " << packedType << " must hold exactly the "
           << total << " elements of its " << parts.size() << " parts";
  return success();
}

LogicalResult PackOp::verify() {
  return verifyPacking(*this, getResult(), getInputs().getTypes(), getPieces());
}

OpFoldResult PackOp::fold(FoldAdaptor) {
  auto unpack = getInputs().front().getDefiningOp<UnpackOp>();
  if (!unpack || unpack.getPieces() != getPieces() ||
      unpack.getInput().getType() != getType() ||
      ValueRange(unpack.getResults()) != getInputs())
    return {};
  return unpack.getInput();
}

LogicalResult UnpackOp::verify() {
  return verifyPacking(*this, getInput(), getResults().getTypes(), getPieces());
}

//===----------------------------------------------------------------------===//
// UnflattenOp / FlattenOp
//===----------------------------------------------------------------------===//

/// Resolves parameter `fqn` of `unit`, or reports that it is not a member.
static ParamAttr lookupMember(Operation *op, UnitOp unit, StringRef fqn) {
  ParamAttr param = unit.lookupParam(fqn);
  if (!param)
    op->emitOpError() << "unit @" << unit.getSymName() << " has no parameter '"
                      << fqn << "'";
  return param;
}

LogicalResult
UnflattenOp::verifySymbolUses(SymbolTableCollection &symbolTables) {
  UnitOp unit = lookupUnit(*this, symbolTables, getUnitAttr());
  if (!unit)
    return failure();
  ParamAttr param = lookupMember(*this, unit, getParam());
  if (!param || failed(checkUnitType(*this, unit, "operand",
                                     getFlat().getType(), unit.getFlatType())))
    return failure();
  if (getResult().getType() != param.getValueType())
    return emitOpError() << "result must be " << param.getValueType()
                         << ", the type of parameter '" << getParam()
                         << "', got " << getResult().getType();
  return success();
}

LogicalResult FlattenOp::verify() {
  if (getParams().size() != getValues().size())
    return emitOpError() << "names " << getParams().size()
                         << " parameters but has " << getValues().size()
                         << " operands";
  llvm::StringSet<> seen;
  for (StringRef name : getParams().getAsValueRange<StringAttr>())
    if (!seen.insert(name).second)
      return emitOpError() << "parameter '" << name << "' is named twice";
  return success();
}

LogicalResult FlattenOp::verifySymbolUses(SymbolTableCollection &symbolTables) {
  UnitOp unit = lookupUnit(*this, symbolTables, getUnitAttr());
  if (!unit)
    return failure();
  for (auto [name, value] :
       llvm::zip(getParams().getAsValueRange<StringAttr>(), getValues())) {
    ParamAttr param = lookupMember(*this, unit, name);
    if (!param)
      return failure();
    if (value.getType() != param.getValueType())
      return emitOpError() << "operand for '" << name << "' must be "
                           << param.getValueType() << ", got "
                           << value.getType();
  }
  return checkUnitType(*this, unit, "result", getResult().getType(),
                       unit.getFlatType());
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

#define ZEST_DEFINE_COLLECTIVE_VERIFIERS(OP, KIND, INPUT, RESULT)              \
  LogicalResult OP::verify() {                                                 \
    return verifyCollectiveLocal(*this, INPUT, RESULT);                        \
  }                                                                            \
  LogicalResult OP::verifySymbolUses(SymbolTableCollection &symbolTables) {    \
    return verifyCollective(*this, symbolTables, getUnitAttr(),                \
                            CollectiveKind::KIND, INPUT, RESULT);              \
  }

ZEST_DEFINE_COLLECTIVE_VERIFIERS(AllGatherOp, AllGather, getShard(),
                                 getResult())
ZEST_DEFINE_COLLECTIVE_VERIFIERS(AllGatherStartOp, AllGather, getShard(),
                                 getFuture())
ZEST_DEFINE_COLLECTIVE_VERIFIERS(ReduceScatterOp, ReduceScatter, getInput(),
                                 getResult())
ZEST_DEFINE_COLLECTIVE_VERIFIERS(ReduceScatterStartOp, ReduceScatter,
                                 getInput(), getFuture())
#undef ZEST_DEFINE_COLLECTIVE_VERIFIERS

#define ZEST_DEFINE_ALL_REDUCE_VERIFIERS(OP, RESULT)                           \
  LogicalResult OP::verify() {                                                 \
    return verifyCollectiveLocal(*this, getInput(), RESULT);                   \
  }                                                                            \
  LogicalResult OP::verifySymbolUses(SymbolTableCollection &symbolTables) {    \
    return verifyCollective(*this, symbolTables, getUnitAttr(),                \
                            getAcrossReplicas()                                \
                                ? CollectiveKind::ReplicaAllReduce             \
                                : CollectiveKind::AllReduce,                   \
                            getInput(), RESULT);                               \
  }

ZEST_DEFINE_ALL_REDUCE_VERIFIERS(AllReduceOp, getResult())
ZEST_DEFINE_ALL_REDUCE_VERIFIERS(AllReduceStartOp, getFuture())
#undef ZEST_DEFINE_ALL_REDUCE_VERIFIERS

LogicalResult WaitOp::verify() {
  Operation *producer = getFuture().getDefiningOp();
  if (producer &&
      !isa<AllGatherStartOp, ReduceScatterStartOp, AllReduceStartOp>(producer))
    return emitOpError() << "future must come from a zest.*_start "
                         << "collective, got '" << producer->getName() << "'";
  return success();
}

Location mlir::zest::getModelDiagnosticLoc(ModuleOp module) {
  for (Operation &op : module.getOps())
    if (auto func = dyn_cast<FunctionOpInterface>(op);
        func && !func.isExternal())
      return func.getLoc();
  return module.getLoc();
}

//===----------------------------------------------------------------------===//
// Offload copies
//===----------------------------------------------------------------------===//

LogicalResult CopyToHostStartOp::verify() {
  auto future = cast<FutureType>(getFuture().getType());
  if (future.getValueType() != getSource().getType())
    return emitOpError() << "future must hold " << getSource().getType()
                         << ", got " << future;
  auto stage = dyn_cast<BlockArgument>(getStage());
  auto func =
      stage ? dyn_cast<FunctionOpInterface>(stage.getOwner()->getParentOp())
            : FunctionOpInterface();
  if (!func || stage.getOwner() != &func.getFunctionBody().front() ||
      !func.getArgAttr(stage.getArgNumber(), ZestDialect::kHostArgAttrName))
    return emitOpError() << "stage must be an argument of the function "
                         << "marked '" << ZestDialect::kHostArgAttrName
                         << "' (pinned host memory)";
  if (!getFuture().hasOneUse() ||
      !isa<CopyWaitOp>(*getFuture().getUsers().begin()))
    return emitOpError() << "future must be waited for by exactly one "
                         << "zest.copy_wait";
  return success();
}

LogicalResult CopyWaitOp::verify() {
  Operation *producer = getFuture().getDefiningOp();
  if (producer && !isa<CopyToHostStartOp>(producer))
    return emitOpError() << "future must come from zest.copy_to_host_start, "
                         << "got '" << producer->getName() << "'";
  return success();
}

//===----------------------------------------------------------------------===//
// ReleaseOp
//===----------------------------------------------------------------------===//

/// True if `value` is a gathered buffer: the result of a synchronous gather
/// or the wait of an asynchronous one.
static bool isGatheredBuffer(Value value) {
  Operation *def = value.getDefiningOp();
  if (isa_and_nonnull<AllGatherOp>(def))
    return true;
  auto wait = dyn_cast_or_null<WaitOp>(def);
  return wait &&
         isa_and_nonnull<AllGatherStartOp>(wait.getFuture().getDefiningOp());
}

LogicalResult ReleaseOp::verify() {
  Value buffer = getBuffer();
  if (!isGatheredBuffer(buffer))
    return emitOpError() << "operand must be a gathered buffer (the result of "
                         << "zest.all_gather or of zest.wait on "
                         << "zest.all_gather_start)";
  // The buffer and every view unflattened from it die here: any use later in
  // this block would read freed memory.
  SmallVector<Value> live = {buffer};
  for (Operation *user : buffer.getUsers())
    if (auto view = dyn_cast<UnflattenOp>(user))
      live.push_back(view.getResult());
  Block *block = (*this)->getBlock();
  for (Value value : live) {
    for (OpOperand &use : value.getUses()) {
      Operation *user = block->findAncestorOpInBlock(*use.getOwner());
      if (!user || user == getOperation() ||
          !getOperation()->isBeforeInBlock(user))
        continue;
      InFlightDiagnostic diag = emitOpError()
                                << "releases a buffer that is used later";
      diag.attachNote(use.getOwner()->getLoc()) << "used here";
      return diag;
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// UpdateOp
//===----------------------------------------------------------------------===//

unsigned UpdateOp::getNumStates(Optimizer optimizer, bool momentum) {
  return optimizer == Optimizer::AdamW ? 2 : (momentum ? 1 : 0);
}

SmallVector<StringRef> UpdateOp::getStateNames(Optimizer optimizer,
                                               bool momentum) {
  if (optimizer == Optimizer::AdamW)
    return {"exp_avg", "exp_avg_sq"};
  if (momentum)
    return {"momentum_buffer"};
  return {};
}

LogicalResult UpdateOp::verify() {
  auto paramType = cast<RankedTensorType>(getParam().getType());
  if (!paramType.getElementType().isF32())
    return emitOpError() << "updates f32 parameters only, got "
                         << paramType.getElementType();
  Optimizer optimizer = getOptimizer();
  unsigned numStates = getState().size();
  if (optimizer == Optimizer::AdamW ? numStates != 2 : numStates > 1)
    return emitOpError() << stringifyOptimizer(optimizer) << " takes "
                         << (optimizer == Optimizer::AdamW
                                 ? "2 state buffers"
                                 : "0 or 1 state "
                                   "buffer (momentum)")
                         << ", got " << numStates;
  if (getNesterov() && (optimizer != Optimizer::SGD || numStates != 1))
    return emitOpError() << "nesterov requires sgd with a momentum buffer";
  size_t numValues = numStates + (getAccum() ? 1 : 0);
  if (getNewValues().size() != numValues)
    return emitOpError() << "has " << numStates << " state operands"
                         << (getAccum() ? " and an accumulator" : "") << " but "
                         << getNewValues().size()
                         << " state and accumulator results";
  auto hyperType = cast<RankedTensorType>(getHyper().getType());
  if (!hyperType.getElementType().isF32() ||
      hyperType.getNumElements() != ZEST_HYPER_COUNT)
    return emitOpError() << "hyperparameters must be tensor<"
                         << int64_t(ZEST_HYPER_COUNT) << "xf32>, got "
                         << hyperType;
  SmallVector<Value> flat = {getGrad(), getNewParam()};
  if (getAccum())
    llvm::append_range(flat, ValueRange{getAccum(), getNewAccum()});
  llvm::append_range(flat, getState());
  llvm::append_range(flat, getNewState());
  for (Value value : flat)
    if (value.getType() != paramType)
      return emitOpError() << "operands and results must all have the "
                           << "parameter's type " << paramType << ", got "
                           << value.getType();
  return success();
}

LogicalResult UpdateOp::verifySymbolUses(SymbolTableCollection &symbolTables) {
  UnitOp unit = lookupUnit(*this, symbolTables, getUnitAttr());
  if (!unit)
    return failure();
  if (failed(checkUnitType(*this, unit, "parameter operand",
                           getParam().getType(), unit.getShardType())))
    return failure();
  for (StringRef name : getFrozen().getAsValueRange<StringAttr>())
    if (!unit.lookupParam(name))
      return emitOpError() << "frozen parameter '" << name
                           << "' is not in unit @" << unit.getSymName();
  return success();
}

LogicalResult GlobalGradNormOp::verify() {
  size_t numUnits = getUnits().size();
  if (getGrads().size() != numUnits ||
      (getAccums().size() != numUnits && !getAccums().empty()))
    return emitOpError() << "takes one gradient and one accumulator (or "
                         << "none) per unit: " << numUnits << " units, "
                         << getGrads().size() << " gradients, "
                         << getAccums().size() << " accumulators";
  auto hyperType = cast<RankedTensorType>(getHyper().getType());
  if (!hyperType.getElementType().isF32() ||
      hyperType.getNumElements() != ZEST_HYPER_COUNT)
    return emitOpError() << "hyperparameters must be tensor<"
                         << int64_t(ZEST_HYPER_COUNT) << "xf32>, got "
                         << hyperType;
  return success();
}

LogicalResult
GlobalGradNormOp::verifySymbolUses(SymbolTableCollection &symbolTables) {
  for (auto [index, ref, grad] : llvm::enumerate(
           getUnits().getAsRange<FlatSymbolRefAttr>(), getGrads())) {
    UnitOp unit = lookupUnit(*this, symbolTables, ref);
    if (!unit)
      return failure();
    if (!unit.getElementType().isF32())
      return emitOpError() << "unit @" << unit.getSymName() << " holds "
                           << unit.getElementType()
                           << " parameters; gradient norms are of f32 units";
    if (failed(checkUnitType(*this, unit, "gradient operand", grad.getType(),
                             unit.getShardType())) ||
        (!getAccums().empty() &&
         failed(checkUnitType(*this, unit, "accumulator operand",
                              getAccums()[index].getType(),
                              unit.getShardType()))))
      return failure();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Fused linear ops
//===----------------------------------------------------------------------===//

/// The destinations of a destination-style op: the present ones among
/// `inits`, which are its last operands in ODS order.
static MutableOperandRange getTrailingInits(Operation *op,
                                            ArrayRef<Value> inits) {
  unsigned count = llvm::count_if(inits, [](Value init) { return init; });
  return MutableOperandRange(op, op->getNumOperands() - count, count);
}

/// Reads of the inputs and writes of the destinations, when on memrefs.
static void getDestinationStyleEffects(
    DestinationStyleOpInterface op,
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  for (OpOperand *input : op.getDpsInputOperands())
    if (isa<MemRefType>(input->get().getType()))
      effects.emplace_back(MemoryEffects::Read::get(), input,
                           SideEffects::DefaultResource::get());
  for (OpOperand &init : op.getDpsInitsMutable())
    if (isa<MemRefType>(init.get().getType()))
      effects.emplace_back(MemoryEffects::Write::get(), &init,
                           SideEffects::DefaultResource::get());
}

/// Checks that a destination-style op is all tensors (one result per
/// destination, of its type) or all memrefs (no result).
static LogicalResult verifyTensorsOrBuffers(Operation *op, ValueRange inits) {
  bool tensors = isa<RankedTensorType>(op->getOperand(0).getType());
  for (Value operand : op->getOperands())
    if (isa<RankedTensorType>(operand.getType()) != tensors)
      return op->emitOpError()
             << "mixes tensors and memrefs: operands are all tensors (before "
                "bufferization) or all memrefs";
  if (!tensors) {
    if (op->getNumResults() != 0)
      return op->emitOpError() << "on memrefs has no results";
    return success();
  }
  if (op->getNumResults() != inits.size())
    return op->emitOpError() << "on tensors returns one tensor per "
                             << "destination (" << inits.size() << "), not "
                             << op->getNumResults();
  for (auto [init, result] : llvm::zip(inits, op->getResults()))
    if (init.getType() != result.getType())
      return op->emitOpError()
             << "result of type " << result.getType()
             << " differs from its destination's type " << init.getType();
  return success();
}

/// Checks that a fused linear op stores all its operands in one element
/// type: the kernels take all-f32, all-bf16 or all-f16 layers.
static LogicalResult verifySameElementType(Operation *op) {
  Type type = getElementTypeOrSelf(op->getOperand(0).getType());
  for (Value operand : op->getOperands())
    if (getElementTypeOrSelf(operand.getType()) != type)
      return op->emitOpError()
             << "mixes element types " << type << " and "
             << getElementTypeOrSelf(operand.getType())
             << "; a fused linear layer stores all its operands in one type";
  return success();
}

/// `shape` as its sizes joined by `separator`, `?` for a dynamic size.
static std::string formatShape(ArrayRef<int64_t> shape, StringRef separator) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleave(
      shape, os,
      [&](int64_t size) {
        if (ShapedType::isDynamic(size))
          os << "?";
        else
          os << size;
      },
      separator);
  return text;
}

/// Checks that `value`, called `what`, has `shape` (dynamic sizes match
/// anything).
static LogicalResult checkShape(Operation *op, Value value, StringRef what,
                                ArrayRef<int64_t> shape) {
  if (!value)
    return success();
  auto type = cast<ShapedType>(value.getType());
  bool ok = type.getRank() == static_cast<int64_t>(shape.size());
  for (unsigned i = 0; ok && i < shape.size(); ++i)
    ok = ShapedType::isDynamic(shape[i]) ||
         ShapedType::isDynamic(type.getDimSize(i)) ||
         type.getDimSize(i) == shape[i];
  if (ok)
    return success();
  return op->emitOpError() << what << " has type " << value.getType()
                           << "; expected shape " << formatShape(shape, "x");
}

static int64_t getDim(Value value, unsigned dim) {
  return value ? cast<ShapedType>(value.getType()).getDimSize(dim)
               : ShapedType::kDynamic;
}

MutableOperandRange LinearOp::getDpsInitsMutable() {
  return getTrailingInits(*this, {getOutput(), getPreactivation()});
}

int64_t LinearOp::getM() { return getDim(getInput(), 0); }
int64_t LinearOp::getN() { return getDim(getOutput(), 1); }
int64_t LinearOp::getK() { return getDim(getInput(), 1); }

void LinearOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  getDestinationStyleEffects(*this, effects);
}

LogicalResult LinearOp::verify() {
  if (failed(verifyTensorsOrBuffers(*this, getDpsInits())) ||
      failed(verifySameElementType(*this)))
    return failure();
  if (getActivation() == Activation::None && getPreactivation())
    return emitOpError() << "keeps a pre-activation without an activation; "
                            "drop the second destination";
  int64_t m = getM(), n = getN(), k = getK();
  SmallVector<int64_t> weight = {k, n};
  if (getTransposeWeight())
    std::swap(weight[0], weight[1]);
  return success(
      succeeded(checkShape(*this, getWeight(),
                           getTransposeWeight() ? "weight ([out, in])"
                                                : "weight ([in, out])",
                           weight)) &&
      succeeded(checkShape(*this, getBias(), "bias", {n})) &&
      succeeded(checkShape(*this, getOutput(), "output", {m, n})) &&
      succeeded(
          checkShape(*this, getPreactivation(), "preactivation", {m, n})));
}

MutableOperandRange LinearBackwardOp::getDpsInitsMutable() {
  return getTrailingInits(*this,
                          {getGradInput(), getGradWeight(), getGradBias()});
}

int64_t LinearBackwardOp::getM() { return getDim(getGradOutput(), 0); }
int64_t LinearBackwardOp::getN() { return getDim(getGradOutput(), 1); }
int64_t LinearBackwardOp::getK() {
  if (getInput())
    return getDim(getInput(), 1);
  if (getGradInput())
    return getDim(getGradInput(), 1);
  return ShapedType::kDynamic;
}

void LinearBackwardOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  getDestinationStyleEffects(*this, effects);
}

LogicalResult LinearBackwardOp::verify() {
  if (failed(verifyTensorsOrBuffers(*this, getDpsInits())) ||
      failed(verifySameElementType(*this)))
    return failure();
  if (!getGradInput() && !getGradWeight() && !getGradBias())
    return emitOpError() << "computes no gradient; give at least one of "
                            "grad_input, grad_weight, grad_bias";
  if (bool(getPreactivation()) != (getActivation() != Activation::None))
    return emitOpError() << "takes a preactivation exactly when its "
                            "activation is not 'none'";
  if (bool(getInput()) != bool(getGradWeight()))
    return emitOpError() << "takes the layer's input exactly when it "
                            "computes grad_weight";
  if (bool(getWeight()) != bool(getGradInput()))
    return emitOpError() << "takes the weight exactly when it computes "
                            "grad_input";
  int64_t m = getM(), n = getN(), k = getK();
  SmallVector<int64_t> weight = {k, n}, gradWeight = {k, n};
  if (getTransposeWeight())
    std::swap(weight[0], weight[1]);
  if (getTransposeGradWeight())
    std::swap(gradWeight[0], gradWeight[1]);
  return success(
      succeeded(
          checkShape(*this, getPreactivation(), "preactivation", {m, n})) &&
      succeeded(checkShape(*this, getInput(), "input", {m, k})) &&
      succeeded(checkShape(*this, getWeight(), "weight", weight)) &&
      succeeded(checkShape(*this, getGradInput(), "grad_input", {m, k})) &&
      succeeded(
          checkShape(*this, getGradWeight(), "grad_weight", gradWeight)) &&
      succeeded(checkShape(*this, getGradBias(), "grad_bias", {n})));
}

std::string mlir::zest::getDTypeName(Type type) {
  if (type.isBF16())
    return "BF16";
  if (type.isF16())
    return "F16";
  if (type.isF32())
    return "F32";
  if (type.isF64())
    return "F64";
  if (type.isInteger(1))
    return "BOOL";
  if (auto integer = dyn_cast<IntegerType>(type))
    return (Twine(integer.isUnsigned() ? "U" : "I") + Twine(integer.getWidth()))
        .str();
  std::string name;
  llvm::raw_string_ostream(name) << type;
  return name;
}

//===----------------------------------------------------------------------===//
// Fused attention
//===----------------------------------------------------------------------===//

namespace {
/// The operands of an attention op whose shapes depend on each other.
struct AttentionOperands {
  Value query, key, value, mask, output, logsumexp;
};
} // namespace

/// Whether two sizes may be equal (a dynamic size matches anything).
static bool maybeEqual(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

/// Checks the mask's element type and that each of its dimensions is that
/// of `[batch, heads, queries, keys]` or 1.
static LogicalResult verifyAttentionMask(Operation *op, Value mask,
                                         Type elementType,
                                         ArrayRef<int64_t> scores) {
  if (!mask)
    return success();
  auto type = cast<ShapedType>(mask.getType());
  Type maskElement = type.getElementType();
  if (!maskElement.isInteger(1) && !maskElement.isF32() &&
      maskElement != elementType)
    return op->emitOpError()
           << "mask of element type " << maskElement
           << " is neither i1 (keep where true), f32 nor the inputs' type "
           << elementType << " (added to the scores)";
  for (auto [dim, size] : llvm::enumerate(type.getShape()))
    if (size != 1 && !maybeEqual(size, scores[dim]))
      return op->emitOpError()
             << "mask has type " << mask.getType() << "; each dimension is 1 "
             << "(broadcast) or that of [batch, heads, queries, keys] = ["
             << formatShape(scores, ", ") << "]";
  return success();
}

/// The shape of a 4-D attention operand: [batch, heads, rows, dim], or
/// [batch, rows, heads, dim] when `sequenceMajor`.
static SmallVector<int64_t> getAttentionShape(int64_t batch, int64_t heads,
                                              int64_t rows, int64_t dim,
                                              bool sequenceMajor) {
  if (sequenceMajor)
    return {batch, rows, heads, dim};
  return {batch, heads, rows, dim};
}

/// Checks the shapes of an attention's operands against each other:
/// queries [B, H, S, D], keys [B, G, T, D], values [B, G, T, E], output
/// [B, H, S, E] (heads and rows swapped when `sequenceMajor`), log-sum-exp
/// [B, H, S], with G dividing H.
static LogicalResult verifyAttentionShapes(Operation *op,
                                           const AttentionOperands &operands,
                                           float scale, bool sequenceMajor) {
  if (!std::isfinite(scale))
    return op->emitOpError() << "scale " << scale << " is not finite";
  unsigned headDim = sequenceMajor ? 2 : 1, rowDim = sequenceMajor ? 1 : 2;
  int64_t batch = getDim(operands.query, 0),
          heads = getDim(operands.query, headDim),
          queries = getDim(operands.query, rowDim),
          features = getDim(operands.query, 3),
          kvHeads = getDim(operands.key, headDim),
          keys = getDim(operands.key, rowDim),
          valueFeatures = getDim(operands.value, 3);
  if (kvHeads == 0 || (!ShapedType::isDynamic(heads) &&
                       !ShapedType::isDynamic(kvHeads) && heads % kvHeads != 0))
    return op->emitOpError()
           << "has " << heads << " query heads and " << kvHeads
           << " key/value heads; the key/value heads must divide the query "
              "heads (grouped-query attention)";
  Type elementType = getElementTypeOrSelf(operands.query.getType());
  if (failed(checkShape(
          op, operands.key, "key",
          getAttentionShape(batch, kvHeads, keys, features, sequenceMajor))) ||
      failed(checkShape(op, operands.value, "value",
                        getAttentionShape(batch, kvHeads, keys, valueFeatures,
                                          sequenceMajor))) ||
      failed(checkShape(op, operands.output, "output",
                        getAttentionShape(batch, heads, queries, valueFeatures,
                                          sequenceMajor))) ||
      failed(checkShape(op, operands.logsumexp, "logsumexp",
                        {batch, heads, queries})))
    return failure();
  return verifyAttentionMask(op, operands.mask, elementType,
                             {batch, heads, queries, keys});
}

/// Checks that `values` share the element type of the first: attention
/// stores its inputs, outputs and gradients in one type.
static LogicalResult verifyAttentionElementTypes(Operation *op,
                                                 ValueRange values) {
  Type type = getElementTypeOrSelf(values.front().getType());
  for (Value value : values)
    if (getElementTypeOrSelf(value.getType()) != type)
      return op->emitOpError()
             << "mixes element types " << type << " and "
             << getElementTypeOrSelf(value.getType())
             << "; queries, keys, values, outputs and their gradients are "
                "stored in one type";
  return success();
}

MutableOperandRange AttentionOp::getDpsInitsMutable() {
  return getTrailingInits(*this, {getOutput(), getLogsumexp()});
}

void AttentionOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  getDestinationStyleEffects(*this, effects);
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyTensorsOrBuffers(*this, getDpsInits())) ||
      failed(verifyAttentionElementTypes(
          *this, {getQuery(), getKey(), getValue(), getOutput()})))
    return failure();
  return verifyAttentionShapes(*this,
                               {getQuery(), getKey(), getValue(), getMask(),
                                getOutput(), getLogsumexp()},
                               getScale().convertToFloat(), getSequenceMajor());
}

MutableOperandRange AttentionBackwardOp::getDpsInitsMutable() {
  return getTrailingInits(*this,
                          {getGradQuery(), getGradKey(), getGradValue()});
}

void AttentionBackwardOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  getDestinationStyleEffects(*this, effects);
}

LogicalResult AttentionBackwardOp::verify() {
  if (failed(verifyTensorsOrBuffers(*this, getDpsInits())) ||
      failed(verifyAttentionElementTypes(
          *this,
          {getQuery(), getKey(), getValue(), getOutput(), getGradOutput(),
           getGradQuery(), getGradKey(), getGradValue()})) ||
      failed(verifyAttentionShapes(*this,
                                   {getQuery(), getKey(), getValue(), getMask(),
                                    getOutput(), getLogsumexp()},
                                   getScale().convertToFloat(),
                                   getSequenceMajor())))
    return failure();
  auto shapeOf = [](Value value) {
    return cast<ShapedType>(value.getType()).getShape();
  };
  return success(succeeded(checkShape(*this, getGradOutput(), "grad_output",
                                      shapeOf(getOutput()))) &&
                 succeeded(checkShape(*this, getGradQuery(), "grad_query",
                                      shapeOf(getQuery()))) &&
                 succeeded(checkShape(*this, getGradKey(), "grad_key",
                                      shapeOf(getKey()))) &&
                 succeeded(checkShape(*this, getGradValue(), "grad_value",
                                      shapeOf(getValue()))));
}

//===----------------------------------------------------------------------===//
// Fused cross-entropy
//===----------------------------------------------------------------------===//

/// Checks the shapes shared by the cross-entropy ops: `target` and
/// `logsumexp` have the logits' rows, `loss` (the forward's loss or the
/// backward's incoming gradient, called `what`) is `[rows]` for reduction
/// none and 0-D otherwise; label smoothing is in [0, 1].
static LogicalResult
verifyCrossEntropyShapes(Operation *op, LossReduction reduction,
                         float labelSmoothing, Value logits, Value target,
                         Value loss, StringRef what, Value logsumexp) {
  if (!(labelSmoothing >= 0.0f && labelSmoothing <= 1.0f))
    return op->emitOpError()
           << "label_smoothing " << labelSmoothing << " is not in [0, 1]";
  int64_t rows = getDim(logits, 0);
  if (failed(checkShape(op, target, "target", {rows})) ||
      failed(checkShape(op, logsumexp, "logsumexp", {rows})))
    return failure();
  if (reduction == LossReduction::None)
    return checkShape(op, loss, (what + " (reduction none: one per row)").str(),
                      {rows});
  return checkShape(op, loss,
                    (what + " (reduction " + stringifyLossReduction(reduction) +
                     ": a 0-D tensor)")
                        .str(),
                    {});
}

MutableOperandRange CrossEntropyOp::getDpsInitsMutable() {
  return getTrailingInits(*this, {getLoss(), getLogsumexp()});
}

void CrossEntropyOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  getDestinationStyleEffects(*this, effects);
}

LogicalResult CrossEntropyOp::verify() {
  if (failed(verifyTensorsOrBuffers(*this, getDpsInits())))
    return failure();
  return verifyCrossEntropyShapes(
      *this, getReduction(), getLabelSmoothing().convertToFloat(), getLogits(),
      getTarget(), getLoss(), "loss", getLogsumexp());
}

MutableOperandRange CrossEntropyBackwardOp::getDpsInitsMutable() {
  return getTrailingInits(*this, {getGradLogits()});
}

void CrossEntropyBackwardOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  getDestinationStyleEffects(*this, effects);
}

LogicalResult CrossEntropyBackwardOp::verify() {
  if (failed(verifyTensorsOrBuffers(*this, getDpsInits())) ||
      failed(verifyCrossEntropyShapes(*this, getReduction(),
                                      getLabelSmoothing().convertToFloat(),
                                      getLogits(), getTarget(), getGradLoss(),
                                      "grad_loss", getLogsumexp())))
    return failure();
  if (getLogits().getType() != getGradLogits().getType() &&
      (getElementTypeOrSelf(getLogits().getType()) !=
           getElementTypeOrSelf(getGradLogits().getType()) ||
       failed(checkShape(*this, getGradLogits(), "grad_logits",
                         cast<ShapedType>(getLogits().getType()).getShape()))))
    return emitOpError() << "grad_logits has type " << getGradLogits().getType()
                         << "; expected the logits' shape and element type ("
                         << getLogits().getType() << ")";
  return success();
}

//===----------------------------------------------------------------------===//
// Fused linear head and cross-entropy
//===----------------------------------------------------------------------===//

MutableOperandRange LinearCrossEntropyOp::getDpsInitsMutable() {
  return getTrailingInits(*this, {getLoss(), getLogits(), getLogsumexp(),
                                  getGradInput(), getGradWeight()});
}

void LinearCrossEntropyOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  getDestinationStyleEffects(*this, effects);
}

int64_t LinearCrossEntropyOp::getRows() { return getDim(getInput(), 0); }
int64_t LinearCrossEntropyOp::getK() { return getDim(getInput(), 1); }
int64_t LinearCrossEntropyOp::getClasses() {
  return getDim(getWeight(), getTransposeWeight() ? 0 : 1);
}
int64_t LinearCrossEntropyOp::getChunkRows() { return getDim(getLogits(), 0); }

LogicalResult LinearCrossEntropyOp::verify() {
  if (failed(verifyTensorsOrBuffers(*this, getDpsInits())))
    return failure();
  if (getReduction() == LossReduction::None)
    return emitOpError() << "takes reduction mean or sum: a loss per row "
                            "(none) has a gradient per row, known only "
                            "after the forward";
  float smoothing = getLabelSmoothing().convertToFloat();
  if (!(smoothing >= 0.0f && smoothing <= 1.0f))
    return emitOpError() << "label_smoothing " << smoothing
                         << " is not in [0, 1]";
  Type storage = getElementTypeOrSelf(getInput().getType());
  if (getElementTypeOrSelf(getWeight().getType()) != storage ||
      getElementTypeOrSelf(getLogits().getType()) != storage)
    return emitOpError() << "takes its input, weight and logits in one type; "
                            "got "
                         << getInput().getType() << ", "
                         << getWeight().getType() << " and "
                         << getLogits().getType();
  int64_t rows = getRows(), k = getK(), classes = getClasses();
  int64_t chunk = getChunkRows();
  if (!ShapedType::isDynamic(chunk) &&
      (chunk < 1 || (rows > 0 && chunk > rows)))
    return emitOpError() << "takes a logits workspace of 1 to " << rows
                         << " rows (one chunk of the input's rows), not "
                         << chunk;
  SmallVector<int64_t> weight = {k, classes}, gradWeight = {k, classes};
  if (getTransposeWeight())
    std::swap(weight[0], weight[1]);
  if (getTransposeGradWeight())
    std::swap(gradWeight[0], gradWeight[1]);
  return success(
      succeeded(checkShape(*this, getWeight(), "weight", weight)) &&
      succeeded(checkShape(*this, getTarget(), "target", {rows})) &&
      succeeded(checkShape(*this, getLogits(), "logits", {chunk, classes})) &&
      succeeded(checkShape(*this, getLogsumexp(), "logsumexp", {rows})) &&
      succeeded(checkShape(*this, getGradInput(), "grad_input", {rows, k})) &&
      succeeded(checkShape(*this, getGradWeight(), "grad_weight", gradWeight)));
}

//===----------------------------------------------------------------------===//
// Grouped products
//===----------------------------------------------------------------------===//

/// Checks what both grouped ops share: one element type for the matrices,
/// `groups` offsets and a `[rows, ...]` second matrix.
static LogicalResult verifyGroupedOperands(Operation *op, Value input,
                                           Value rowsOperand, StringRef what,
                                           Value offsets, Value grouped) {
  Type type = getElementTypeOrSelf(input.getType());
  for (Value operand : {rowsOperand, grouped})
    if (getElementTypeOrSelf(operand.getType()) != type)
      return op->emitOpError()
             << "mixes element types " << type << " and "
             << getElementTypeOrSelf(operand.getType())
             << "; the input, the matrices and the result share one type";
  if (failed(checkShape(op, rowsOperand, what,
                        {getDim(input, 0), ShapedType::kDynamic})))
    return failure();
  return checkShape(op, offsets, "offsets", {getDim(grouped, 0)});
}

MutableOperandRange GroupedMatmulOp::getDpsInitsMutable() {
  return getTrailingInits(*this, {getOutput()});
}

int64_t GroupedMatmulOp::getRows() { return getDim(getInput(), 0); }
int64_t GroupedMatmulOp::getK() { return getDim(getInput(), 1); }
int64_t GroupedMatmulOp::getN() { return getDim(getOutput(), 1); }
int64_t GroupedMatmulOp::getGroups() { return getDim(getWeight(), 0); }

void GroupedMatmulOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  getDestinationStyleEffects(*this, effects);
}

LogicalResult GroupedMatmulOp::verify() {
  if (failed(verifyTensorsOrBuffers(*this, getDpsInits())) ||
      failed(verifyGroupedOperands(*this, getInput(), getOutput(), "output",
                                   getOffsets(), getWeight())))
    return failure();
  SmallVector<int64_t> weight = {getGroups(), getK(), getN()};
  if (getTransposeWeight())
    std::swap(weight[1], weight[2]);
  return checkShape(*this, getWeight(),
                    getTransposeWeight() ? "weight ([groups, N, K])"
                                         : "weight ([groups, K, N])",
                    weight);
}

MutableOperandRange GroupedMatmulWeightGradOp::getDpsInitsMutable() {
  return getTrailingInits(*this, {getGradWeight()});
}

int64_t GroupedMatmulWeightGradOp::getRows() { return getDim(getInput(), 0); }
int64_t GroupedMatmulWeightGradOp::getK() { return getDim(getInput(), 1); }
int64_t GroupedMatmulWeightGradOp::getN() { return getDim(getGradOutput(), 1); }
int64_t GroupedMatmulWeightGradOp::getGroups() {
  return getDim(getGradWeight(), 0);
}

void GroupedMatmulWeightGradOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  getDestinationStyleEffects(*this, effects);
}

LogicalResult GroupedMatmulWeightGradOp::verify() {
  if (failed(verifyTensorsOrBuffers(*this, getDpsInits())) ||
      failed(verifyGroupedOperands(*this, getInput(), getGradOutput(),
                                   "grad_output", getOffsets(),
                                   getGradWeight())))
    return failure();
  SmallVector<int64_t> grad = {getGroups(), getK(), getN()};
  if (getTransposeWeight())
    std::swap(grad[1], grad[2]);
  return checkShape(*this, getGradWeight(),
                    getTransposeWeight() ? "grad_weight ([groups, N, K])"
                                         : "grad_weight ([groups, K, N])",
                    grad);
}

//===----------------------------------------------------------------------===//
// Expert parallelism
//===----------------------------------------------------------------------===//

/// Communication (never reordered against other collectives, never erased
/// on tensors) plus the reads and writes of the buffers.
template <typename OpTy>
static void getExchangeEffects(
    OpTy op, SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
                 &effects) {
  effects.emplace_back(MemoryEffects::Read::get(), CommResource::get());
  effects.emplace_back(MemoryEffects::Write::get(), CommResource::get());
  getDestinationStyleEffects(op, effects);
}

/// `experts` experts split over `groupSize` ranks.
static LogicalResult verifyExpertSplit(Operation *op, int64_t experts,
                                       int64_t groupSize) {
  if (experts % groupSize != 0)
    return op->emitOpError()
           << "splits " << experts << " experts over expert groups of "
           << groupSize << " ranks; the group size must divide the experts";
  return success();
}

MutableOperandRange ExpertRoutingOp::getDpsInitsMutable() {
  return getTrailingInits(*this, {getRouting(), getLocalEnds()});
}

int64_t ExpertRoutingOp::getExperts() { return getDim(getEnds(), 0); }
int64_t ExpertRoutingOp::getLocalExperts() { return getDim(getLocalEnds(), 0); }

void ExpertRoutingOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  getExchangeEffects(*this, effects);
}

LogicalResult ExpertRoutingOp::verify() {
  if (failed(verifyTensorsOrBuffers(*this, getDpsInits())) ||
      failed(verifyExpertSplit(*this, getExperts(), getGroupSize())))
    return failure();
  if (getElementTypeOrSelf(getLocalEnds().getType()) !=
      getElementTypeOrSelf(getEnds().getType()))
    return emitOpError() << "writes local_ends of another type than ends ("
                         << getEnds().getType() << ")";
  return success(
      succeeded(checkShape(*this, getRouting(), "routing", {getExperts()})) &&
      succeeded(
          checkShape(*this, getLocalEnds(), "local_ends",
                     {static_cast<int64_t>(getExperts() / getGroupSize())})));
}

namespace {
/// In a group of one rank the local ends are the ends, and an unused
/// routing needs no exchange.
struct FoldSingleRankRouting : public OpRewritePattern<ExpertRoutingOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ExpertRoutingOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getGroupSize() != 1 || op.getResults().size() != 2 ||
        !op.getResult(0).use_empty())
      return failure();
    rewriter.replaceAllUsesWith(op.getResult(1), op.getEnds());
    rewriter.eraseOp(op);
    return success();
  }
};
} // namespace

void ExpertRoutingOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                                  MLIRContext *context) {
  results.add<FoldSingleRankRouting>(context);
}

/// Checks a dispatch's or combine's operands: one row type, `[experts]`
/// ends and routing, and the rows it sends (`sent`, `[rows, D]`) against
/// those it receives (`received`, `[capacity, D]`): the same in a group of
/// one rank.
template <typename OpTy>
static LogicalResult verifyRowExchange(OpTy op, Value sent, Value received) {
  if (failed(verifyTensorsOrBuffers(op, op.getDpsInits())))
    return failure();
  Type type = getElementTypeOrSelf(op.getInput().getType());
  if (getElementTypeOrSelf(op.getOutput().getType()) != type)
    return op.emitOpError()
           << "moves rows of " << type << " into " << op.getOutput().getType();
  int64_t experts = getDim(op.getEnds(), 0), rows = getDim(sent, 0);
  if (failed(verifyExpertSplit(op, experts, op.getGroupSize())) ||
      failed(checkShape(op, op.getRouting(), "routing", {experts})) ||
      failed(checkShape(op, received, "the received rows",
                        {op.getGroupSize() == 1 ? rows : ShapedType::kDynamic,
                         getDim(sent, 1)})))
    return failure();
  return success();
}

/// A group of one rank moves nothing: the rows are the result.
template <typename OpTy>
static LogicalResult
foldSingleRankExchange(OpTy op, SmallVectorImpl<OpFoldResult> &out) {
  if (op.getGroupSize() != 1 || op.getResults().empty() ||
      op.getInput().getType() != op.getResults()[0].getType())
    return failure();
  out.push_back(op.getInput());
  return success();
}

MutableOperandRange ExpertDispatchOp::getDpsInitsMutable() {
  return getTrailingInits(*this, {getOutput()});
}

void ExpertDispatchOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  getExchangeEffects(*this, effects);
}

LogicalResult ExpertDispatchOp::verify() {
  return verifyRowExchange(*this, getInput(), getOutput());
}

LogicalResult ExpertDispatchOp::fold(FoldAdaptor,
                                     SmallVectorImpl<OpFoldResult> &results) {
  return foldSingleRankExchange(*this, results);
}

MutableOperandRange ExpertCombineOp::getDpsInitsMutable() {
  return getTrailingInits(*this, {getOutput()});
}

void ExpertCombineOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  getExchangeEffects(*this, effects);
}

LogicalResult ExpertCombineOp::verify() {
  return verifyRowExchange(*this, getOutput(), getInput());
}

LogicalResult ExpertCombineOp::fold(FoldAdaptor,
                                    SmallVectorImpl<OpFoldResult> &results) {
  return foldSingleRankExchange(*this, results);
}
