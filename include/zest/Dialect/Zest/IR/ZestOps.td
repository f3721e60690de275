//===- ZestOps.td - Zest dialect operations ----------------*- tablegen -*-===//

#ifndef ZEST_DIALECT_ZEST_IR_ZESTOPS_TD
#define ZEST_DIALECT_ZEST_IR_ZESTOPS_TD

include "zest/Dialect/Zest/IR/ZestBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/DestinationStyleOpInterface.td"

class Zest_Op<string mnemonic, list<Trait> traits = []>
    : Op<Zest_Dialect, mnemonic, traits>;

// A static 1-D tensor: the only shape a flat unit buffer or shard has.
def Zest_FlatTensor : 1DTensorOf<[AnyType]> {
  let predicate = And<[1DTensorOf<[AnyType]>.predicate,
                       CPred<"::llvm::cast<::mlir::ShapedType>($_self)"
                             ".hasStaticShape()">]>;
  let summary = "statically shaped 1-D tensor";
}

// No C++ class on purpose: the assembly then spells out `!zest.future<...>`
// instead of the stripped `<...>`.
def Zest_Future : Type<CPred<"::llvm::isa<::mlir::zest::FutureType>($_self)">,
                       "future">;

//===----------------------------------------------------------------------===//
// zest.unit
//===----------------------------------------------------------------------===//

