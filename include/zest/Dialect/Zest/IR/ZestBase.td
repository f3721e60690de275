//===- ZestBase.td - Zest dialect, enums, attributes, types -*- tablegen -*-===//
//
// The `zest` dialect models compile-time ZeRO-3 / FSDP: parameters grouped
// into units with a flat, padded layout, sharded across data-parallel ranks,
// and the collectives that move unit buffers between ranks.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_DIALECT_ZEST_IR_ZESTBASE_TD
#define ZEST_DIALECT_ZEST_IR_ZESTBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/SideEffectInterfaceBase.td"

def Zest_Dialect : Dialect {
  let name = "zest";
  let cppNamespace = "::mlir::zest";
  let summary = "Compile-time parameter sharding for data-parallel training";
  let description = [{
    The `zest` dialect describes how a model's parameters are grouped into
    *units* (FSDP's FlatParameter, DeepSpeed's leaf modules), how each unit is
    laid out as one flat buffer padded to a multiple of the world size, and
    the collective operations that gather, reduce-scatter and all-reduce those
    buffers across data-parallel ranks.

    A unit is declared once at module level with `zest.unit`; every other op
    refers to it by symbol, and its verifier checks shapes and element types
    against that declaration. Collectives exist in a synchronous form and an
    asynchronous `*_start` / `zest.wait` form so that scheduling passes can
    overlap communication with compute. Collectives are never `Pure`: two
    gathers of the same shard (say, forward and backward) are distinct events
    and must not be merged by CSE.

    Function argument and result attributes used by the dialect:

    * `zest.param = "<fqn>"` (input contract): the argument is a parameter.
    * `zest.grad = "<fqn>"` (input contract): the result is the gradient of
      the named parameter.
    * `zest.loss` (input contract): the result is the loss.
    * `zest.rng` (input contract): the argument, a `tensor<2xi64>`, holds
      the micro-batch's random-stream coordinates, filled by the runtime:
      the step's key (from the seed and the step number) and the index of
      the micro-batch's first sample within the step's global batch.
    * `zest.index_bound = {bound = N, table = "fqn", ignore = -100}` (input
      contract, optional): the data argument, of integer type, indexes a
      table of N rows (an embedding's ids, a loss's targets): every value
      must lie in [0, N), or equal `ignore` where given. `table` names the
      table's parameter for messages. The executable checks every batch
      against it before the first step (runtime/trainer).
    * `zest.unit = @u` (after sharding): the argument holds this rank's part
      of unit `u`'s flat buffer (its shard, or the whole buffer for a
      replicated unit).
    * `zest.unit_grad = @u` (after sharding): the result holds this rank's
      part of unit `u`'s flat gradient, averaged over ranks.
    * `zest.optimizer_state = {unit = @u, name = "exp_avg"}` (after
      `zest-insert-optimizer`): the argument is optimizer state of unit `u`
      (same layout as its shard); `zest.grad_accum = @u`: the argument
      accumulates `u`'s gradient shard over micro-batches;
      `zest.hyper`: the argument holds the optimizer hyperparameters
      (`zest_hyper_t` in `runtime/include/zest_runtime.h`);
      `zest.updated = @u` on a result: the new value of the unit, state or
      accumulator argument of the same role (written in place);
      `zest.grad_norm` on a result (with clipping): the global gradient
      norm before clipping, a `tensor<f32>`.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let extraClassDeclaration = [{
    // Names of the discardable attributes of the input contract and of the
    // sharded program (see the dialect description).
    static constexpr ::llvm::StringLiteral kParamAttrName = "zest.param";
    static constexpr ::llvm::StringLiteral kGradAttrName = "zest.grad";
    static constexpr ::llvm::StringLiteral kLossAttrName = "zest.loss";
    static constexpr ::llvm::StringLiteral kRngAttrName = "zest.rng";
    static constexpr ::llvm::StringLiteral kIndexBoundAttrName =
        "zest.index_bound";
    // On a parameter argument, from zest-expert-parallel: the argument (and
    // its gradient) holds this rank's experts, 1 / N of the parameter's
    // first dimension, for expert groups of N ranks.
    static constexpr ::llvm::StringLiteral kExpertParallelAttrName =
        "zest.expert_parallel";
    static constexpr ::llvm::StringLiteral kModuleClassesAttrName =
        "zest.module_classes";
    // On the module, from zest-group-units: how the units were chosen, in
    // words, for the report.
    static constexpr ::llvm::StringLiteral kUnitPolicyAttrName =
        "zest.unit_policy";
    static constexpr ::llvm::StringLiteral kUnitArgAttrName = "zest.unit";
    static constexpr ::llvm::StringLiteral kUnitGradAttrName = "zest.unit_grad";
    static constexpr ::llvm::StringLiteral kOptimizerStateAttrName =
        "zest.optimizer_state";
    static constexpr ::llvm::StringLiteral kGradAccumAttrName =
        "zest.grad_accum";
    // Gradient accumulation without a reduce per micro-batch (no_sync): a
    // unit's full flat gradient summed over the micro-batches so far, and
    // the accumulate-only entry point of a training step.
    static constexpr ::llvm::StringLiteral kGradSumAttrName = "zest.grad_sum";
    static constexpr ::llvm::StringLiteral kAccumulateForAttrName =
        "zest.accumulate_for";
    static constexpr ::llvm::StringLiteral kHyperAttrName = "zest.hyper";
    static constexpr ::llvm::StringLiteral kUpdatedAttrName = "zest.updated";
    // On a training step's result, from zest-insert-optimizer with
    // clipping: the global gradient norm before clipping (what
    // clip_grad_norm_ returns), for the metrics.
    static constexpr ::llvm::StringLiteral kGradNormAttrName =
        "zest.grad_norm";
    static constexpr ::llvm::StringLiteral kOptimizerAttrName =
        "zest.optimizer";
    // On a sharded `zest.unit`: what zest-schedule-collectives decided (its
    // gathers' prefetch depth; kept gathered from forward to backward).
    static constexpr ::llvm::StringLiteral kPrefetchAttrName = "zest.prefetch";
    static constexpr ::llvm::StringLiteral kKeepAttrName = "zest.keep";
    // On a sharded `zest.unit`: its forward is recomputed before its
    // backward (zest-checkpoint-activations: "full" or "selective").
    static constexpr ::llvm::StringLiteral kCheckpointAttrName =
        "zest.checkpoint";
    // Offload (zest-offload-optimizer): on an entry point's argument, it
    // lives in pinned host memory, not on the device; `zest.stage` marks a
    // host argument that only receives copies (a gradient or the
    // hyperparameters on their way to the host update).
    static constexpr ::llvm::StringLiteral kHostArgAttrName = "zest.host";
    // On a `zest.unit` offloaded to the host: "optimizer" or "params" (for
    // the report).
    static constexpr ::llvm::StringLiteral kOffloadAttrName = "zest.offload";
    // On a `zest.unit`, from zest-describe-model (for the report): bytes of
    // the entry points' arguments holding its optimizer state and its
    // gradient accumulators, {optimizer_state, accumulators}; outside the
    // pool, so the memory plan's buffers do not show them.
    static constexpr ::llvm::StringLiteral kArgumentBytesAttrName =
        "zest.argument_bytes";
    static constexpr ::llvm::StringLiteral kStageArgAttrName = "zest.stage";
    // On a function zest-outline-kernels made from computation on host
    // buffers only (the offloaded optimizer): it runs on the host.
    static constexpr ::llvm::StringLiteral kHostKernelAttrName =
        "zest.host_kernel";
    // On a function zest-outline-kernels made: it holds only computation on
    // the buffers it is given (what zest-map-kernels-to-gpu runs on a GPU).
    static constexpr ::llvm::StringLiteral kKernelAttrName = "zest.kernel";
    // On an `scf.for` of a kernel, from zest-outline-kernels to
    // zest-map-kernels-to-gpu: the loop's one elementwise op touches each
    // element position of its operands' rows in every iteration and no
    // other position, so a thread per position may run the whole loop.
    static constexpr ::llvm::StringLiteral kPerPositionLoopAttrName =
        "zest.per_position_loop";
    // On an `scf.execute_region` without results, from zest-fuse-rows to
    // zest-outline-kernels and zest-map-kernels-to-gpu: its linalg ops touch
    // the memory they share row by row (the attribute's value is the row
    // count), so one block of threads per row may run them all in order.
    static constexpr ::llvm::StringLiteral kRowKernelAttrName =
        "zest.row_kernel";
    // On a kernel: positions of the LLVM arguments (aligned pointers of
    // buffer descriptors) that no other argument aliases.
    static constexpr ::llvm::StringLiteral kNoAliasPointersAttrName =
        "zest.noalias_pointers";
    // On the module, from zest-outline-kernels (device buffers) to the
    // executable's profile table: each kernel's bytes read, bytes written
    // and operations per launch, by name.
    static constexpr ::llvm::StringLiteral kKernelWorkAttrName =
        "zest.kernel_work";
    // On the module, from zest-describe-model to the translation: the model
    // descriptor the host driver reads (docs/Runtime.md), and the entry
    // points in its order, each with the argument count of its C interface.
    static constexpr ::llvm::StringLiteral kModelDescriptorAttrName =
        "zest.model_descriptor";
    static constexpr ::llvm::StringLiteral kEntryPointsAttrName =
        "zest.entry_points";
  }];
}

//===----------------------------------------------------------------------===//
// Side-effect resources
//===----------------------------------------------------------------------===//

// The communicator: every collective reads and writes it, so collectives are
// never CSE'd, never dropped as dead, and keep their relative order (all ranks
// must issue collectives in the same order).
def Zest_CommResource : Resource<"::mlir::zest::CommResource">;

// The pool of gathered-parameter buffers: releases free memory from it.
def Zest_GatherPoolResource : Resource<"::mlir::zest::GatherPoolResource">;

// Copies between host and device memory (offload): ordered, never dropped.
def Zest_HostCopyResource : Resource<"::mlir::zest::HostCopyResource">;

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Zest_UnitKindAttr : I32EnumAttr<"UnitKind", "how a unit is distributed", [
    I32EnumAttrCase<"Sharded", 0, "sharded">,
    I32EnumAttrCase<"Replicated", 1, "replicated">
  ]> {
  let cppNamespace = "::mlir::zest";
}

def Zest_ReductionAttr : I32EnumAttr<"Reduction", "reduction of a collective", [
    I32EnumAttrCase<"Sum", 0, "sum">,
    I32EnumAttrCase<"Avg", 1, "avg">
  ]> {
  let cppNamespace = "::mlir::zest";
}

// How a loss combines its rows (PyTorch's `reduction`): the mean over the
// rows not ignored, their sum, or one loss per row. The values are those of
// the runtime's ZEST_LOSS_* constants.
def Zest_LossReductionAttr : I32EnumAttr<"LossReduction",
                                         "reduction of a loss over rows", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Mean", 1, "mean">,
    I32EnumAttrCase<"Sum", 2, "sum">
  ]> {
  let cppNamespace = "::mlir::zest";
}

