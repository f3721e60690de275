//===- Passes.td - Zest transformation passes --------------*- tablegen -*-===//

#ifndef ZEST_DIALECT_ZEST_TRANSFORMS_PASSES_TD
#define ZEST_DIALECT_ZEST_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def VerifyContractPass : Pass<"zest-verify-contract", "::mlir::ModuleOp"> {
  let summary = "Checks that the module follows the Zest model-IR contract";
  let description = [{
    Reports every violation of the input contract as a located error:
    parameters (`zest.param`) must be statically shaped tensors with unique,
    well-formed fully qualified names; gradients (`zest.grad`) must name a
    parameter of the same function and have its type; a function returning
    gradients must return exactly one `zest.loss`; a parameter shared by
    several functions must have one type; `zest.module_classes` must map
    module paths to class names; functions taking parameters must have a
    single block and must not be called (their signature is rewritten).
    Unknown `zest.*` argument or result attributes are rejected, so typos do
    not silently turn a parameter into data.

    Example of an error:

    ```
    model.mlir:3:42: error: gradient 'fc.weight' has type tensor<4x8xf32>,
      but the parameter has type tensor<8x4xf32>
    ```
  }];
}

def GroupUnitsPass : Pass<"zest-group-units", "::mlir::ModuleOp"> {
  let summary = "Groups parameters into units and declares their flat layout";
  let description = [{
    Chooses the units (FSDP FlatParameters, DeepSpeed leaf modules) and adds
    one `zest.unit` declaration per unit with its parameters in flat order,
    offsets, padded size and shard size for `world-size` ranks.

    Policies, applied in this order (the first that claims a parameter wins):

    1. `ignore=<glob,...>`: matching parameters (by FQN) are kept replicated
       in the `ignored` unit; their gradients are all-reduced.
    2. `leaf-modules=<glob,...>` and `leaf-classes=<Class,...>`: every
       matching module (by path glob, or by class name through the module's
       `zest.module_classes` attribute) becomes a unit holding all parameters
       of its subtree. When nested modules match, the outermost wins.
    3. `min-unit-numel=N`: FSDP's size-based auto-wrap, bottom-up: a module
       becomes a unit once its parameters not yet wrapped by a descendant
       reach N elements.
    4. Everything else goes to the `root` unit.

    A unit holds one element type: a unit whose parameters have several is
    split into one unit per element type, named `<unit>[<type>]`.

    A pattern that matches nothing is an error (`no module matches
    'layers.*'`), as is a leaf module all of whose parameters are ignored.

    ```
    zest-opt --zest-group-units="world-size=4 leaf-modules=layers.*" m.mlir
    ```
  }];
  let dependentDialects = ["::mlir::zest::ZestDialect"];
  let options = [
    Option<"worldSize", "world-size", "int64_t", /*default=*/"1",
           "Number of data-parallel ranks the layout is padded for">,
    ListOption<"leafModules", "leaf-modules", "std::string",
               "Module path globs whose modules become units">,
    ListOption<"leafClasses", "leaf-classes", "std::string",
               "Module class names (zest.module_classes) that become units">,
    Option<"minUnitNumel", "min-unit-numel", "int64_t", /*default=*/"0",
           "Size-based auto-wrap threshold in elements (0 disables it)">,
    ListOption<"ignore", "ignore", "std::string",
               "Parameter FQN globs kept replicated instead of sharded">,
  ];
}

def ShardParamsPass : Pass<"zest-shard-params", "::mlir::ModuleOp"> {
  let summary = "Replaces parameters by unit shards, gathers and "
                "reduce-scatters";
  let description = [{
    Rewrites every function that takes parameters so that it takes one
    argument per unit it uses (`zest.unit = @u`: the rank's shard, or the
    whole buffer of a replicated unit) instead of the parameters, and returns
    one gradient argument per unit with gradients (`zest.unit_grad = @u`)
    instead of the per-parameter gradients.

    * Uses: a sharded unit is gathered (`zest.all_gather`) before each *use
      interval* — a maximal run of operations using its parameters that is
      not interrupted by a use of another sharded unit — and each parameter
      used there is a `zest.unflatten` view of the gathered buffer. In a
      forward + backward step this gives one gather per unit in forward and
      one re-gather in backward (FULL_SHARD), except for the last unit whose
      forward and backward uses are adjacent.
    * Gradients: right after the last gradient of a unit is computed, its
      gradients are packed with `zest.flatten` (zeros for frozen parameters
      and padding) and reduce-scattered with averaging (sharded units) or
      all-reduced (replicated units).

    Non-parameter arguments (data) and other results (loss, outputs) keep
    their order; unit arguments come first, unit gradients last.
    `world-size` defaults to the units' layout; a different value is an
    error.
  }];
  let dependentDialects = ["::mlir::zest::ZestDialect"];
  let options = [
    Option<"worldSize", "world-size", "int64_t", /*default=*/"0",
           "Number of data-parallel ranks (0: the one the units were laid "
           "out for)">,
  ];
}

def PrintUnitsPass : Pass<"zest-print-units", "::mlir::ModuleOp"> {
  let summary = "Prints the unit table";
  let description = [{
    Prints one row per `zest.unit` to standard output: name, kind, element
    type, parameter count, elements, padded size, shard size and the bytes
    each rank holds, followed by totals comparing per-rank bytes with the
    unsharded model. The IR is not changed.
  }];
}

def WriteManifestPass : Pass<"zest-manifest", "::mlir::ModuleOp"> {
  let summary = "Writes the flat-layout manifest (JSON)";
  let description = [{
    Writes the layout of every `zest.unit` as JSON: per unit its kind,
    element type, world size, padded and shard sizes, and its parameters
    with FQN, shape, dtype (safetensors names: F32, BF16, ...), offset and
    element count. Checkpoint tools use this file to shard and unshard
    parameters outside the program. `--zest-manifest=out.json` is short for
    `--zest-manifest="path=out.json"`; `-` writes to standard output. The IR
    is not changed.
  }];
  let options = [
    Option<"path", "path", "std::string", /*default=*/"\"-\"",
           "Output file (- for standard output)">,
  ];
}

def DecomposeAggregatesPass
    : Pass<"zest-decompose-aggregates", "::mlir::func::FuncOp"> {
  let summary = "Decomposes aggregate linalg ops (softmax, ...) into "
                "structured ops";
  let description = [{
    Ops implementing `linalg::AggregatedOpInterface` (e.g. `linalg.softmax`)
    are not structured ops and do not lower to loops; this pass replaces each
    by its decomposition (for softmax: max, sub + exp, sum, div as
    `linalg.generic`s), as `transform.structured.decompose_interface` does.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect"];
}

def FreeAfterLastUsePass
    : Pass<"zest-free-after-last-use", "::mlir::func::FuncOp"> {
  let summary = "Moves each buffer's dealloc right after its last use";
  let description = [{
    Ownership-based deallocation frees buffers at the end of their block. For
    a training step that keeps every gathered unit alive until the end of the
    step, i.e. no memory saving at all. This pass moves each `memref.dealloc`
    of a `memref.alloc` in the same block to just after the last operation
    that uses the buffer or anything derived from it (views, extracted
    pointers, the request handles of collectives reading or writing it). A
    buffer whose derived values reach another block or a terminator keeps its
    dealloc where it is.

    With this, a gathered unit returns to the pool right after its use
    interval (FSDP FULL_SHARD's free-after-forward), and activations after
    their last backward use.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

#endif // ZEST_DIALECT_ZEST_TRANSFORMS_PASSES_TD