def Zest_UnitOp : Zest_Op<"unit", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "declares a unit: parameters gathered and sharded together";
  let description = [{
    A unit is a group of parameters that live in one flat buffer of
    `padded_size` elements of `element_type` (FSDP's FlatParameter). The
    parameters are listed in flat order with their offsets. The buffer is
    padded to a multiple of `world_size`.

    * `sharded`: rank `r` owns elements `[r * shard_size, (r + 1) *
      shard_size)`; `padded_size == shard_size * world_size`.
    * `replicated`: every rank holds the whole buffer (ignored parameters,
      NO_SHARD); `shard_size == padded_size`.

    With `replicas = R` (hybrid sharding, HSDP) the job runs `R` copies of
    this layout on `R * world_size` ranks arranged as an `R x world_size`
    mesh: rank `q * world_size + r` holds shard `r` of replica `q`. Gathers
    and reduce-scatters run within a replica; a sharded unit's gradient
    shard is then all-reduced across the replicas (`zest.all_reduce ...
    across_replicas`), a replicated unit's gradient over all ranks.

    Mixed precision (FSDP's `MixedPrecision`, DeepSpeed's bf16
    communication): `gather_type` (bf16 or f16) makes the unit's gathers
    send its f32 shards rounded to that type, half the bytes on the wire,
    and widen what they receive; `reduce_type` does the same for its
    gradient reductions. The shards (the optimizer's master copy) and the
    computation stay in `element_type`, which must then be f32.

    Expert parallelism (`experts`, from `zest-group-units` for parameters
    `zest-expert-parallel` split): a sharded unit of one experts'
    parameter `[E, ...]` over the `world_size` ranks of an expert group,
    each shard whole experts. It is never gathered: rank `r` computes with
    its shard (`r` its rank in the group), and its gradient shard, computed
    from every row the group routed to its experts, is divided by the
    group's size and then averaged across the `replicas` groups.

    ```mlir
    zest.unit @layers.0 sharded : f32, world_size = 4,
        padded_size = 528, shard_size = 132 [
      "layers.0.fc.weight" : tensor<16x32xf32> at 0,
      "layers.0.fc.bias" : tensor<16xf32> at 512
    ] {gather_type = bf16}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       Zest_UnitKindAttr:$kind,
                       TypeAttr:$element_type,
                       ConfinedAttr<I64Attr, [IntMinValue<1>]>:$world_size,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntMinValue<1>]>>
                           :$replicas,
                       ConfinedAttr<I64Attr, [IntMinValue<0>]>:$padded_size,
                       ConfinedAttr<I64Attr, [IntMinValue<0>]>:$shard_size,
                       Zest_ParamArrayAttr:$params,
                       OptionalAttr<TypeAttr>:$gather_type,
                       OptionalAttr<TypeAttr>:$reduce_type,
                       UnitAttr:$experts);
  let assemblyFormat = [{
    $sym_name $kind `:` $element_type `,` `world_size` `=` $world_size `,`
    (`replicas` `=` $replicas^ `,`)? `padded_size` `=` $padded_size `,` `shard_size` `=` $shard_size
    custom<UnitParams>($params) attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Returns the parameter named `fqn`, or null.
    ParamAttr lookupParam(::llvm::StringRef fqn);
    /// Total elements of all parameters (without padding).
    int64_t getNumElements();
    /// The type of the full flat buffer: tensor<padded_size x element_type>.
    ::mlir::RankedTensorType getFlatType();
    /// The type of one rank's part: tensor<shard_size x element_type>.
    ::mlir::RankedTensorType getShardType();
    bool isSharded() { return getKind() == UnitKind::Sharded; }
    /// Copies of the layout (hybrid sharding's replica groups), 1 without.
    int64_t getNumReplicas() { return getReplicas().value_or(1); }
    /// Ranks the job runs on: world_size ranks per replica.
    int64_t getNumRanks() { return getWorldSize() * getNumReplicas(); }
    /// This rank's part of the unit's only parameter, `[E / world_size,
    /// ...]`, for an expert-parallel unit.
    ::mlir::RankedTensorType getLocalExpertsType();
  }];
}

//===----------------------------------------------------------------------===//
// zest.bucket
//===----------------------------------------------------------------------===//

def Zest_BucketOp : Zest_Op<"bucket", [
    Symbol, HasParent<"::mlir::ModuleOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "declares a bucket: units moved by one collective";
  let description = [{
    A bucket names two or more units of the same kind, element type and
    mesh whose buffers one collective moves together (SimpleFSDP's and
    DDP's bucketing: fewer, larger transfers). A collective `for` a bucket
    works on the concatenation that `zest.pack` builds: its shard is the
    members' shards one after the other (`shard_size` is their sum), its
    full buffer holds, for each rank in turn, every member's part of that
    rank (`padded_size` is the sum of theirs). The units keep their own
    layout; the bucket exists only between `zest.pack` and `zest.unpack`.

    ```mlir
    zest.bucket @bucket0 [@layers.0.norm, @layers.0.attn]
    %b = zest.pack %s0, %s1 pieces 1 : tensor<8xf32>, tensor<132xf32>
        -> tensor<140xf32>
    %g = zest.all_gather %b for @bucket0 : tensor<140xf32> -> tensor<560xf32>
    %f0, %f1 = zest.unpack %g pieces 4 : tensor<560xf32>
        -> tensor<32xf32>, tensor<528xf32>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypedArrayAttrBase<FlatSymbolRefAttr,
                                          "unit references">:$units);
  let assemblyFormat = "$sym_name $units attr-dict";
}

//===----------------------------------------------------------------------===//
// Views between a flat buffer and its parameters
//===----------------------------------------------------------------------===//

def Zest_UnflattenOp : Zest_Op<"unflatten", [
    Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "view of one parameter inside a full flat unit buffer";
  let description = [{
    Returns the parameter `param` of unit `unit` from the full (gathered, or
    replicated) flat buffer: elements `[offset, offset + numel)` reshaped to
    the parameter's type. Bufferizes to a view, not a copy.

    ```mlir
    %w = zest.unflatten %full, @layers.0, "layers.0.fc.weight"
        : tensor<528xf32> -> tensor<16x32xf32>
    ```
  }];
  let arguments = (ins Zest_FlatTensor:$flat, FlatSymbolRefAttr:$unit,
                       StrAttr:$param);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $flat `,` $unit `,` $param attr-dict `:` type($flat) `->` type($result)
  }];
}

def Zest_FlattenOp : Zest_Op<"flatten", [
    Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "packs per-parameter tensors into a full flat unit buffer";
  let description = [{
    Builds the full flat buffer of `unit` from tensors for some of its
    parameters, named in `params` (one name per operand, any order, each at
    most once). Elements of parameters not named (frozen parameters) and the
    padding are zero. Used to flatten gradients before a reduce-scatter.

    ```mlir
    %g = zest.flatten @layers.0 ["layers.0.fc.weight", "layers.0.fc.bias"]
        (%dw, %db) : tensor<16x32xf32>, tensor<16xf32> -> tensor<528xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$unit, StrArrayAttr:$params,
                       Variadic<AnyStaticShapeTensor>:$values);
  let results = (outs Zest_FlatTensor:$result);
  let assemblyFormat = [{
    $unit $params ` ` `(` $values `)` attr-dict `:` type($values) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

// Common traits: collectives touch the communicator (never Pure, never CSE'd)
// and are checked against their unit declaration. `unit` may also name a
// `zest.bucket`: the collective then moves the members' packed buffers.
class Zest_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Zest_Op<mnemonic, !listconcat(traits, [
        MemoryEffects<[MemRead<Zest_CommResource>,
                       MemWrite<Zest_CommResource>]>,
        DeclareOpInterfaceMethods<SymbolUserOpInterface>])> {
  let hasVerifier = 1;
}

def Zest_AllGatherOp : Zest_CollectiveOp<"all_gather"> {
  let summary = "gathers a unit's shards into its full flat buffer";
  let description = [{
    Every rank contributes its shard (`shard_size` elements); every rank gets
    the full flat buffer (`padded_size` elements) in rank order. The unit must
    be `sharded`.

    ```mlir
    %full = zest.all_gather %shard for @layers.0
        : tensor<132xf32> -> tensor<528xf32>
    ```
  }];
  let arguments = (ins Zest_FlatTensor:$shard, FlatSymbolRefAttr:$unit);
  let results = (outs Zest_FlatTensor:$result);
  let assemblyFormat = [{
    $shard `for` $unit attr-dict `:` type($shard) `->` type($result)
  }];
}

def Zest_ReduceScatterOp : Zest_CollectiveOp<"reduce_scatter"> {
  let summary = "reduces full flat buffers over ranks, keeps the local shard";
  let description = [{
    Reduces (sums, or averages over the world size) the full flat buffers of
    all ranks elementwise; rank `r` receives elements `[r * shard_size,
    (r + 1) * shard_size)` of the result. The unit must be `sharded`.

    ```mlir
    %gshard = zest.reduce_scatter avg %gfull for @layers.0
        : tensor<528xf32> -> tensor<132xf32>
    ```
  }];
  let arguments = (ins Zest_ReductionAttr:$reduction, Zest_FlatTensor:$input,
                       FlatSymbolRefAttr:$unit);
  let results = (outs Zest_FlatTensor:$result);
  let assemblyFormat = [{
    $reduction $input `for` $unit attr-dict `:` type($input) `->`
    type($result)
  }];
}

def Zest_AllReduceOp : Zest_CollectiveOp<"all_reduce", [
    AllTypesMatch<["input", "result"]>]> {
  let summary = "reduces full flat buffers over ranks, every rank gets all";
  let description = [{
    Sums or averages the full flat buffers of all ranks elementwise; every
    rank receives the whole result. Used for replicated units.

    With `across_replicas` (hybrid sharding) the operand is the reduced
    gradient shard of a sharded unit with `replicas` > 1, and the reduction
    runs over the ranks holding the same shard, one per replica.

    ```mlir
    %g = zest.all_reduce avg %gfull for @ignored : tensor<64xf32>
    %s = zest.all_reduce avg %gshard for @layers.0 across_replicas
        : tensor<132xf32>
    ```
  }];
  let arguments = (ins Zest_ReductionAttr:$reduction, Zest_FlatTensor:$input,
                       FlatSymbolRefAttr:$unit, UnitAttr:$across_replicas);
  let results = (outs Zest_FlatTensor:$result);
  let assemblyFormat = [{
    $reduction $input `for` $unit (`across_replicas` $across_replicas^)?
    attr-dict `:` type($input)
  }];
}

//===----------------------------------------------------------------------===//
// zest.optimization_barrier
//===----------------------------------------------------------------------===//

def Zest_OptimizationBarrierOp : Zest_Op<"optimization_barrier", [
    AllTypesMatch<["input", "result"]>]> {
  let summary = "its operand, hidden from CSE and folding";
  let description = [{
    Returns its operand. It has no memory-effect interface, so CSE never
    merges two of them and nothing folds through one: a computation that
    reads its result is not the same computation as one reading the
    operand. `zest-checkpoint-activations` puts one on each value its
    recomputation reads from outside the unit, so CSE cannot merge the
    recomputed forward with the original one (which would keep the
    original's activations alive until the backward, undoing the
    checkpoint), as IREE's `util.optimization_barrier` and XLA's
    `opt-barrier` serve rematerialization. Bufferization replaces it by its
    operand's buffer.

    ```mlir
    %x1 = zest.optimization_barrier %x : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

//===----------------------------------------------------------------------===//
// Offload: copies between device and pinned host memory
//===----------------------------------------------------------------------===//

def Zest_CopyToHostStartOp : Zest_Op<"copy_to_host_start", [
    MemoryEffects<[MemRead<Zest_HostCopyResource>,
                   MemWrite<Zest_HostCopyResource>]>,
    AllTypesMatch<["source", "stage"]>]> {
  let summary = "starts copying a device tensor into pinned host memory";
  let description = [{
    Starts copying `source` (device memory) into `stage`, an entry-point
    argument in pinned host memory (`zest.host`), in order with the device
    work issued before it; the host may read the copy only after the
    matching `zest.copy_wait`. Between the two, the device runs on (an
    offloaded optimizer's update waits for a gradient while the rest of the
    backward computes).

    ```mlir
    %f = zest.copy_to_host_start %g into %stage
        : tensor<132xf32> -> !zest.future<tensor<132xf32>>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$source,
                       AnyStaticShapeTensor:$stage);
  let results = (outs Zest_Future:$future);
  let assemblyFormat = [{
    $source `into` $stage attr-dict `:` type($source) `->` type($future)
  }];
  let hasVerifier = 1;
}

def Zest_CopyWaitOp : Zest_Op<"copy_wait", [
    MemoryEffects<[MemRead<Zest_HostCopyResource>,
                   MemWrite<Zest_HostCopyResource>]>,
    TypesMatchWith<"result type is the future's value type", "future",
                   "result",
                   "::llvm::cast<::mlir::zest::FutureType>($_self)"
                   ".getValueType()">]> {
  let summary = "waits for a copy to the host and yields the host tensor";
  let description = [{
    Blocks the host until the `zest.copy_to_host_start` that produced
    `future` has completed and returns the host tensor (the stage's buffer).

    ```mlir
    %h = zest.copy_wait %f : !zest.future<tensor<132xf32>>
    ```
  }];
  let arguments = (ins Zest_Future:$future);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$future attr-dict `:` type($future)";
  let hasVerifier = 1;
}

def Zest_CopyToDeviceOp : Zest_Op<"copy_to_device", [
    MemoryEffects<[MemRead<Zest_HostCopyResource>,
                   MemWrite<Zest_HostCopyResource>]>,
    AllTypesMatch<["source", "result"]>]> {
  let summary = "a device copy of a tensor in pinned host memory";
  let description = [{
    Returns a new device tensor holding `source`, an entry-point argument in
    pinned host memory (`zest.host`: an offloaded unit's shard). The copy
    runs in order with the device work around it, so the host does not
    wait; the device buffer lives until its last use.

    ```mlir
    %d = zest.copy_to_device %shard : tensor<132xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$source);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$source attr-dict `:` type($source)";
}

//===----------------------------------------------------------------------===//
// Packing of buckets
//===----------------------------------------------------------------------===//

def Zest_PackOp : Zest_Op<"pack", [Pure]> {
  let summary = "concatenates flat buffers piece by piece, for a bucket";
  let description = [{
    Splits each operand into `pieces` equal parts and returns part 0 of
    every operand (in operand order), then part 1 of every operand, and so
    on. With one piece this is a concatenation (the shards a bucketed
    all-gather sends); with one piece per rank it is the layout a bucketed
    reduce-scatter needs, where rank `r` receives part `r` of every member.

    ```mlir
    %b = zest.pack %g0, %g1 pieces 2 : tensor<8xf32>, tensor<4xf32>
        -> tensor<12xf32>
    ```
  }];
  let arguments = (ins Variadic<Zest_FlatTensor>:$inputs,
                       ConfinedAttr<I64Attr, [IntMinValue<1>]>:$pieces);
  let results = (outs Zest_FlatTensor:$result);
  let assemblyFormat = [{
    $inputs `pieces` $pieces attr-dict `:` type($inputs) `->` type($result)
  }];
  let hasVerifier = 1;
  // Packing what one zest.unpack with the same pieces split, all of it in
  // order, is its operand.
  let hasFolder = 1;
}

def Zest_UnpackOp : Zest_Op<"unpack", [Pure]> {
  let summary = "splits a packed bucket buffer back into flat buffers";
  let description = [{
    The inverse of `zest.pack` with the same `pieces`: result `i` is the
    concatenation of its parts, read from each of the `pieces` parts of the
    operand. Unpacking a gathered bucket copies each member into its own
    full buffer, which then counts as gathered parameters.

    ```mlir
    %g0, %g1 = zest.unpack %b pieces 2 : tensor<12xf32>
        -> tensor<8xf32>, tensor<4xf32>
    ```
  }];
  let arguments = (ins Zest_FlatTensor:$input,
                       ConfinedAttr<I64Attr, [IntMinValue<1>]>:$pieces);
  let results = (outs Variadic<Zest_FlatTensor>:$results);
  let assemblyFormat = [{
    $input `pieces` $pieces attr-dict `:` type($input) `->` type($results)
  }];
  let hasVerifier = 1;
}

def Zest_AllGatherStartOp : Zest_CollectiveOp<"all_gather_start"> {
  let summary = "starts an asynchronous all-gather";
  let description = [{
    Asynchronous form of `zest.all_gather`: the transfer starts here and the
    gathered buffer is available after the matching `zest.wait`.

    ```mlir
    %f = zest.all_gather_start %shard for @layers.0
        : tensor<132xf32> -> !zest.future<tensor<528xf32>>
    ```
  }];
  let arguments = (ins Zest_FlatTensor:$shard, FlatSymbolRefAttr:$unit);
  let results = (outs Zest_Future:$future);
  let assemblyFormat = [{
    $shard `for` $unit attr-dict `:` type($shard) `->` type($future)
  }];
}

def Zest_ReduceScatterStartOp : Zest_CollectiveOp<"reduce_scatter_start"> {
  let summary = "starts an asynchronous reduce-scatter";
  let description = [{
    Asynchronous form of `zest.reduce_scatter`.

    ```mlir
    %f = zest.reduce_scatter_start avg %gfull for @layers.0
        : tensor<528xf32> -> !zest.future<tensor<132xf32>>
    ```
  }];
  let arguments = (ins Zest_ReductionAttr:$reduction, Zest_FlatTensor:$input,
                       FlatSymbolRefAttr:$unit);
  let results = (outs Zest_Future:$future);
  let assemblyFormat = [{
    $reduction $input `for` $unit attr-dict `:` type($input) `->`
    type($future)
  }];
}

def Zest_AllReduceStartOp : Zest_CollectiveOp<"all_reduce_start"> {
  let summary = "starts an asynchronous all-reduce";
  let description = [{
    Asynchronous form of `zest.all_reduce`.

    ```mlir
    %f = zest.all_reduce_start avg %gfull for @ignored
        : tensor<64xf32> -> !zest.future<tensor<64xf32>>
    ```
  }];
  let arguments = (ins Zest_ReductionAttr:$reduction, Zest_FlatTensor:$input,
                       FlatSymbolRefAttr:$unit, UnitAttr:$across_replicas);
  let results = (outs Zest_Future:$future);
  let assemblyFormat = [{
    $reduction $input `for` $unit (`across_replicas` $across_replicas^)?
    attr-dict `:` type($input) `->` type($future)
  }];
}

def Zest_WaitOp : Zest_Op<"wait", [
    MemoryEffects<[MemRead<Zest_CommResource>, MemWrite<Zest_CommResource>]>,
    TypesMatchWith<"result type is the future's value type", "future",
                   "result",
                   "::llvm::cast<::mlir::zest::FutureType>($_self)"
                   ".getValueType()">]> {
  let summary = "waits for an asynchronous collective and yields its result";
  let description = [{
    Blocks until the collective that produced `future` has completed on this
    rank and returns its result tensor.

    ```mlir
    %full = zest.wait %f : !zest.future<tensor<528xf32>>
    ```
  }];
  let arguments = (ins Zest_Future:$future);
  let results = (outs Zest_FlatTensor:$result);
  let assemblyFormat = "$future attr-dict `:` type($future)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// zest.release
//===----------------------------------------------------------------------===//

def Zest_ReleaseOp : Zest_Op<"release", [
    MemoryEffects<[MemFree<Zest_GatherPoolResource>]>]> {
  let summary = "ends the lifetime of a gathered unit buffer";
  let description = [{
    After this op the memory of a gathered buffer (the result of
    `zest.all_gather` or of the `zest.wait` of a `zest.all_gather_start`) may
    return to the pool. Neither the buffer nor any parameter view unflattened
    from it may be used after the release in the same block.

    ```mlir
    zest.release %full : tensor<528xf32>
    ```
  }];
  let arguments = (ins Zest_FlatTensor:$buffer);
  let assemblyFormat = "$buffer attr-dict `:` type($buffer)";
  let hasVerifier = 1;
}


//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

def Zest_UpdateOp : Zest_Op<"update", [
    Pure, AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "applies the optimizer to a unit's local shard";
  let description = [{
    One optimizer step on the part of unit `unit` this rank owns (ZeRO's
    partitioned optimizer): `param` is the shard (or the whole buffer of a
    replicated unit), `grad` its reduced gradient, `state` the optimizer
    state of the same layout (`sgd`: none, or one momentum buffer; `adamw`:
    `exp_avg`, `exp_avg_sq`), `accum` the gradient accumulator and `hyper`
    the hyperparameters (`tensor<10xf32>`, indexed by `zest_hyper_t`).

    With `a = hyper[ACCUMULATE] != 0` and `g = (a ? accum + grad : grad)`:

    * `hyper[APPLY] != 0`: the parameters and state take one step with
      gradient `g * hyper[GRAD_SCALE]`; `new_accum` is `accum`.
    * otherwise: `new_accum` is `g`; parameters and state are unchanged.

    Without `accum` (and `new_accum`), the gradient already sums every
    micro-batch (gradient accumulation without a reduce per micro-batch):
    the step always applies, with `g = grad`, and the accumulate and apply
    flags are not read.

    The step follows `torch.optim` exactly:
    `sgd` (with `b = hyper[BETA1]` when a momentum buffer is given):
    `d = g + wd p; buf = b buf + d; d = nesterov ? d + b buf : buf;
    p -= lr d`.
    `adamw`: `p *= 1 - lr wd; m = lerp(m, g, 1 - beta1);
    v = beta2 v + (1 - beta2) g g;
    p -= step_size m / (sqrt(v) / bias_correction2_sqrt + eps)`.

    Elements of the parameters named in `frozen` (and the padding, whose
    gradient is zero) keep their values: the update is masked by global flat
    index (`zest.rank` locates the shard).

    ```mlir
    %p1, %m1, %v1, %a1 = zest.update adamw @layers.0 %p, %g
        state(%m, %v) accum(%a) hyper(%h)
        : (tensor<132xf32>, tensor<132xf32>, tensor<132xf32>, tensor<132xf32>,
           tensor<132xf32>, tensor<10xf32>)
        -> (tensor<132xf32>, tensor<132xf32>, tensor<132xf32>, tensor<132xf32>)
    ```
  }];
  let arguments = (ins Zest_OptimizerAttr:$optimizer, FlatSymbolRefAttr:$unit,
                       Zest_FlatTensor:$param, Zest_FlatTensor:$grad,
                       Variadic<Zest_FlatTensor>:$state,
                       Optional<Zest_FlatTensor>:$accum,
                       Zest_FlatTensor:$hyper,
                       UnitAttr:$nesterov,
                       DefaultValuedAttr<StrArrayAttr, "{}">:$frozen);
  // The new state, then the new accumulator if there is one (one variadic
  // group, so the results need no segment sizes; getNewState and
  // getNewAccum split it).
  let results = (outs Zest_FlatTensor:$new_param,
                      Variadic<Zest_FlatTensor>:$new_values);
  let assemblyFormat = [{
    $optimizer $unit $param `,` $grad (`state` `(` $state^ `)`)?
    (`accum` `(` $accum^ `)`)? `hyper` `(` $hyper `)` attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Number of state buffers `optimizer` keeps (momentum: sgd 0 or 1).
    static unsigned getNumStates(Optimizer optimizer, bool momentum);
    /// Names of the state buffers, as in torch.optim's state_dict.
    static ::llvm::SmallVector<::llvm::StringRef>
    getStateNames(Optimizer optimizer, bool momentum);
    /// The updated optimizer state (one result per state operand).
    ::mlir::ResultRange getNewState() {
      return getNewValues().take_front(getState().size());
    }
    /// The updated accumulator; null without one.
    ::mlir::Value getNewAccum() {
      return getAccum() ? getNewValues().back() : ::mlir::Value();
    }
  }];
}

def Zest_GlobalGradNormOp : Zest_Op<"global_grad_norm", [
    AttrSizedOperandSegments,
    MemoryEffects<[MemRead<Zest_CommResource>, MemWrite<Zest_CommResource>]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "the L2 norm of all gradients over all ranks (for clipping)";
  let description = [{
    The total norm `torch.nn.utils.clip_grad_norm_` computes: the L2 norm of
    the gradients of every unit in `units`, each the one `zest.update`
    applies, `(hyper[ACCUMULATE] != 0 ? accum + grad : grad) *
    hyper[GRAD_SCALE]`, over the whole model. `grads` and `accums` are the
    units' reduced gradient shards and accumulators (for a replicated unit,
    the whole buffer, counted once). The accumulator is read only when
    `hyper[ACCUMULATE]` is set; without accumulators (no_sync: the gradient
    already sums the micro-batches) the norm is of `grad * GRAD_SCALE`. A
    collective: every rank gets the same norm.

    ```mlir
    %n = zest.global_grad_norm(%g0, %g1) accum(%a0, %a1) hyper(%h)
        units [@layers.0, @layers.1]
        : (tensor<132xf32>, tensor<64xf32>, tensor<132xf32>, tensor<64xf32>,
           tensor<10xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<Zest_FlatTensor>:$grads,
                       Variadic<Zest_FlatTensor>:$accums,
                       Zest_FlatTensor:$hyper,
                       FlatSymbolRefArrayAttr:$units);
  let results = (outs 0DTensorOf<[F32]>:$norm);
  let assemblyFormat = [{
    `(` $grads `)` `accum` `(` $accums `)` `hyper` `(` $hyper `)`
    `units` $units attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fused linear layers
//===----------------------------------------------------------------------===//

// f32, bf16 or f16 matrices and vectors (one type per op, checked by the
// verifiers): what the kernels take. Tensors before bufferization, memrefs
// (with a unit inner stride) after.
def Zest_LinearMatrix
    : AnyTypeOf<[2DTensorOf<[F32, BF16, F16]>,
                 MemRefRankOf<[F32, BF16, F16], [2]>],
                "2-D f32, bf16 or f16 tensor or memref">;
def Zest_LinearVector
    : AnyTypeOf<[1DTensorOf<[F32, BF16, F16]>,
                 MemRefRankOf<[F32, BF16, F16], [1]>],
                "1-D f32, bf16 or f16 tensor or memref">;

def Zest_LinearOp : Zest_Op<"linear", [
    AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DestinationStyleOpInterface]> {
  let summary = "a linear layer with its bias and activation, fused";
  let description = [{
    `pre = input * W + bias` and `output = activation(pre)`, with `W` the
    `weight` transposed (`[out, in]`, torch.nn.Linear's layout) when
    `transpose_weight` is set, or `weight` itself (`[in, out]`). `bias`
    (`[out]`) is optional. `preactivation`, when given, receives `pre`,
    which the backward of the activation needs: the layer keeps its
    pre-activation, never a copy of the weight. Both destinations are only
    written.

    Destination-passing style like linalg: on tensors the op returns one
    tensor per destination; after bufferization it writes its memref
    destinations and has no result. `zest-fuse-linear` creates it from
    linalg; `zest-matmul-to-blas` lowers it to `zest_linear_forward`
    (one OpenBLAS product starting from the broadcast bias, then one
    vectorized activation pass).

    ```mlir
    %y, %pre = zest.linear gelu_tanh transpose_weight
        ins(%x, %w, %b : tensor<128x256xf32>, tensor<1024x256xf32>,
                         tensor<1024xf32>)
        outs(%e0, %e1 : tensor<128x1024xf32>, tensor<128x1024xf32>)
        -> tensor<128x1024xf32>, tensor<128x1024xf32>
    ```
  }];
  let arguments = (ins Zest_ActivationAttr:$activation,
                       UnitAttr:$transpose_weight,
                       Zest_LinearMatrix:$input, Zest_LinearMatrix:$weight,
                       Optional<Zest_LinearVector>:$bias,
                       Zest_LinearMatrix:$output,
                       Optional<Zest_LinearMatrix>:$preactivation);
  let results = (outs Variadic<2DTensorOf<[F32, BF16, F16]>>:$results);
  let assemblyFormat = [{
    $activation (`transpose_weight` $transpose_weight^)?
    `ins` `(` $input `,` $weight (`,` $bias^)? `:` type($input) `,`
      type($weight) (`,` type($bias)^)? `)`
    `outs` `(` $output (`,` $preactivation^)? `:` type($output)
      (`,` type($preactivation)^)? `)`
    attr-dict (`->` type($results)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable();
    /// Rows, columns of the output and the reduced dimension.
    int64_t getM(), getN(), getK();
  }];
}

def Zest_LinearBackwardOp : Zest_Op<"linear_backward", [
    AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DestinationStyleOpInterface]> {
  let summary = "the gradients of a fused linear layer";
  let description = [{
    With `g = grad_output * activation'(preactivation)` (or `grad_output`
    for `none`), the gradients of `zest.linear`:

    * `grad_input = g * W^T`, with `W` as in `zest.linear`: `weight` is
      `[out, in]` when `transpose_weight` is set, `[in, out]` otherwise;
    * `grad_weight = g^T * input` (`[out, in]`) when
      `transpose_grad_weight` is set, else `input^T * g` (`[in, out]`);
    * `grad_bias = sum of g over rows`.

    Each gradient is optional (at least one is computed); `input` is given
    exactly when `grad_weight` is, `weight` exactly when `grad_input` is,
    `preactivation` exactly when the activation is not `none`. For `relu`,
    the layer's output may stand for its pre-activation (the same sign).
    `g` is computed once, in blocks of rows, with the bias gradient summed
    in the same pass; destinations are only written.

    ```mlir
    %dx, %dw, %db = zest.linear_backward gelu_tanh transpose_weight
        transpose_grad_weight
        grad_output(%dy : tensor<128x1024xf32>)
        preactivation(%pre : tensor<128x1024xf32>)
        input(%x : tensor<128x256xf32>) weight(%w : tensor<1024x256xf32>)
        outs(%e0, %e1, %e2 : tensor<128x256xf32>, tensor<1024x256xf32>,
             tensor<1024xf32>)
        -> tensor<128x256xf32>, tensor<1024x256xf32>, tensor<1024xf32>
    ```
  }];
  let arguments = (ins Zest_ActivationAttr:$activation,
                       UnitAttr:$transpose_weight,
                       UnitAttr:$transpose_grad_weight,
                       Zest_LinearMatrix:$grad_output,
                       Optional<Zest_LinearMatrix>:$preactivation,
                       Optional<Zest_LinearMatrix>:$input,
                       Optional<Zest_LinearMatrix>:$weight,
                       Optional<Zest_LinearMatrix>:$grad_input,
                       Optional<Zest_LinearMatrix>:$grad_weight,
                       Optional<Zest_LinearVector>:$grad_bias);
  let results = (outs Variadic<RankedTensorOf<[F32, BF16, F16]>>:$results);
  let assemblyFormat = [{
    $activation (`transpose_weight` $transpose_weight^)?
    (`transpose_grad_weight` $transpose_grad_weight^)?
    `grad_output` `(` $grad_output `:` type($grad_output) `)`
    (`preactivation` `(` $preactivation^ `:` type($preactivation) `)`)?
    (`input` `(` $input^ `:` type($input) `)`)?
    (`weight` `(` $weight^ `:` type($weight) `)`)?
    `outs` `(` (`grad_input` $grad_input^ `:` type($grad_input))?
      (`grad_weight` $grad_weight^ `:` type($grad_weight))?
      (`grad_bias` $grad_bias^ `:` type($grad_bias))? `)`
    attr-dict (`->` type($results)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable();
    /// Rows, output features and input features of the layer.
    int64_t getM(), getN(), getK();
  }];
}

//===----------------------------------------------------------------------===//
// Fused attention
//===----------------------------------------------------------------------===//

// `[batch, heads, rows, features]` queries, keys, values and outputs in one
// float type; a mask broadcast to `[batch, heads, queries, keys]`; one f32
// log-sum-exp per query row. Tensors before bufferization, memrefs after.
def Zest_AttentionTensor
    : AnyTypeOf<[4DTensorOf<[F32, BF16, F16]>,
                 MemRefRankOf<[F32, BF16, F16], [4]>],
                "4-D f32, bf16 or f16 tensor or memref">;
def Zest_AttentionMask
    : AnyTypeOf<[4DTensorOf<[I1, F32, BF16, F16]>,
                 MemRefRankOf<[I1, F32, BF16, F16], [4]>],
                "4-D i1, f32, bf16 or f16 tensor or memref">;
def Zest_LogSumExp
    : AnyTypeOf<[3DTensorOf<[F32]>, MemRefRankOf<[F32], [3]>],
                "3-D f32 tensor or memref">;

def Zest_AttentionOp : Zest_Op<"attention", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DestinationStyleOpInterface]> {
  let summary = "scaled dot-product attention, fused (FlashAttention-2)";
  let description = [{
    For every batch `b`, query head `h` and query row `i`:

    ```
    s[j]      = scale * (query[b, h, i] . key[b, g, j]) (+ mask, or -inf
                where a boolean mask is false or, when `causal`, j > i)
    output    = sum_j softmax(s)[j] * value[b, g, j]
    logsumexp = log(sum_j exp(s[j]))
    ```

    with `g = h / (heads / kv_heads)`: grouped-query attention reads each
    key/value head for `heads / kv_heads` consecutive query heads and never
    repeats it in memory. Queries, keys, values and the output are
    `[batch, heads, rows, dim]`, or with `sequence_major`
    `[batch, rows, heads, dim]`: the heads as a projection's rows hold them
    (`x W^T` viewed as `[B, S, H, D]`), which `zest-fold-transposes` reads
    and writes in place of PyTorch's `transpose(1, 2)` copies; the
    log-sum-exp stays `[batch, heads, queries]` and the mask
    `[batch, heads, queries, keys]`. On memrefs each operand may be strided
    (a slice of a fused QKV projection): rows need only be contiguous. `causal` keeps keys `j <= i` (PyTorch's
    `is_causal`, aligned at the top left). An i1 `mask` keeps the keys
    where it is true; a float mask (the inputs' type or f32) is added to
    the scores. The mask's dimensions are those of
    `[batch, heads, queries, keys]` or 1 (broadcast). A row that sees no key
    has a zero output and a log-sum-exp of +inf, as PyTorch's safe softmax.

    The log-sum-exp is what the backward needs (FlashAttention-2): the
    probabilities are recomputed from it, so no `[queries, keys]` tensor is
    ever kept. Products accumulate in f32 whatever the storage type.
    Destination-passing style: on tensors the op returns its destinations,
    on memrefs it writes them. `zest-import` creates it for
    `scaled_dot_product_attention` and the eager attention of transformers'
    models; `zest-matmul-to-blas` lowers it to `zest_attention_forward`.

    ```mlir
    %o, %lse = zest.attention causal scale(0.125)
        ins(%q, %k, %v : tensor<2x8x128x64xf32>, tensor<2x2x128x64xf32>,
                         tensor<2x2x128x64xf32>)
        outs(%e0, %e1 : tensor<2x8x128x64xf32>, tensor<2x8x128xf32>)
        -> tensor<2x8x128x64xf32>, tensor<2x8x128xf32>
    ```
  }];
  let arguments = (ins UnitAttr:$causal, UnitAttr:$sequence_major,
                       F32Attr:$scale,
                       Zest_AttentionTensor:$query, Zest_AttentionTensor:$key,
                       Zest_AttentionTensor:$value,
                       Optional<Zest_AttentionMask>:$mask,
                       Zest_AttentionTensor:$output,
                       Zest_LogSumExp:$logsumexp);
  let results = (outs Variadic<RankedTensorOf<[F32, BF16, F16]>>:$results);
  let assemblyFormat = [{
    (`causal` $causal^)? (`sequence_major` $sequence_major^)?
    `scale` `(` $scale `)`
    `ins` `(` $query `,` $key `,` $value `:` type($query) `,` type($key) `,`
      type($value) `)`
    (`mask` `(` $mask^ `:` type($mask) `)`)?
    `outs` `(` $output `,` $logsumexp `:` type($output) `,`
      type($logsumexp) `)`
    attr-dict (`->` type($results)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable();
  }];
}

def Zest_AttentionBackwardOp : Zest_Op<"attention_backward", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DestinationStyleOpInterface]> {
  let summary = "the gradients of zest.attention (FlashAttention-2)";
  let description = [{
    The gradients of the queries, keys and values of the `zest.attention`
    with the same `causal`, `scale`, inputs and mask, from the gradient of
    its output, its output and its log-sum-exp: each block of probabilities
    is recomputed as `exp(s - logsumexp)`, and with
    `D_i = grad_output_i . output_i`,

    ```
    grad_value += P^T grad_output
    dS          = P * (grad_output value^T - D) * scale
    grad_query += dS key
    grad_key   += dS^T query
    ```

    Under grouped-query attention the key and value gradients of a
    key/value head sum over the query heads that read it. Destinations are
    only written; products accumulate in f32. `sequence_major` lays out the
    queries, keys, values, output and all their gradients as
    `zest.attention`'s does.

    ```mlir
    %dq, %dk, %dv = zest.attention_backward causal scale(0.125)
        grad_output(%do : tensor<2x8x128x64xf32>)
        ins(%q, %k, %v, %o, %lse : tensor<2x8x128x64xf32>,
            tensor<2x2x128x64xf32>, tensor<2x2x128x64xf32>,
            tensor<2x8x128x64xf32>, tensor<2x8x128xf32>)
        outs(%e0, %e1, %e2 : tensor<2x8x128x64xf32>, tensor<2x2x128x64xf32>,
             tensor<2x2x128x64xf32>)
        -> tensor<2x8x128x64xf32>, tensor<2x2x128x64xf32>,
           tensor<2x2x128x64xf32>
    ```
  }];
  let arguments = (ins UnitAttr:$causal, UnitAttr:$sequence_major,
                       F32Attr:$scale,
                       Zest_AttentionTensor:$grad_output,
                       Zest_AttentionTensor:$query, Zest_AttentionTensor:$key,
                       Zest_AttentionTensor:$value,
                       Zest_AttentionTensor:$output,
                       Zest_LogSumExp:$logsumexp,
                       Optional<Zest_AttentionMask>:$mask,
                       Zest_AttentionTensor:$grad_query,
                       Zest_AttentionTensor:$grad_key,
                       Zest_AttentionTensor:$grad_value);
  let results = (outs Variadic<RankedTensorOf<[F32, BF16, F16]>>:$results);
  let assemblyFormat = [{
    (`causal` $causal^)? (`sequence_major` $sequence_major^)?
    `scale` `(` $scale `)`
    `grad_output` `(` $grad_output `:` type($grad_output) `)`
    `ins` `(` $query `,` $key `,` $value `,` $output `,` $logsumexp `:`
      type($query) `,` type($key) `,` type($value) `,` type($output) `,`
      type($logsumexp) `)`
    (`mask` `(` $mask^ `:` type($mask) `)`)?
    `outs` `(` $grad_query `,` $grad_key `,` $grad_value `:`
      type($grad_query) `,` type($grad_key) `,` type($grad_value) `)`
    attr-dict (`->` type($results)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable();
  }];
}

//===----------------------------------------------------------------------===//
// Fused cross-entropy
//===----------------------------------------------------------------------===//

def Zest_Logits
    : AnyTypeOf<[2DTensorOf<[F32, BF16, F16]>,
                 MemRefRankOf<[F32, BF16, F16], [2]>],
                "2-D f32, bf16 or f16 tensor or memref">;
def Zest_ClassTargets
    : AnyTypeOf<[1DTensorOf<[I64, I32]>, MemRefRankOf<[I64, I32], [1]>],
                "1-D i64 or i32 tensor or memref">;
def Zest_RowValues
    : AnyTypeOf<[TensorRankOf<[F32], [0, 1]>, MemRefRankOf<[F32], [0, 1]>],
                "0-D or 1-D f32 tensor or memref">;

def Zest_CrossEntropyOp : Zest_Op<"cross_entropy", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DestinationStyleOpInterface]> {
  let summary = "cross-entropy of logits against class targets, fused";
  let description = [{
    For `logits` `[rows, classes]` and class indices `target` `[rows]`
    (PyTorch's `cross_entropy` with class-index targets), each row's
    log-sum-exp `lse = log(sum_c exp(x_c))` and loss

    ```
    loss_i = lse_i - (1 - label_smoothing) x_{t_i}
                   - label_smoothing / classes * sum_c x_c
    ```

    or 0 where `t_i` is `ignore_index`. `reduction` `none` writes every
    row's loss (`loss` is `[rows]`), `sum` their sum and `mean` their sum
    over the rows not ignored (`loss` is 0-D; NaN if every row is), as
    PyTorch computes them. `logsumexp` (`[rows]`, f32) is what the backward
    needs: each row is read once, its maximum and sum formed online, and
    no `[rows, classes]` array (log-probabilities, softmax) is written.
    Arithmetic is f32 whatever the logits' storage. Destination-passing
    style; `zest-import` creates it for `cross_entropy`, and
    `zest-matmul-to-blas` lowers it to `zest_cross_entropy_forward`.

    ```mlir
    %loss, %lse = zest.cross_entropy mean ignore_index(-100)
        ins(%logits, %target : tensor<512x50257xf32>, tensor<512xi64>)
        outs(%e0, %e1 : tensor<f32>, tensor<512xf32>)
        -> tensor<f32>, tensor<512xf32>
    ```
  }];
  let arguments = (ins Zest_LossReductionAttr:$reduction, I64Attr:$ignore_index,
                       DefaultValuedAttr<F32Attr, "0.0f">:$label_smoothing,
                       Zest_Logits:$logits, Zest_ClassTargets:$target,
                       Zest_RowValues:$loss, Zest_RowValues:$logsumexp);
  let results = (outs Variadic<RankedTensorOf<[F32]>>:$results);
  let assemblyFormat = [{
    $reduction `ignore_index` `(` $ignore_index `)`
    (`label_smoothing` `(` $label_smoothing^ `)`)?
    `ins` `(` $logits `,` $target `:` type($logits) `,` type($target) `)`
    `outs` `(` $loss `,` $logsumexp `:` type($loss) `,` type($logsumexp) `)`
    attr-dict (`->` type($results)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable();
  }];
}

def Zest_CrossEntropyBackwardOp : Zest_Op<"cross_entropy_backward", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DestinationStyleOpInterface]> {
  let summary = "the logits' gradient of zest.cross_entropy";
  let description = [{
    The gradient of the `zest.cross_entropy` with the same attributes,
    from the gradient of its loss (0-D, or `[rows]` for `none`) and the
    forward's log-sum-exp:

    ```
    grad_logits_ic = g_i * (exp(x_ic - lse_i) - (1 - label_smoothing) [c == t_i]
                           - label_smoothing / classes)
    ```

    with `g_i` the loss's gradient (divided by the rows not ignored for
    `mean`), 0 on ignored rows. Each element is computed once from its
    logit and its row's log-sum-exp: no softmax is kept between the
    forward and the backward. The gradient is stored in the logits' type.

    ```mlir
    %dx = zest.cross_entropy_backward mean ignore_index(-100)
        grad_loss(%g : tensor<f32>)
        ins(%logits, %target, %lse : tensor<512x50257xf32>, tensor<512xi64>,
            tensor<512xf32>)
        outs(%e : tensor<512x50257xf32>) -> tensor<512x50257xf32>
    ```
  }];
  let arguments = (ins Zest_LossReductionAttr:$reduction, I64Attr:$ignore_index,
                       DefaultValuedAttr<F32Attr, "0.0f">:$label_smoothing,
                       Zest_RowValues:$grad_loss, Zest_Logits:$logits,
                       Zest_ClassTargets:$target, Zest_RowValues:$logsumexp,
                       Zest_Logits:$grad_logits);
  let results = (outs Variadic<RankedTensorOf<[F32, BF16, F16]>>:$results);
  let assemblyFormat = [{
    $reduction `ignore_index` `(` $ignore_index `)`
    (`label_smoothing` `(` $label_smoothing^ `)`)?
    `grad_loss` `(` $grad_loss `:` type($grad_loss) `)`
    `ins` `(` $logits `,` $target `,` $logsumexp `:` type($logits) `,`
      type($target) `,` type($logsumexp) `)`
    `outs` `(` $grad_logits `:` type($grad_logits) `)`
    attr-dict (`->` type($results)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable();
  }];
}

// The fused head and loss's f32 gradients and 0-D f32 loss.
def Zest_F32Matrix
    : AnyTypeOf<[2DTensorOf<[F32]>, MemRefRankOf<[F32], [2]>],
                "2-D f32 tensor or memref">;
def Zest_LossScalar
    : AnyTypeOf<[0DTensorOf<[F32]>, MemRefRankOf<[F32], [0]>],
                "0-D f32 tensor or memref">;

def Zest_LinearCrossEntropyOp : Zest_Op<"linear_cross_entropy", [
    AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DestinationStyleOpInterface]> {
  let summary = "a linear head, its cross-entropy and both gradients, in "
                "chunks of rows";
  let description = [{
    The loss of `zest.cross_entropy` (reduction `mean` or `sum`) over the
    logits `input * W` (f32, bf16 or f16: one storage type for the input,
    the weight and the logits, the product accumulated in f32 and rounded
    to it) of a linear head without bias, with `W` the
    `weight` transposed (`[classes, in]`, torch.nn.Linear's layout) when
    `transpose_weight` is set or `weight` itself (`[in, classes]`), and,
    given the loss's gradient `grad_loss`, the gradients the head's
    backward computes from the logits' gradient `g`:

    * `grad_input = g * W^T` (`[rows, in]`), optional;
    * `grad_weight = g^T * input` (`[classes, in]`) when
      `transpose_grad_weight` is set, else `input^T * g` (`[in, classes]`),
      optional.

    `g` is stored in the logits' type; both gradients are f32, the products
    accumulated in f32 and not rounded, as autocast's widened products of
    16-bit operands compute them (the rounding that follows them, if any,
    stays in the IR).

    The rows are taken in chunks of the `logits` destination's rows, a
    workspace the op writes and reads: each chunk's logits are computed,
    their log-sum-exps and losses formed, overwritten by their gradient,
    and multiplied into `grad_input`'s rows and `grad_weight` (summed over
    the chunks) before the next chunk, as Liger-Kernel's fused linear
    cross-entropy does. Neither the `[rows, classes]` logits nor their
    gradient ever exists whole. `logsumexp` receives every row's
    log-sum-exp. The loss and the gradients equal those of the unfused
    product, `zest.cross_entropy` and `zest.cross_entropy_backward`; the
    mean's divisor counts the rows not ignored over all chunks.

    `zest-fuse-linear-cross-entropy` creates it from those ops;
    `zest-matmul-to-blas` lowers it to `zest_linear_cross_entropy`.

    ```mlir
    %loss, %ws, %lse, %dx, %dw = zest.linear_cross_entropy mean
        ignore_index(-100) transpose_weight transpose_grad_weight
        grad_loss(%g : tensor<f32>)
        ins(%x, %w, %t : tensor<4096x768xf32>, tensor<50257x768xf32>,
            tensor<4096xi64>)
        outs(loss %e0 : tensor<f32>, logits %e1 : tensor<768x50257xf32>,
             logsumexp %e2 : tensor<4096xf32>
             grad_input %e3 : tensor<4096x768xf32>
             grad_weight %e4 : tensor<50257x768xf32>)
        -> tensor<f32>, tensor<768x50257xf32>, tensor<4096xf32>,
           tensor<4096x768xf32>, tensor<50257x768xf32>
    ```
  }];
  let arguments = (ins Zest_LossReductionAttr:$reduction, I64Attr:$ignore_index,
                       DefaultValuedAttr<F32Attr, "0.0f">:$label_smoothing,
                       UnitAttr:$transpose_weight,
                       UnitAttr:$transpose_grad_weight,
                       Zest_LossScalar:$grad_loss, Zest_LinearMatrix:$input,
                       Zest_LinearMatrix:$weight, Zest_ClassTargets:$target,
                       Zest_LossScalar:$loss, Zest_LinearMatrix:$logits,
                       Zest_RowValues:$logsumexp,
                       Optional<Zest_F32Matrix>:$grad_input,
                       Optional<Zest_F32Matrix>:$grad_weight);
  let results = (outs Variadic<RankedTensorOf<[F32, BF16, F16]>>:$results);
  let assemblyFormat = [{
    $reduction `ignore_index` `(` $ignore_index `)`
    (`label_smoothing` `(` $label_smoothing^ `)`)?
    (`transpose_weight` $transpose_weight^)?
    (`transpose_grad_weight` $transpose_grad_weight^)?
    `grad_loss` `(` $grad_loss `:` type($grad_loss) `)`
    `ins` `(` $input `,` $weight `,` $target `:` type($input) `,`
      type($weight) `,` type($target) `)`
    `outs` `(` `loss` $loss `:` type($loss) `,` `logits` $logits `:`
      type($logits) `,` `logsumexp` $logsumexp `:` type($logsumexp)
      (`grad_input` $grad_input^ `:` type($grad_input))?
      (`grad_weight` $grad_weight^ `:` type($grad_weight))? `)`
    attr-dict (`->` type($results)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable();
    /// Rows, classes and input features of the head.
    int64_t getRows(), getClasses(), getK();
    /// Rows per chunk: the `logits` workspace's.
    int64_t getChunkRows();
  }];
}

//===----------------------------------------------------------------------===//
// Grouped products (mixture-of-experts layers)
//===----------------------------------------------------------------------===//

def Zest_GroupedMatrices
    : AnyTypeOf<[3DTensorOf<[F32, BF16, F16]>,
                 MemRefRankOf<[F32, BF16, F16], [3]>],
                "3-D f32, bf16 or f16 tensor or memref">;
def Zest_GroupOffsets
    : AnyTypeOf<[1DTensorOf<[I32, I64]>, MemRefRankOf<[I32, I64], [1]>],
                "1-D i32 or i64 tensor or memref">;

def Zest_GroupedMatmulOp : Zest_Op<"grouped_matmul", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DestinationStyleOpInterface]> {
  let summary = "rows grouped by run-time offsets, each group times its matrix";
  let description = [{
    The rows of `input` (`[rows, K]`) come in consecutive groups whose ends
    `offsets` (`[groups]`, cumulative, known at run time only) gives: rows
    `[offsets[g-1], offsets[g])` (from 0 for the first group) are
    multiplied by group `g`'s matrix, `weight[g]` (`[groups, K, N]`), or
    its transpose when `transpose_weight` is set (`weight` `[groups, N,
    K]`, a mixture-of-experts layer's `[experts, out, in]`). Rows past the
    last end get 0; an empty group reads nothing. `output` is `[rows, N]`.
    The number of rows is static whatever the grouping, so the memory
    plan holds for every routing. Products accumulate in f32; the output
    is stored in the operands' type. The input's gradient is this op on
    the output's gradient with `transpose_weight` flipped; the weights'
    is `zest.grouped_matmul_weight_grad`.

    `zest-import` creates it for transformers' experts and for
    `torch.nn.functional.grouped_mm`; `zest-matmul-to-blas` lowers it to
    `zest_grouped_matmul` (a product per non-empty group).

    ```mlir
    %y = zest.grouped_matmul transpose_weight
        ins(%x, %w, %ends : tensor<512x768xf32>, tensor<8x4096x768xf32>,
            tensor<8xi32>)
        outs(%e : tensor<512x4096xf32>) -> tensor<512x4096xf32>
    ```
  }];
  let arguments = (ins UnitAttr:$transpose_weight,
                       Zest_LinearMatrix:$input,
                       Zest_GroupedMatrices:$weight,
                       Zest_GroupOffsets:$offsets,
                       Zest_LinearMatrix:$output);
  let results = (outs Variadic<2DTensorOf<[F32, BF16, F16]>>:$results);
  let assemblyFormat = [{
    (`transpose_weight` $transpose_weight^)?
    `ins` `(` $input `,` $weight `,` $offsets `:` type($input) `,`
      type($weight) `,` type($offsets) `)`
    `outs` `(` $output `:` type($output) `)`
    attr-dict (`->` type($results)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable();
    /// Rows, the reduced dimension, output columns and groups.
    int64_t getRows(), getK(), getN(), getGroups();
  }];
}

def Zest_GroupedMatmulWeightGradOp
    : Zest_Op<"grouped_matmul_weight_grad", [
        DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
        DestinationStyleOpInterface]> {
  let summary = "the weights' gradient of zest.grouped_matmul";
  let description = [{
    For each group `g` of rows (`offsets` as in `zest.grouped_matmul`),
    `input[rows of g]^T * grad_output[rows of g]` (`[K, N]`), or its
    transpose (`[N, K]`) when `transpose_weight` is set, written into
    `grad_weight[g]`; an empty group's slice is 0. Each group's gradient
    is computed into its slice of the buffer directly, accumulated in f32
    and stored in the operands' type.

    ```mlir
    %dw = zest.grouped_matmul_weight_grad transpose_weight
        ins(%x, %dy, %ends : tensor<512x768xf32>, tensor<512x4096xf32>,
            tensor<8xi32>)
        outs(%e : tensor<8x4096x768xf32>) -> tensor<8x4096x768xf32>
    ```
  }];
  let arguments = (ins UnitAttr:$transpose_weight,
                       Zest_LinearMatrix:$input,
                       Zest_LinearMatrix:$grad_output,
                       Zest_GroupOffsets:$offsets,
                       Zest_GroupedMatrices:$grad_weight);
  let results = (outs Variadic<3DTensorOf<[F32, BF16, F16]>>:$results);
  let assemblyFormat = [{
    (`transpose_weight` $transpose_weight^)?
    `ins` `(` $input `,` $grad_output `,` $offsets `:` type($input) `,`
      type($grad_output) `,` type($offsets) `)`
    `outs` `(` $grad_weight `:` type($grad_weight) `)`
    attr-dict (`->` type($results)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable();
    /// Rows, the input's columns, the output gradient's and groups.
    int64_t getRows(), getK(), getN(), getGroups();
  }];
}

//===----------------------------------------------------------------------===//
// Expert parallelism: rows to their experts' ranks and back
//===----------------------------------------------------------------------===//

def Zest_ExpertRouting
    : AnyTypeOf<[1DTensorOf<[I64]>, MemRefRankOf<[I64], [1]>],
                "1-D i64 tensor or memref">;
def Zest_ExpertRows
    : AnyTypeOf<[2DTensorOf<[F32, BF16, F16]>,
                 MemRefRankOf<[F32, BF16, F16], [2]>],
                "2-D f32, bf16 or f16 tensor or memref">;

class Zest_ExpertExchangeOp<string mnemonic, list<Trait> traits = []>
    : Zest_Op<mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
        DestinationStyleOpInterface])> {
  let hasVerifier = 1;
}

def Zest_ExpertRoutingOp : Zest_ExpertExchangeOp<"expert_routing"> {
  let summary = "exchanges the row counts of an expert-parallel layer";
  let description = [{
    Expert parallelism: the ranks form expert groups of `group_size`
    consecutive ranks (the mesh's shard groups); group rank `j` holds
    experts `[j * L, (j + 1) * L)` of the `E` experts, `L = E /
    group_size`. `ends` (`[E]`) are the cumulative ends of this rank's rows
    grouped by expert. Each rank tells every rank of its group how many
    rows it will send it: `routing[j * L + l]` is the count group rank `j`
    sends this rank for its local expert `l`; `local_ends` (`[L]`) the
    cumulative ends of the rows this rank receives, expert-major (its first
    expert's rows from every rank, in rank order, then the second's).
    `zest.expert_dispatch` and `zest.expert_combine` move the rows.

    In a group of one rank nothing moves (`local_ends` is `ends`): that is
    what `zest-import` writes, and `zest-expert-parallel` sets the group.

    ```mlir
    %routing, %local = zest.expert_routing group_size = 2
        ins(%ends : tensor<8xi32>)
        outs(%r, %l : tensor<8xi64>, tensor<4xi32>)
        -> tensor<8xi64>, tensor<4xi32>
    ```
  }];
  let arguments = (ins ConfinedAttr<I64Attr, [IntMinValue<1>]>:$group_size,
                       Zest_GroupOffsets:$ends,
                       Zest_ExpertRouting:$routing,
                       Zest_GroupOffsets:$local_ends);
  let results = (outs Variadic<1DTensorOf<[I32, I64]>>:$results);
  let assemblyFormat = [{
    `group_size` `=` $group_size
    `ins` `(` $ends `:` type($ends) `)`
    `outs` `(` $routing `,` $local_ends `:` type($routing) `,`
      type($local_ends) `)`
    attr-dict (`->` type($results)^)?
  }];
  let hasCanonicalizer = 1;
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable();
    /// Experts of the layer and of each rank.
    int64_t getExperts(), getLocalExperts();
  }];
}

def Zest_ExpertDispatchOp : Zest_ExpertExchangeOp<"expert_dispatch"> {
  let summary = "sends rows grouped by expert to their experts' ranks";
  let description = [{
    Sends the rows of `input` (`[rows, D]`, grouped by expert as `ends`
    says) of expert `e` to the rank of the group holding it, and receives
    into `output` (`[capacity, D]`) the rows the group sends this rank's
    experts, laid out as `zest.expert_routing` (whose `routing` it takes)
    describes; rows past the last are 0. `capacity` is the plan's worst
    case: every row of the group's ranks that can reach this rank (each
    token reaches an expert at most once), so no routing overflows it. Its
    gradient is `zest.expert_combine` of the output's gradient.

    ```mlir
    %recv = zest.expert_dispatch group_size = 2
        ins(%x, %ends, %routing : tensor<64x32xf32>, tensor<8xi32>,
            tensor<8xi64>)
        outs(%e : tensor<128x32xf32>) -> tensor<128x32xf32>
    ```
  }];
  let arguments = (ins ConfinedAttr<I64Attr, [IntMinValue<1>]>:$group_size,
                       Zest_ExpertRows:$input,
                       Zest_GroupOffsets:$ends,
                       Zest_ExpertRouting:$routing,
                       Zest_ExpertRows:$output);
  let results = (outs Variadic<2DTensorOf<[F32, BF16, F16]>>:$results);
  let assemblyFormat = [{
    `group_size` `=` $group_size
    `ins` `(` $input `,` $ends `,` $routing `:` type($input) `,`
      type($ends) `,` type($routing) `)`
    `outs` `(` $output `:` type($output) `)`
    attr-dict (`->` type($results)^)?
  }];
  let hasFolder = 1;
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable();
  }];
}

def Zest_ExpertCombineOp : Zest_ExpertExchangeOp<"expert_combine"> {
  let summary = "returns rows from their experts' ranks to where they came from";
  let description = [{
    The inverse of `zest.expert_dispatch` (same `ends` and `routing`): the
    rows of `input` (`[capacity, D]`, laid out as dispatch receives them)
    go back to the ranks they came from, each into its place in `output`
    (`[rows, D]`, grouped by expert as `ends` says). Its gradient is
    `zest.expert_dispatch` of the output's gradient.

    ```mlir
    %y = zest.expert_combine group_size = 2
        ins(%yr, %ends, %routing : tensor<128x32xf32>, tensor<8xi32>,
            tensor<8xi64>)
        outs(%e : tensor<64x32xf32>) -> tensor<64x32xf32>
    ```
  }];
  let arguments = (ins ConfinedAttr<I64Attr, [IntMinValue<1>]>:$group_size,
                       Zest_ExpertRows:$input,
                       Zest_GroupOffsets:$ends,
                       Zest_ExpertRouting:$routing,
                       Zest_ExpertRows:$output);
  let results = (outs Variadic<2DTensorOf<[F32, BF16, F16]>>:$results);
  let assemblyFormat = [{
    `group_size` `=` $group_size
    `ins` `(` $input `,` $ends `,` $routing `:` type($input) `,`
      type($ends) `,` type($routing) `)`
    `outs` `(` $output `:` type($output) `)`
    attr-dict (`->` type($results)^)?
  }];
  let hasFolder = 1;
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable();
  }];
}

def Zest_RankOp : Zest_Op<"rank", [Pure]> {
  let summary = "the index of the shard this process holds";
  let description = [{
    The rank `r` whose shard (`[r * shard_size, (r + 1) * shard_size)` of
    every sharded unit) this process holds: its rank, or under hybrid
    sharding its rank within its replica group.

    ```mlir
    %r = zest.rank : index
    ```
  }];
  let results = (outs Index:$rank);
  let assemblyFormat = "attr-dict `:` type($rank)";
}

#endif // ZEST_DIALECT_ZEST_IR_ZESTOPS_TD