def Zest_OptimizerAttr : I32EnumAttr<"Optimizer", "optimizer of a unit update", [
    I32EnumAttrCase<"SGD", 0, "sgd">,
    I32EnumAttrCase<"AdamW", 1, "adamw">
  ]> {
  let cppNamespace = "::mlir::zest";
}

// How units are distributed and re-gathered (FSDP's ShardingStrategy): the
// `strategy` of zest-group-units, zest-schedule-collectives, zest-front and
// zestc, parsed once into this enum.
def Zest_ShardingStrategyEnum : I32EnumAttr<"ShardingStrategy",
                                            "sharding strategy", [
    I32EnumAttrCase<"FullShard", 0, "full-shard">,
    I32EnumAttrCase<"ShardGradOp", 1, "shard-grad-op">,
    I32EnumAttrCase<"NoShard", 2, "no-shard">,
    I32EnumAttrCase<"HybridShard", 3, "hybrid-shard">
  ]> {
  let cppNamespace = "::mlir::zest";
  let genSpecializedAttr = 0;
}

// What a unit keeps of its forward for its backward (activation
// checkpointing): the `mode` of zest-checkpoint-activations and zestc's
// --activation-checkpointing.
def Zest_CheckpointModeEnum : I32EnumAttr<"CheckpointMode",
                                          "activation checkpointing", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Full", 1, "full">,
    I32EnumAttrCase<"Selective", 2, "selective">
  ]> {
  let cppNamespace = "::mlir::zest";
  let genSpecializedAttr = 0;
}

// What of a unit lives in pinned host memory instead of on the device:
// zestc's --offload (cuda targets).
def Zest_OffloadModeEnum : I32EnumAttr<"OffloadMode", "offload", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Optimizer", 1, "optimizer">,
    I32EnumAttrCase<"Params", 2, "params">
  ]> {
  let cppNamespace = "::mlir::zest";
  let genSpecializedAttr = 0;
}

// The 16-bit type of mixed-precision collectives (FSDP's
// MixedPrecision.param_dtype / reduce_dtype over f32 units).
def Zest_WireTypeEnum : I32EnumAttr<"WireType",
                                    "element type of mixed-precision collectives", [
    I32EnumAttrCase<"F32", 0, "f32">,
    I32EnumAttrCase<"BF16", 1, "bf16">,
    I32EnumAttrCase<"F16", 2, "f16">
  ]> {
  let cppNamespace = "::mlir::zest";
  let genSpecializedAttr = 0;
}

// Values match `zest_activation_t` in runtime/include/zest_runtime.h.
def Zest_ActivationAttr : I32EnumAttr<"Activation",
                                      "activation of a fused linear op", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Relu", 1, "relu">,
    I32EnumAttrCase<"GeluTanh", 2, "gelu_tanh">,
    I32EnumAttrCase<"GeluErf", 3, "gelu_erf">,
    I32EnumAttrCase<"Silu", 4, "silu">
  ]> {
  let cppNamespace = "::mlir::zest";
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

class Zest_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Zest_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Zest_ParamAttr : Zest_Attr<"Param", "param"> {
  let summary = "one parameter inside a unit's flat buffer";
  let description = [{
    A parameter of a unit: its fully qualified name (as in a PyTorch
    `state_dict`), its tensor type, and the element offset at which it starts
    in the unit's flat buffer. Parameters are stored row-major and
    contiguously, so the parameter occupies
    `[offset, offset + numel(type))`.

    ```mlir
    #zest.param<"layers.0.fc1.weight" : tensor<16x8xf32> at 0>
    ```
  }];
  let parameters = (ins StringRefParameter<"fully qualified name">:$name,
                        "::mlir::RankedTensorType":$valueType,
                        "int64_t":$offset);
  let assemblyFormat = "`<` $name `:` $valueType `at` $offset `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Number of elements of the parameter.
    int64_t getNumElements() const { return getValueType().getNumElements(); }
    /// One past the last element of the parameter in the flat buffer.
    int64_t getEnd() const { return getOffset() + getNumElements(); }
  }];
}

def Zest_ParamArrayAttr
    : TypedArrayAttrBase<Zest_ParamAttr, "array of unit parameters">;

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

class Zest_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Zest_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def Zest_FutureType : Zest_Type<"Future", "future"> {
  let summary = "the pending result of an asynchronous collective";
  let description = [{
    Produced by a `*_start` collective and consumed by exactly one
    `zest.wait`, which yields the tensor of type `valueType`. Between the two,
    the transfer may overlap with computation.

    ```mlir
    !zest.future<tensor<1024xf32>>
    ```
  }];
  let parameters = (ins "::mlir::RankedTensorType":$valueType);
  let assemblyFormat = "`<` $valueType `>`";
}

#endif // ZEST_DIALECT_ZEST_IR_ZESTBASE_TD
