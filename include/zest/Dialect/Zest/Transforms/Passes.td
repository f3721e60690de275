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

def ExpertParallelPass : Pass<"zest-expert-parallel", "::mlir::ModuleOp"> {
  let summary = "Splits mixture-of-experts layers' experts over expert groups";
  let description = [{
    Sets the expert groups of the module's expert exchanges
    (`zest.expert_routing`, `zest.expert_dispatch`, `zest.expert_combine`,
    which `zest-import` writes around every experts computation).

    With `group-size=1` (no expert parallelism) the exchanges move nothing
    and fold away.

    With `group-size=N` each rank of a group of `N` consecutive ranks holds
    whole experts, `L = E / N` of each layer's `E`:

    * the experts' parameters (the grouped products' weights) become this
      rank's `L` experts (`[L, ...]` arguments and gradients, tagged
      `zest.expert_parallel = N` for `zest-group-units`);
    * the rows between a dispatch and its combine (forward and backward)
      are resized to the received rows' worst case, `N x rows`: every row
      of the group may be routed to this rank's experts; the grouped
      products' ends become the received rows' (`local_ends`).

    Errors: a group size that does not divide a layer's experts; an
    experts' parameter used other than as a grouped product's weights
    (per-expert biases); an operation between dispatch and combine that
    cannot be resized (only elementwise ops, slices and concatenations of
    columns and the grouped products can).
  }];
  let options = [
    Option<"groupSize", "group-size", "int64_t", /*default=*/"1",
           "Ranks of an expert group (1: no expert parallelism)">,
  ];
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
    4. `block-units`, when none of 2 and 3 is given: each *repeated block
       class* becomes a unit, as FSDP users wrap their decoder layers. A
       class is a repeated block when at least two of its modules are
       indexed children of one container (`transformer.h.0`,
       `transformer.h.1`, ... in `zest.module_classes`) and each has
       submodules of its own (a `Linear` in a `Sequential` is no block);
       nested blocks belong to the outermost.
    5. Everything else goes to the `root` unit.

    The module gets `zest.unit_policy`, the choice in words (the report
    prints it).

    With `strategy=no-shard` (DDP) every unit is replicated: each rank holds
    its whole buffer and optimizer state, and gradients are all-reduced per
    unit (no gathers). `full-shard` and `shard-grad-op` shard them (the two
    differ in `zest-schedule-collectives`).

    With `strategy=hybrid-shard replicas=R` (HSDP) the `world-size` ranks
    form an `R x S` mesh (`S = world-size / R`): units are sharded over the
    `S` ranks of each replica group and carry `replicas = R`, so
    `zest-shard-params` adds the all-reduce of each gradient shard across
    the replicas. `replicas` > 1 with another strategy is an error.

    A unit holds one element type: a unit whose parameters have several is
    split into one unit per element type, named `<unit>[<type>]`.

    `param-dtype` / `reduce-dtype` (`bf16` or `f16`) set the f32 units'
    `gather_type` / `reduce_type`: FSDP's `MixedPrecision(param_dtype,
    reduce_dtype)` on the wire, with f32 shards as the master copy.

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
    Option<"blockUnits", "block-units", "bool", /*default=*/"false",
           "Without leaf-modules, leaf-classes and min-unit-numel: each "
           "repeated block class of zest.module_classes becomes a unit">,
    ListOption<"ignore", "ignore", "std::string",
               "Parameter FQN globs kept replicated instead of sharded">,
    Option<"strategy", "strategy", "std::string", /*default=*/"\"full-shard\"",
           "full-shard, shard-grad-op or hybrid-shard (units sharded) or "
           "no-shard (every unit replicated, DDP)">,
    Option<"replicas", "replicas", "int64_t", /*default=*/"1",
           "hybrid-shard: number of replica groups (a divisor of world-size); "
           "units are sharded within each">,
    Option<"paramDtype", "param-dtype", "std::string", /*default=*/"\"\"",
           "Mixed precision: bf16 or f16 sends f32 units' gathers in that "
           "type (gather_type); empty: f32">,
    Option<"reduceDtype", "reduce-dtype", "std::string", /*default=*/"\"\"",
           "Mixed precision: bf16 or f16 reduces f32 units' gradients in "
           "that type (reduce_type); empty: f32">,
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
    * Derived values: a value computed from one parameter alone (a reshape,
      a transpose, an element-type cast: autocast's bf16 `W^T`) that a later
      use interval reads again (the backward) is derived again there from
      that interval's gather, not kept from forward to backward: the unit's
      re-gather serves it, as FSDP's resharding after forward does.
    * Gradients: right after the last gradient of a unit is computed, its
      gradients are packed with `zest.flatten` (zeros for frozen parameters
      and padding) and reduce-scattered with averaging (sharded units) or
      all-reduced (replicated units). A sharded unit with `replicas` > 1
      (hybrid sharding) then all-reduces its gradient shard across the
      replicas (`across_replicas`): the two averages make the mean over all
      ranks.

    Non-parameter arguments (data) and other results (loss, outputs) keep
    their order; unit arguments come first, unit gradients last.
    `world-size` (all ranks, replicas included) defaults to the units'
    layout; a different value is an error.
  }];
  let dependentDialects = ["::mlir::zest::ZestDialect"];
  let options = [
    Option<"worldSize", "world-size", "int64_t", /*default=*/"0",
           "Number of data-parallel ranks (0: the one the units were laid "
           "out for)">,
  ];
}

def CheckpointActivationsPass
    : Pass<"zest-checkpoint-activations", "::mlir::ModuleOp"> {
  let summary = "Recomputes units' forward activations before their "
                "backward (activation checkpointing)";
  let description = [{
    Runs on the sharded step (after `zest-shard-params`, before the
    collectives are scheduled). For each unit chosen (`units`: globs of unit
    names; by default every unit but the root), in every function: the
    values the unit's backward reads of its forward (its *saved
    activations*) are computed again right before the backward, from what
    the forward read from outside the unit (its inputs, the data, random
    streams: these stay alive instead) and from the parameters the backward
    gathers anyway. The originals then die at their last forward use.

    * `mode=full` keeps only the unit's inputs: the whole slice of the
      forward that computes the saved values is recomputed (PyTorch's
      `torch.utils.checkpoint` per block).
    * `mode=selective` also keeps the linear layers whose output the
      backward reads (directly or through views): a product (matrix,
      batched, convolution) with the elementwise chain its forward
      continues in, as `zest-fuse-linear` fuses it, so the layer stays one
      kernel and the losses stay bit for bit. The rest is recomputed:
      norms, softmax, rotary and residual arithmetic, and products only the
      recomputation needs (attention's scores), in the spirit of PyTorch's
      selective policy, which saves matmul outputs.

    No collective is added: the recomputation reads the unit's backward
    re-gather (moved up to the backward's first op when it was placed
    later; its operand is the shard), a replicated unit its own views. A
    unit's forward is its first run of ops working for it
    (`zest-outline-regions`' rule: an op works for the unit whose
    parameters it reads, else for that of its first user), its backward
    starts at the next op working for it. A unit whose forward and
    backward are one run (the last block of a stack: nothing lies between
    them to free memory for) or that has no backward is left alone.
    Modes mix per unit: `units=layers.0:full,layers.*:selective` recomputes
    the first block's whole forward and the others' cheap ops (what
    `--memory-budget` chooses where neither mode alone is the fastest
    fit). Dropout's random streams are values like any other, so the
    recomputation draws the same masks. Each value read from outside goes
    through a `zest.optimization_barrier`, so CSE cannot merge the
    recomputation with the forward. The checkpointed units are marked
    `zest.checkpoint = "full" | "selective"` for the report.

    ```
    zest-opt --zest-shard-pipeline="world-size=2 leaf-modules=layers.*" \
             --zest-checkpoint-activations="mode=full units=layers.*" m.mlir
    ```
  }];
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"full\"",
           "none, full (keep the unit's inputs) or selective (keep the "
           "linear layers' outputs the backward reads too)">,
    ListOption<"units", "units", "std::string",
               "Globs of the units checkpointed (default: all but the "
               "root); one ending in `:full` or `:selective` gives the "
               "mode of the units it names (the first match wins), others "
               "take `mode`">,
  ];
  let dependentDialects = ["::mlir::zest::ZestDialect"];
}

def OffloadOptimizerPass
    : Pass<"zest-offload-optimizer", "::mlir::ModuleOp"> {
  let summary = "Keeps units' optimizer state in pinned host memory and "
                "updates it on the host (ZeRO-Offload)";
  let description = [{
    Runs on the training step once its updates are placed (after
    `zest-insert-optimizer` and `zest-schedule-collectives`), for the GPU
    targets. For each unit chosen (`units`: globs; by default every unit),
    in every entry point:

    * the unit's shard, optimizer state and gradient accumulator arguments
      are marked `zest.host`: they live in pinned host memory, where the
      f32 master copy of the shard and the state are updated;
    * what reads the shard on the device (the gathers) reads a
      `zest.copy_to_device` of it, placed before its first reader and freed
      after its last;
    * the reduced gradient shard is copied into a new host argument (a
      *stage*, `zest.stage`) by a `zest.copy_to_host_start` right after the
      reduction, and the hyperparameters (after clipping wrote its scale)
      into another; the host waits for them (`zest.copy_wait`) only where
      the update runs;
    * the updates move to the end of the step, in the order their gradients
      arrive: the host issues all of the device's work first, then updates
      each unit as its gradient lands while the device computes the rest of
      the backward (DeepSpeed's ZeRO-Offload, without a separate thread).

    With `params`, the shard also stays on the host between its uses: each
    gather reads a copy of its own, made right before it and freed once the
    gather has completed, instead of one copy from the first gather to the
    last.

    The updates themselves are unchanged (`zest.update` lowers as on the
    device), so the losses are those of the step without offload; later,
    `zest-outline-kernels` runs what reads only host buffers on the host.
    The device saves the state and accumulator for the whole run and the
    shard between steps; it holds a shard copy from its first use to its
    last within the step.

    ```
    zest-opt --zest-front="world-size=2 leaf-modules=layers.* \
             optimizer=adamw" --zest-offload-optimizer m.mlir
    ```
  }];
  let options = [
    ListOption<"units", "units", "std::string",
               "Globs of the units offloaded (default: all)">,
    Option<"params", "params", "bool", /*default=*/"false",
           "Copy the shard to the device for each use (each gather) "
           "instead of once per step">,
  ];
  let dependentDialects = ["::mlir::zest::ZestDialect"];
}

def InsertOptimizerPass : Pass<"zest-insert-optimizer", "::mlir::ModuleOp"> {
  let summary = "Puts the optimizer into the sharded training step";
  let description = [{
    Runs after `zest-shard-params`. Every function returning unit gradients
    (`zest.unit_grad`) becomes a whole training step that updates its unit
    shards in place (ZeRO's partitioned optimizer, DeepSpeed's per-sub-group
    step): for each unit, a `zest.update` consumes the reduced gradient shard
    as soon as it exists and the shard is no longer read by the step (so with
    asynchronous collectives it overlaps the rest of backward).

    The function gains arguments, after the existing ones:

    * `zest.hyper`: `tensor<10xf32>` of hyperparameters (`zest_hyper_t` in
      `runtime/include/zest_runtime.h`: learning rate, weight decay, betas,
      epsilon, bias corrections, gradient scale, accumulate/apply flags),
      filled by the host before every micro-batch, so schedules need no
      recompilation;
    * per unit, its optimizer state (`zest.optimizer_state = {unit = @u,
      name = "exp_avg"}`; `sgd` with `momentum`: `momentum_buffer`; `adamw`:
      `exp_avg`, `exp_avg_sq`) and its gradient accumulator
      (`zest.grad_accum = @u`), all of the shard's type.

    Gradient results are replaced by the updated shard, state and
    accumulator, each marked `zest.updated = <argument number>`: after
    bufferization they are the argument buffers themselves. Gradients of
    frozen parameters are not applied (`frozen` on `zest.update`). The
    function is marked `zest.optimizer = "sgd" | "adamw"`.

    ```
    zest-opt --zest-shard-pipeline="world-size=2 leaf-modules=layers.*" \
             --zest-insert-optimizer="optimizer=adamw" m.mlir
    ```

    With `max-grad-norm=M` > 0 the gradients are clipped by their global
    norm, as `torch.nn.utils.clip_grad_norm_(params, M)` before the step:
    all updates move to the end of the function, after a
    `zest.global_grad_norm` of every unit's gradient; the gradient scale
    the updates receive is multiplied by `min(1, M / (norm + 1e-6))`. Units
    are then stepped together once backward is done, as FSDP and DeepSpeed
    do when clipping.

    With `no-sync` (FSDP's `no_sync()`, gradient accumulation that reduces
    once per step instead of once per micro-batch), every unit keeps its
    full flat gradient summed over the micro-batches in an argument
    `zest.grad_sum = @u` of the unit's padded flat type (a whole unit per
    rank: the memory traded for communication), and each training step
    `@f` gets a companion entry point `@f_accumulate`
    (`zest.accumulate_for = @f`): the same forward and backward with
    `grad_sum = ACCUMULATE ? grad_sum + g : g` instead of the gradient's
    reductions and updates, so it communicates only to gather parameters.
    The host calls it for every micro-batch but the last, then `@f`, which
    adds its own gradient to the sum, reduces that once and updates with
    `zest.update`s that take no shard accumulator.
  }];
  // Clipping and no-sync build arith, tensor and linalg ops.
  let dependentDialects = ["::mlir::zest::ZestDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
  let options = [
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"sgd\"",
           "sgd or adamw">,
    Option<"momentum", "momentum", "bool", /*default=*/"false",
           "sgd: keep a momentum buffer (its factor is a hyperparameter)">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false",
           "sgd with momentum: Nesterov momentum">,
    Option<"maxGradNorm", "max-grad-norm", "double", /*default=*/"0.0",
           "clip gradients to this global L2 norm (0: no clipping)">,
    Option<"noSync", "no-sync", "bool", /*default=*/"false",
           "accumulate full gradients over micro-batches and reduce once per "
           "step (adds the <step>_accumulate entry points)">,
  ];
}

def ScheduleCollectivesPass
    : Pass<"zest-schedule-collectives", "::mlir::ModuleOp"> {
  let summary = "Decides which gathered units are kept for backward and "
                "places the starts and waits of collectives";
  let description = [{
    Runs on the sharded step once the optimizer is in (`zest-insert-optimizer`)
    and decides, for every function body, what happens to each unit's
    gathered parameters and when each collective runs.

    * **Keep or re-gather.** `zest-shard-params` gathers a sharded unit once
      per use interval: in forward, then again in backward (FULL_SHARD,
      ZeRO-3). A *kept* unit is gathered once: its later gathers of the same
      shard are replaced by the first one's result, so the forward's gathered
      buffer stays alive until the unit's backward is done (SHARD_GRAD_OP,
      ZeRO-2; DeepCompile's selective unsharding per unit). `strategy=
      shard-grad-op` keeps every sharded unit; `keep-units=a,b` keeps the
      units named (what `zestc --memory-budget` picks).
    * **Buckets** (with `bucket-bytes` = B > 0), after the keep decisions
      and before the starts and waits are placed: runs of collectives of
      the same kind over units of one layout become one collective on a
      `zest.bucket` while their full buffers add up to at most B bytes
      (SimpleFSDP's bucketing, DDP's gradient buckets). Consecutive
      all-gathers in program order are merged into one at the first one's
      place: the members' shards are packed (`zest.pack`), gathered once
      and unpacked (`zest.unpack`, one copy per member), so later members
      are gathered early. Consecutive gradient reductions (reduce-scatters;
      all-reduces of replicated units; all-reduces across replicas) are
      merged at the last one's place, where every member's gradient exists;
      what reads an earlier member's result (its update) moves down with
      it, and a member whose readers cannot move ends the bucket. A bucket
      then starts and waits like one collective (below), so `prefetch`
      counts buckets. Collectives over one rank are not bucketed.
    * **All-gathers** (with `prefetch` = N > 0). The k-th gather of the
      step (forward gathers, then the backward re-gathers, in program order)
      waits where it was, and starts right after the wait of the (k-N)-th:
      while a unit computes, the next N units' gathers are in flight (FSDP's
      prefetch, N = 1 its default). The first N start at the top of the
      body, or after their shard is defined if that is later.
      `unit-prefetch=u:d,...` gives unit `u`'s gathers their own depth `d`
      (0: started where they are waited for); a bucket's gather takes the
      deepest of its members'. Starts keep their program order, so a gather
      never starts before the one preceding it.
    * **Gradient reductions** (with N > 0, or a unit's depth > 0):
      reduce-scatters, and the
      all-reduces of replicated units (no-shard, DDP), start where they
      were. Each waits right after the next one starts, so it overlaps the
      backward pass of the next unit; the unit's optimizer update (and
      anything else that reads the reduced gradient) moves down with the
      wait. If a reader
      cannot move (it has effects, or a value of it is needed earlier) the
      wait stays before the first reader. The last reduce-scatter waits
      where it started.
    * **Across replicas** (hybrid sharding, N > 0): a gradient shard's
      all-reduce across replicas reads the reduce-scatter's result, so it
      moves down with that wait and starts right after the next unit's
      reduce-scatter; it then waits right after the next gradient reduction
      that starts after it, with the update that reads it.

    Every rank runs the same program, so every rank issues the same
    collectives in the same order. Gathered buffers live from their start to
    their last use: N extra units at a time in the worst case, plus each kept
    unit from its forward to its backward. Collectives inside nested regions
    stay synchronous. With N = 0 (the default) and nothing
    kept, nothing changes.

    The decisions are recorded on each sharded `zest.unit` for the report
    (`zest-plan-memory`): `zest.prefetch` (the depth) and `zest.keep`.

    ```
    zest-opt --zest-schedule-collectives="prefetch=1 keep-units=layers.3" m.mlir
    ```
  }];
  let options = [
    Option<"prefetch", "prefetch", "unsigned", /*default=*/"0",
           "All-gathers in flight ahead of the unit computing (0: "
           "synchronous collectives)">,
    Option<"strategy", "strategy", "std::string", /*default=*/"\"full-shard\"",
           "full-shard or hybrid-shard (re-gather in backward), "
           "shard-grad-op (keep every unit gathered from forward to "
           "backward) or no-shard (nothing to gather)">,
    ListOption<"keepUnits", "keep-units", "std::string",
               "Units kept gathered from forward to backward (by name)">,
    ListOption<"unitPrefetch", "unit-prefetch", "std::string",
               "Per-unit depths instead of prefetch, <unit>:<depth> (what "
               "zestc --memory-budget picks)">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"0",
           "Merge runs of collectives whose full buffers add up to at most "
           "this many bytes into one (0: one collective per unit)">,
  ];
  let dependentDialects = ["::mlir::zest::ZestDialect"];
}

def LowerOptimizerPass : Pass<"zest-lower-optimizer", "::mlir::ModuleOp"> {
  let summary = "Expands zest.update into vectorizable linalg on tensors";
  let description = [{
    Replaces each `zest.update` by `scf.if`s on the accumulate / apply flags
    of its hyperparameters and one fused elementwise `linalg.generic` per
    case, in destination-passing style on the shard, state and accumulator
    (so bufferization updates them in place):

    * apply: one pass over parameter, gradient, (accumulator) and state that
      writes parameter and state; the hyperparameters are scalars read once
      per step (no per-element `pow`);
    * store: `accum = grad` or `accum += grad`.

    Units with frozen parameters get a mask on the global flat index
    (`zest.rank * shard_size + i`), so those elements keep their values.
  }];
  let dependentDialects = ["::mlir::zest::ZestDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
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

def ApproximateMathPass
    : Pass<"zest-approximate-math", "::mlir::func::FuncOp"> {
  let summary = "Replaces f32 math functions by polynomial approximations";
  let description = [{
    Rewrites the f32 `math` ops named in `functions` (default: `tanh`, `erf`,
    `exp`, `expm1`, `log`, `log1p`, `log2`) into upstream MLIR's polynomial
    approximations: arithmetic that LLVM vectorizes, where a libm call per
    element is scalar (tanh-GELU spent ~18% of a transformer step in `tanhf`).
    The error of each approximation over the whole f32 range is asserted by
    `test/E2E/math-approximation.test` (see docs/Runtime.md for the bounds).
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::vector::VectorDialect"];
  let options = [
    ListOption<"functions", "functions", "std::string",
               "math op names to approximate (default: tanh, erf, exp, "
               "expm1, log, log1p, log2)">,
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

def OutlineKernelsPass : Pass<"zest-outline-kernels", "::mlir::ModuleOp"> {
  let summary = "Outlines linalg ops on buffers into deduplicated kernel "
                "functions";
  let description = [{
    Compile time of a training step is dominated by LLVM working on one huge
    function (about 95% of a 12-block model's compile time), and a stack of
    L identical blocks gives it L copies of every loop nest. This pass moves
    each linalg op on buffers into a private kernel function, called where
    the op was, and compiles structurally identical kernels once: the same
    op, shapes, strides and constants give the same kernel whatever block
    it came from (the idea behind IREE's executable deduplication and
    torch.compile's regional compilation). What stays in the entry point is
    glue: allocations, views, runtime calls and kernel calls.

    A result-less `scf.if` that holds only such ops (the accumulate-or-not
    branches of an optimizer step) is outlined whole: left in the entry
    point, each would split its block, and `convert-scf-to-cf` and
    `convert-func-to-llvm` grow quadratically with the number of blocks.

    Values used inside an op's body but defined above it become kernel
    arguments, except constants, which are cloned in (so kernels that differ
    only by a constant stay distinct). Buffer arguments are cast to a
    dynamic offset, so a slice of a flat buffer and a fresh allocation of
    the same shape share a kernel. Kernels get internal linkage and LLVM's
    `noinline`: LLVM would otherwise inline them back and undo the saving.
    A kernel is named `zest_kernel_<N>_<what>`, `<what>` saying what it
    computes (its kind, its body's arithmetic, the element type it writes:
    `zest_kernel_3_reduce_add_f32`), so GPU profiles read without the IR.
    With `device-buffers` the module also records each kernel's bytes read,
    bytes written and operations per call (`zest.kernel_work`; of a
    branch's alternatives the one that moves more, of a loop with static
    trips its body times the trips), which zestc embeds for the GPU
    profile (`ZEST_KERNEL_TIMES`).

    A static `memref.copy` between views that are not both contiguous (a
    gradient copied into a column slice of a concatenation) becomes a
    `linalg.copy` first and is outlined like any loop nest; left alone it
    would call the runtime's generic element-by-element copy. Contiguous
    copies stay `memref.copy` (one `memcpy`).

    With `device-buffers` (`zestc --target=cuda`) the host cannot touch
    buffer elements: every copy becomes a kernel, and a scalar a kernel
    takes that is computed from buffer elements (`memref.load`s of the
    optimizer's hyperparameters, compared or combined by pure ops) is
    computed inside the kernel instead, which takes the loaded buffers, and
    a scalar the glue stores into a buffer is stored by a kernel. So is a
    view whose offsets are such scalars (an embedding's backward adds each
    gradient row at the row its token id selects): the kernel takes the
    view's source and the loop indices the slice uses, and places the view
    itself. Where the whole loop is one elementwise op on whole rows of
    loop-invariant buffers (rows of one buffer keeping the same dimensions,
    distinct buffers otherwise, none of them loaded from), its iterations
    touch each position of a row in one thread only: the loop becomes one
    kernel, marked `zest.per_position_loop` for `zest-map-kernels-to-gpu`.
  }];
  let options = [
    Option<"deviceBuffers", "device-buffers", "bool", /*default=*/"false",
           "Buffers live where the host cannot read them: every copy is a "
           "kernel, scalars loaded from buffers (and views they place) are "
           "computed in kernels">,
  ];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect"];
}

def OutlineRegionsPass : Pass<"zest-outline-regions", "::mlir::ModuleOp"> {
  let summary = "Outlines each unit's computation on tensors into functions "
                "and compiles repeated ones once";
  let description = [{
    Regional compilation (torch.compile's `compile` of a repeated block,
    IREE's deduplicated dispatch regions, at the grain of a leaf module): a
    stack of L identical blocks should cost the compiler one block, not L.
    `zest-outline-kernels` already emits each distinct loop nest once, but
    everything before it (bufferization, deallocation, the lowering to LLVM)
    still works on one entry point holding all L blocks. This pass runs on
    tensors, before bufferization, and leaves the entry point a short list
    of calls.

    Each public function's block is cut into regions: maximal runs of
    computation on tensors (linalg, tensor, arith, math, scf and Zest's
    fused linear ops, with no buffers or runtime calls inside), cut at every
    other op (a collective's runtime call, a buffer) and wherever the unit
    the computation works for changes. An op works for the unit whose
    parameters it reads through views and pointwise casts (an entry
    argument marked `zest.unit = @u`, or a gathered buffer whose collective
    carries `u`'s tag; a layer reading its weights rounded to bf16 works
    for their unit); an op that reads none works for the unit of its first user that
    has one, so a layer norm's statistics go with the block whose weights
    scale them and a weight gradient (which reads activations only) with
    the unit whose gradient buffer and optimizer step take it. A stack's
    regions are thus each block's forward and, in reverse, each block's
    backward with its optimizer step.

    Each region becomes a private function `zest_region_N` taking the
    values it reads and returning those read after it. Constants, empty
    tensors and static views of values computed outside regions are cloned
    in rather than passed, so the regions of different blocks (whose
    parameters sit at the same offsets of their units' flat buffers) print
    identically; a static view of a buffer the region computes is taken
    again by the caller rather than returned (bufferization would copy it
    out), and a static view of a buffer another region computed is taken
    again inside from that buffer, passed whole (q, k and v cut from a
    fused projection, read by the attention's backward: passed as views,
    each would be copied in). Where the views read after a region cover
    less than half of the buffer it computed and nothing after it reads the
    buffer otherwise (Pythia's v, a third of its fused projection whose q
    and k parts the rotary embedding consumed), each view is copied at the
    end of the region instead (`bufferization.alloc_tensor ... copy`), so
    the rest of the buffer is freed with the region rather than held until
    the backward. Regions that print identically are one function. A
    region that occurs once, or has fewer than `min-ops` ops, stays where
    it is: a model without repeated blocks is left as it was.

    After bufferization the regions' in-place updates of shards and
    optimizer state come back as their arguments
    (`drop-equivalent-buffer-results`), and `zest-plan-memory` replays each
    call's allocations on top of its caller's, so the plan stays exact.

    The `zest.unit` argument attributes are consumed (removed) here; zestc
    keeps them for this pass only.
  }];
  let options = [
    Option<"minOps", "min-ops", "int64_t", /*default=*/"4",
           "Regions with fewer ops stay in the entry point">,
  ];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect",
                           "::mlir::func::FuncDialect"];
}

def CloneSharedFillsPass
    : Pass<"zest-clone-shared-fills", "::mlir::func::FuncOp"> {
  let summary = "Gives every op that writes a filled tensor its own fill";
  let description = [{
    Canonicalization and CSE merge the identical `linalg.fill`s that start
    products and reductions (torch-mlir's zeros, one per op) into one fill
    with many users: an imported Llama block has one zero `128x768` tensor
    that 109 ops start from. Bufferization then fills one buffer and copies
    it into every op's destination before the op writes it, a wasted pass
    each (and a product that cannot see its start is zero accumulates into
    the copy).

    Each linalg op that takes a shared fill as its destination (a DPS init)
    gets a clone of the fill right before it, so it fills its own buffer in
    place; `zest-matmul-to-blas` then drops a zero fill that directly
    precedes a product (beta = 0). A fill read as an input keeps the
    original; one left without users is erased.

    A splat constant that a loop starts an iteration argument from (the
    cross-entropy backward's scatter into zeros) becomes a fill of an empty
    tensor right before the loop: bufferized, the constant would be a global
    copied into a new buffer every step.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def DropOverwrittenFillsPass
    : Pass<"zest-drop-overwritten-fills", "::mlir::func::FuncOp"> {
  let summary = "Drops fills that the slices inserted into them overwrite";
  let description = [{
    A concatenation written as `tensor.insert_slice`s into a filled tensor
    (the q, k and v gradients packed into the qkv gradient) bufferizes into
    a fill of the whole tensor that the copies of the pieces then overwrite.
    A `linalg.fill` whose result is only the destination of a chain of
    `insert_slice`s with static, disjoint slices whose sizes add up to the
    whole tensor fills nothing anyone reads: the chain starts from the
    fill's destination instead.

    Slices that overlap or leave a gap, dynamic or strided slices, and a
    filled value read by anything else keep the fill.

    (The pieces are still copied into their slices: computing each in place
    would have the whole concatenation allocated when its first piece is,
    which raises the peak of the transformer step by 8%.)
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def GroupParameterCastsPass
    : Pass<"zest-group-parameter-casts", "::mlir::func::FuncOp"> {
  let summary = "A unit's parameter casts as one cast of its flat buffer";
  let description = [{
    Under `torch.autocast` every weight is rounded to bf16 (or f16) just
    before its layer reads it: a pointwise `truncf` of a `zest.unflatten`,
    one small kernel per weight (seven per Llama block in forward, seven
    again in backward from the re-gathered unit).

    The casts in one block that read parameters of the same flat buffer
    and convert them the same way (same target type, same `truncf`
    attributes) become one cast of the span of the buffer the parameters
    occupy, placed where the first of them was; each cast is replaced by a
    slice of the result reshaped to its parameter's shape (a view once
    bufferized). The values are the same bits: the same `truncf` of the
    same elements. Parameters that lie between the cast ones in the buffer
    (a norm's weight read in f32) are rounded too, at no cost in launches,
    and their f32 reads are untouched.

    The rounded span stays allocated from the first of the casts to the
    last reader of any of its slices: the memory plan counts it. A single
    cast, or casts in different blocks, are left as they are.
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect",
                           "::mlir::linalg::LinalgDialect"];
}

def NarrowLossCastsPass
    : Pass<"zest-narrow-loss-casts", "::mlir::func::FuncOp"> {
  let summary = "The cross-entropy on 16-bit logits where autocast widens them";
  let description = [{
    Under `torch.autocast` the head's product yields bf16 (or f16) logits
    and the loss widens them to f32: `zest.cross_entropy` then reads an f32
    copy of `[tokens, vocabulary]`, and its backward writes an f32 gradient
    that is rounded back to 16 bits for the head's backward. Both ops take
    16-bit logits and compute in f32 whatever the storage, so:

    * a `zest.cross_entropy` whose logits are a pointwise `extf` (a
      `linalg.generic`), or a `tensor.collapse_shape` of one, reads the
      16-bit values directly (collapsed the same way);
    * a `zest.cross_entropy_backward` of such logits whose gradient is only
      rounded to their 16-bit type by a pointwise `truncf` (through a
      `tensor.expand_shape` or not) reads the 16-bit logits and writes the
      16-bit gradient, which replaces the rounded one. Its kernels round
      the same f32 values to nearest even, as `truncf` does: the results
      are the same bits.

    The widening then has no user left, and neither f32 array exists. A
    gradient with other users, or rounded to another type, keeps the f32
    backward (the forward is narrowed regardless).
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
}

def ReuseLogitsPass : Pass<"zest-reuse-logits", "::mlir::func::FuncOp"> {
  let summary = "The logits' gradient overwrites the logits";
  let description = [{
    `zest.cross_entropy_backward` is the last reader of the logits in a
    training step, and each of its kernels reads a logit before it writes
    the gradient at the same place. A backward whose destination is a
    `tensor.empty` of the logits' type gets the logits as its destination:
    One-Shot Bufferize then writes the gradient over the logits' buffer
    (the op bufferizes to element-wise access of the two), so the loss
    holds one `[tokens, vocabulary]` array instead of two, as Liger-Kernel's
    cross-entropy does in place. Where something still reads the logits
    afterwards, bufferization gives the gradient a buffer of its own (the
    destination is write-only: nothing is copied), as before.

    ```mlir
    %e = tensor.empty() : tensor<4x10xf32>
    %dx = zest.cross_entropy_backward mean ignore_index(-100)
        grad_loss(%g : tensor<f32>)
        ins(%logits, %t, %lse : tensor<4x10xf32>, tensor<4xi64>, tensor<4xf32>)
        outs(%e : tensor<4x10xf32>) -> tensor<4x10xf32>
    // becomes ... outs(%logits : tensor<4x10xf32>)
    ```
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
}

def SplitEntryBlockPass
    : Pass<"zest-split-entry-block", "::mlir::func::FuncOp"> {
  let summary = "Moves a function's body out of its entry block";
  let description = [{
    The body of the entry block moves to a new block that the entry block
    branches to (`cf.br`); the entry block keeps only the arguments.

    This keeps `convert-func-to-llvm` linear in the size of a training step.
    Dialect conversion replaces each converted function argument with a
    value it builds at the top of the entry block, and only the uses after
    that value: for uses in the same block, it asks for the order of the
    two operations, and every value it inserts invalidates the block's
    order, so each argument renumbers the whole block (quadratic: 7% of a
    96-block compile, and the largest superlinear term). With the uses in
    another block no order is needed. Runs last before `convert-cf-to-llvm`
    (a canonicalization would merge the blocks back); LLVM removes the
    branch.
  }];
  let dependentDialects = ["::mlir::cf::ControlFlowDialect"];
}

def PlanMemoryPass : Pass<"zest-plan-memory", "::mlir::ModuleOp"> {
  let summary = "Predicts each entry point's peak pool and gathered bytes";
  let description = [{
    After bufferization and `zest-free-after-last-use`, every buffer a step
    allocates has a static size and a known allocation and free point, so
    its peak memory is known before it runs. This pass replays each public
    function's body in program order as the runtime's pool will see it:
    `memref.alloc` adds its size rounded up to the pool's 64-byte buckets,
    `memref.dealloc` subtracts it; a buffer passed to
    `zest_pool_mark_gathered` (an all-gather's result) also counts as
    gathered parameter bytes, unrounded, until it is freed. Under
    `--target=cuda` the CUDA runtime's own pool use counts too: a fused
    linear backward with an activation (`zest_cuda_linear_backward*`) holds
    its `m x n` gradient for the call, and a step with any cuBLASLt product
    holds the workspace (`ZEST_CUDA_WORKSPACE_BYTES`) throughout. The
    highest running sums are the step's `predicted_peak_pool_bytes` and
    `predicted_peak_gathered_bytes`, which the executable's summary line
    must match exactly (`peak pool bytes per rank`, `peak gathered
    parameter bytes per rank`); the report also names the op at which each
    peak is reached.

    The replay also places every buffer in the pool's arena with the
    runtime's own placement (`runtime/include/zest_pool_arena.h`: best fit
    among the holes below the top, else at the top). The highest top it
    reaches is the arena the step reserves (`zest-reserve-pool`); with the
    buffers kept outside it (the cuBLASLt workspace) it is the step's
    `predicted_pool_footprint_bytes`: the memory the pool takes from the
    system or the device, which the summary's `pool footprint bytes per
    rank` must match. Live bytes and footprint differ by the holes the
    placement leaves.

    The same replay is what `zestc --memory-budget` chooses a schedule by;
    with `memory-budget` > 0 the pass fails if the predicted pool footprint
    exceeds it (or cannot be predicted); with `device-arguments` (GPU
    targets), if the footprint plus the arguments not in pinned host memory
    does.

    Writes a JSON report to `report-json` (nothing when empty; the schema,
    `zest-report/1`, is documented in docs/Scheduling.md, section 6):

    * `units`: per unit its `name`, `kind`, `dtype`, `parameters`, `numel`,
      `bytes` (the padded flat buffer), `shard_bytes`, and what
      `zest-schedule-collectives` decided: `prefetch` depth and `decision`
      (`keep`, `re-gather` or `replicated`);
    * `functions`: per entry point its `predicted_peak_pool_bytes`,
      `predicted_pool_footprint_bytes`, `predicted_peak_gathered_bytes`,
      `peak_pool_at` and `peak_gathered_at`
      (the op and location of each peak), and its `collectives` in the order
      every rank issues them (`kind`, `unit`, `bytes`, and the
      `sent_bytes_per_rank` and `received_bytes_per_rank` of a ring
      algorithm, as the runtime counts them) with their sum
      `sent_bytes_per_rank`;
    * with `machine`, the machine description (`machine`) and per entry
      point its predicted `cost` in microseconds per call: `compute_us`,
      `communication_us`, `exposed_communication_us` and `step_us`. The
      replay (`CostModel.h`) runs kernels one after another on a roofline
      (2 m n k at the GEMM rate for products, the larger of arithmetic and
      memory traffic for other kernels, plus a call overhead) and transfers
      on one link per rank in the order they start, each taking latency +
      bytes sent / bandwidth; a wait blocks until its transfer is done, as
      the runtime's modeled link (`ZEST_LINK`) behaves. Under a hybrid mesh
      a machine with a replica link (`replica-link`, the `h100-nvlink`
      preset's InfiniBand) moves the collectives between replica groups on
      that second link, with its own queue (`ZEST_REPLICA_LINK`);
    * `world_size`, `memory_budget_bytes`, and the top-level
      `predicted_peak_pool_bytes`, `predicted_pool_footprint_bytes` and
      `predicted_peak_gathered_bytes`, the largest over the functions.

    A function that allocates inside nested regions it cannot balance or
    with dynamic sizes cannot be replayed exactly: it is reported with
    `null` peaks. With `report`, the unit table, the peaks and a summary of
    the collectives are printed as text.
  }];
  let options = [
    Option<"reportJson", "report-json", "std::string", /*default=*/"\"\"",
           "Where to write the JSON report (- for standard output)">,
    Option<"reportText", "report", "bool", /*default=*/"false",
           "Print the plan as text on standard output">,
    Option<"memoryBudget", "memory-budget", "int64_t", /*default=*/"0",
           "Fail if the predicted pool footprint per rank exceeds this "
           "(0: no budget)">,
    Option<"arenaAlignment", "arena-alignment", "int64_t", /*default=*/"64",
           "Alignment of every buffer in the pool's arena: 64 (the pool's "
           "buckets) on the host, 256 on a GPU (cudaMalloc's, which "
           "cuBLASLt assumes)">,
    Option<"deviceArguments", "device-arguments", "bool",
           /*default=*/"false",
           "The budget also holds the arguments on the device (GPU "
           "targets: everything the step keeps in device memory)">,
    Option<"machine", "machine", "std::string", /*default=*/"\"\"",
           "Predict each entry point's time on this machine: cpu or "
           "h100-nvlink (empty: no prediction)">,
    Option<"link", "link", "std::string", /*default=*/"\"\"",
           "The machine's link instead of its preset's: <GB/s>,<latency us> "
           "(as ZEST_LINK)">,
    Option<"replicaLink", "replica-link", "std::string", /*default=*/"\"\"",
           "The machine's link between replica groups instead of its "
           "preset's: <GB/s>,<latency us> (as ZEST_REPLICA_LINK)">,
  ];
}

def SplitOwnedDeallocsPass
    : Pass<"zest-split-owned-deallocs", "::mlir::func::FuncOp"> {
  let summary = "Frees unconditionally owned allocations with plain deallocs";
  let description = [{
    Runs between `ownership-based-buffer-deallocation` and
    `buffer-deallocation-simplification`. The former puts every allocation of
    a block into one `bufferization.dealloc` at the block's end; the latter
    compares each pair of its memrefs for aliasing, which is quadratic in the
    size of a training step. Distinct `memref.alloc` results never alias, so
    each allocation in such an op with a constant-true ownership condition
    becomes a `memref.dealloc`, unless another memref of the op is a view of
    it. Ops with retained values, or with a memref whose origin cannot be
    traced to an allocation or a function argument, are left alone.
  }];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect",
                           "::mlir::memref::MemRefDialect"];
}

def FoldTransposesPass
    : Pass<"zest-fold-transposes", "::mlir::func::FuncOp"> {
  let summary = "Products and elementwise ops read transposed operands in "
                "place";
  let description = [{
    No transposed copy is written where the op that reads it can read the
    original through its indexing map. Imported graphs are full of them:
    the tied head's `W^T` (50257 x 768 for GPT-2) every step, the weight
    gradients' `x^T`, a linear backward's `W^T`, and attention's head split
    and merge (`[B, S, H, Dh] <-> [B, H, S, Dh]`, four per layer forward and
    four backward).

    * A product (`linalg.matmul`, `linalg.batch_matmul`, or a generic
      `acc + a * b` over loops `(batch..., m, n, k)`) whose input is a
      transpose or a broadcast reads the source instead, when it can read
      it as a strided batch of matrices (`getGemmLayout`: each matrix's
      innermost dimension contiguous, rows and batches any stride apart; A
      and B may be shared across batches, as grouped-query attention's keys
      are across a group's query heads). `zest-matmul-to-blas` passes the
      strides to BLAS and cuBLASLt.
    * A batched product whose operand collapses batch dimensions
      (`[B, H, S, Dh]` to `[B * H, S, Dh]`), or whose result is expanded so,
      is split into one loop per dimension first, so that each operand is
      read in its own layout.
    * A product, or any other generic, whose result only feeds transposes
      (one, or several alike: a Llama's rotated q, read by attention's
      forward and backward) writes the transposed layout directly through
      its output map; one that reduces into a fill gets the fill in the
      transposed shape.
    * An elementwise generic reads a transposed input through its map.
    * Transposes move through slices, concatenations and group-moving
      collapses towards the ops that fold them.
    * A rounding of a transpose (`arith.truncf` of each element: autocast's
      bf16 cast of `W^T`) is done before the transpose instead, on the
      weight itself, so the transpose meets the product and folds, and a
      bf16 gather widened to f32 then rounded back reads the gathered values
      as they are.
    * A `zest.attention` or `zest.attention_backward` whose `[B, H, S, D]`
      arrays are mostly transposes of `[B, S, H, D]` ones, or results only
      transposed back (PyTorch's `view(B, S, H, D).transpose(1, 2)` of a
      projection and the transpose back of the output), becomes
      `sequence_major`: it reads q, k and v where the projection wrote them
      (the runtime takes each array's strides) and writes the output as the
      next projection's rows. Arrays written or read by elementwise
      generics (only attention reading them), or by the other attention
      op, count for neither side: those ops take either layout at the same
      cost, so a Llama's attention, whose q and k its rotary embedding
      writes and whose gradients its backward reads, follows the transposes
      of its output and the output's gradient. Any other array gets a
      transpose, which may meet its producer or reader and fold there;
      transposes back to back compose and cancel.

    A transpose with other users stays for them; one left without users is
    erased. What stays: a transpose feeding a concatenation or a named
    (non-generic) op; the concatenation copies its operands anyway.

    ```
    %t = linalg.transpose ins(%w : tensor<50257x768xf32>)
           outs(%e : tensor<768x50257xf32>) permutation = [1, 0]
    %y = linalg.matmul ins(%x, %t : tensor<128x768xf32>, tensor<768x50257xf32>) ...
    // becomes
    %y = linalg.generic {indexing_maps = [(m, n, k) -> (m, k),
                                          (m, n, k) -> (n, k),
                                          (m, n, k) -> (m, n)], ...}
           ins(%x, %w : tensor<128x768xf32>, tensor<50257x768xf32>) ...
    ```

    Attention's output per head, `P V` with V and the output in
    `[B, S, H, Dh]`, becomes a product over loops `(b, h, m, n, k)` reading
    `V[b, k, h, n]` and writing `O[b, m, h, n]`.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def FuseLinearPass : Pass<"zest-fuse-linear", "::mlir::ModuleOp"> {
  let summary = "Rewrites linear layers in linalg into fused linear ops";
  let description = [{
    Recognizes, on f32 or bf16 linalg-on-tensors with static shapes (one
    element type per layer), the pieces of a
    linear layer and replaces them with `zest.linear` and
    `zest.linear_backward`, which the CPU lowering runs as OpenBLAS products
    with the elementwise work fused into one blocked pass:

    * forward: a product `x * W^T` or `x * W` (`linalg.matmul` with any
      indexing maps, or an equivalent generic) starting from zeros or from a
      broadcast bias, optionally followed by a bias add (`+ b[n]` in an
      elementwise generic) and an activation. The pre-activation is kept as
      a second result only when something else reads it (the activation
      backward).
    * backward: from one matrix `g`, any of `g * op(W)` (grad_input),
      `g^T * x` or `x^T * g` (grad_weight) and the column sum of `g`
      (grad_bias), each starting from zeros; and, when `g` is used by
      nothing else, the activation backward `g = dy * act'(z)` that
      produced it. Fused when that saves a pass: two gradients or more, or
      an activation backward.
    * autocast's plain product: 16-bit `x * op(W)` into f32 zeros that
      only a pointwise `truncf` back to the 16-bit type reads becomes a
      16-bit `zest.linear` without bias or activation (its kernels
      accumulate in f32 and round to nearest even, as `truncf` does): the
      f32 matrix is never written (the LM head's `[tokens, vocabulary]`
      under autocast).

    Activations (ReLU, GELU with tanh or erf, SiLU) and their derivatives
    are recognized by evaluating the elementwise body in double on sample
    points, so every spelling of the same function matches and a near miss
    (another constant, a leaky ReLU, a different function) does not; bodies
    on bf16 are compared at bf16 precision (2^-7). A product with neither
    bias nor activation (but the rounded one above), a dynamic layer, a
    layer mixing element types, and chains whose values are read in between
    are left to the unfused lowering.

    Layers over N-D activations (`[B, S, D]`, f32 or bf16) are first
    brought to matrices: adjacent row loops that every operand reads contiguously are
    merged (`tensor.collapse_shape` / `tensor.expand_shape`, views after
    bufferization) in products over loops `(b, s, n, k)` and in elementwise
    ops and reductions that read or feed reshaped 2-D values; a batched
    product with a broadcast weight (torch-mlir's `x[B,S,K] @ W[K,N]`)
    reads the weight directly instead of B copies of it.
  }];
  let dependentDialects = ["::mlir::zest::ZestDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
}

def FuseLinearCrossEntropyPass
    : Pass<"zest-fuse-linear-cross-entropy", "::mlir::func::FuncOp"> {
  let summary = "Fuses the LM head's product into the loss, in chunks of rows";
  let description = [{
    A training step computes the head's logits `x * op(W)` (`[tokens,
    vocabulary]`), `zest.cross_entropy` over them, its backward, and the
    head's gradients `g * op(W)^T` and `op(g, x)` from the logits' gradient
    `g`. Where the logits and `g` are read by nothing else, this pass
    replaces the five ops with one `zest.linear_cross_entropy`, which takes
    the rows in chunks (Liger-Kernel's fused linear cross-entropy): a chunk's
    logits, their loss, their gradient in place, and the chunk's share of
    both gradients, before the next chunk. Only one chunk of logits
    exists, in a workspace the memory plan counts; neither the whole
    logits nor their gradient is ever formed.

    Matched on linalg-on-tensors after `zest-fuse-linear` and
    `zest-narrow-loss-casts`: the forward product is a linalg matrix
    product from zeros or a `zest.linear` without bias or activation, its
    input, weight and logits in one type (f32, or autocast's bf16 / f16);
    the gradients are f32 linalg products from zeros (autocast's widened
    products of the 16-bit gradient, whose rounding stays after the fused
    op) or an f32 `zest.linear_backward` without activation or bias
    gradient, reading the forward's own `x` and `W`. Either gradient may be
    absent (a frozen head, an input that needs none). The loss's reduction
    is mean or sum, and its gradient must be available where the forward
    loss is computed (the step's constant seed is). The fused op goes where
    the forward loss was. Anything else (a loss per row, logits also
    returned or read elsewhere, 16-bit gradients rounded inside a fused
    layer) keeps the unfused ops.

    The chunk is `chunk-rows` rows, or by default the head's input
    features (at most the rows): the workspace is then no larger than the
    head's weight, whose gradient each chunk adds to.
  }];
  let options = [
    Option<"chunkRows", "chunk-rows", "int64_t", /*default=*/"0",
           "Rows per chunk (0: the head's input features, at most the rows)">,
  ];
  let dependentDialects = ["::mlir::zest::ZestDialect",
                           "::mlir::tensor::TensorDialect"];
}

def WidenAccumulatorsPass
    : Pass<"zest-widen-accumulators", "::mlir::func::FuncOp"> {
  let summary = "Sums of 16-bit floats accumulate in f32, rounded once";
  let description = [{
    torch-mlir lowers `aten.sum` of a bf16 or f16 tensor (a bias's gradient
    under autocast, `g.sum(0)`) to a `linalg.generic` whose accumulator is
    the 16-bit output: each addition is rounded to the 16-bit type, and a
    column of 4096 bf16 terms ends about 5% off its exact sum. PyTorch's
    kernels (CPU and CUDA) accumulate such sums in f32 and round the result
    once, which is what eager's gradients are.

    A `linalg.generic` on tensors with a reduction iterator and one 16-bit
    float output whose body yields `out + x` (`out` read nowhere else)
    becomes:

    * the same reduction into an f32 tensor, adding `extf(x)`; its initial
      value is the widened constant where the output was a `linalg.fill` of
      one (the usual zeros), else the output widened element by element;
    * a pointwise `truncf` of the f32 sum to the original type. Where the
      sum's only user is a `tensor.collapse_shape` or `tensor.expand_shape`,
      the reshape takes the f32 sum and the rounding follows it, so that it
      meets the widening a gradient's next user (the f32 master gradient)
      applies and `zest-fuse-elementwise` makes the two one op.

    The terms `x` keep their 16-bit values (they are the tensor PyTorch
    sums); only the accumulation widens. Maxima and minima are exact in any
    type and stay. Runs after `zest-fuse-linear` (whose fused backward
    computes a layer's bias gradient in f32 itself) and before
    `zest-fuse-elementwise`; on a device target the f32 sum is then split
    and run as any f32 reduction.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def FuseElementwisePass
    : Pass<"zest-fuse-elementwise", "::mlir::func::FuncOp"> {
  let summary = "Fuses elementwise producers into their linalg consumers";
  let description = [{
    On linalg-on-tensors, an elementwise `linalg.generic` (all loops
    parallel) whose results are read only by one other `linalg.generic` is
    fused into it: one loop nest, one pass over memory, no temporary tensor.
    Chains fuse transitively (a layer norm's centering, squaring and sum
    become one reduction; a GELU backward's inputs one elementwise op).

    A producer several ops read is computed anew in each of them, and never
    stored, when that holds no tensor longer: every reader is a generic it
    fuses into, and each of its inputs is read at or after the last reader
    anyway (or is smaller than its result: a bias, a row's statistics).
    That is how an activation's intermediates go (GPT-2's GELU: `0.5 x`,
    `tanh(...)`, `1 + tanh(...)`, which the backward reads beside `x`): the
    forward becomes one kernel that writes only the activation, and the
    backward re-derives them from `x`, as torch.compile's partitioner
    recomputes them. At most 24 ops and 4 readers, all in the producer's
    block (a reader in a loop's body would compute it on every iteration).

    torch-mlir's unit views between such ops (an op of GPT-2's GELU
    backward on `[1, S, D]`, read and written through `expand_shape` /
    `collapse_shape` of its `[S, D]` neighbours) would stop the chain: an
    elementwise op that only reads such reshapes (or scalars) and is only
    read through one loses its unit loops first (upstream's `dropUnitDims`),
    the reshapes cancel, and the chain fuses.

    An elementwise op (static shapes, no index reads) that reads a
    `tensor.concat` nothing else reads, along one of its loops, is computed
    once per concatenated part over that part of the loop, its other
    operands sliced alike, each part's result inserted into its slice of a
    new tensor (written in place once bufferized): the parts' producers
    then fuse into it and the concatenation is never stored. A rotary
    embedding's `x cos + rotate_half(x) sin`, `rotate_half(x) =
    cat(-x2, x1)`, was a negation, a transpose and two copies before the
    op; it is two kernels. A `linalg.transpose` that keeps its innermost
    dimension in place and that only an elementwise generic reads is
    generalized so that it fuses there: the reader reads it in place, rows
    still contiguous.

    Left apart, so that each op keeps the form its own lowering needs:
    matrix products (they go to BLAS), other producers read by anything else
    (fusing would compute them twice), and producers a consumer reads
    through a broadcast (each producer element would be recomputed once per
    consumer iteration that reads it), unless the producer is a cast (a
    16-bit LayerNorm weight widened to f32: a conversion per element costs
    less than a pass over memory and, on a GPU, a launch). Runs after `zest-fuse-linear`, which
    wants activations as separate ops, and before the optimizer is lowered.

    A generic that copies its one input into a result of the same type
    through the same permutation (a widening and a rounding fused, each of
    which also transposed: a Llama's v once attention reads it
    sequence-major) is replaced by that input.

    Generics also lose the results nothing reads and the inputs they read
    twice (upstream's erase-unused-operands-and-results patterns): torch's
    `max.dim` in every softmax computes indices only the maximum is used
    of, and a producer read twice by one consumer is then read once and
    fused.

    Once nothing more fuses, two independent elementwise generics in one
    block over the same loop bounds that read a common tensor through the
    same permutation (the same value, or the same slice of one) become one
    generic with the results of both, at the later one's place: one loop
    nest, one kernel on a GPU, reads that tensor once. The earlier one
    moves only where nothing before the later one reads its results and
    each of its inputs is held until then anyway (read there or later, or
    smaller than the domain). The two per-part ops of a rotary embedding,
    forward and backward, each reading both halves of the head, are one
    kernel each way.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def ReassociateReductionsPass
    : Pass<"zest-reassociate-reductions", "::mlir::func::FuncOp"> {
  let summary = "Marks float sum reductions reassociable so they vectorize";
  let description = [{
    In every structured op (`linalg.generic`, `linalg.reduce`, ...) with a
    reduction iterator, an output whose
    yielded value is `arith.addf` of that output's block argument and
    another value (a sum) gets `fastmath<reassoc>` on that addition. Only
    the combiner is marked: the rest of the body keeps IEEE semantics.

    Lowered as written, such a sum is a sequential chain of additions LLVM
    may not reorder: it stays scalar, and its error grows with its length
    (why a loss over N·D elements agreed with a float64 reference only to
    about 6e-6). With the combiner reassociable, LLVM's loop vectorizer
    keeps one partial sum per vector lane and unrolled copy and combines
    them at the end — a blocked summation order, vectorized, whose error
    grows with N/32 instead of N. The order is fixed by the target, so
    results stay deterministic run to run.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect"];
}

def VectorizePass : Pass<"zest-vectorize", "::mlir::func::FuncOp"> {
  let summary = "Tiles and vectorizes linalg ops on buffers (vector dialect)";
  let description = [{
    Every structured op on buffers with static loop ranges and numeric
    operands is vectorized along its innermost loop, as IREE's CPU codegen
    does:

    1. **Tiles.** The innermost loop is cut into tiles of `unroll` vector
       registers (`vector-bits` wide: 32 f32 lanes for AVX2); the other
       loops step by one, parallel loops outside reductions. When the
       innermost extent is not a whole number of tiles, the op is first
       split (upstream `splitOp`) into whole tiles and one smaller
       remainder tile: no masks, no partial vectors in the main loop.
    2. **Vectorizes** each tile with upstream's linalg vectorizer
       (`vector.transfer_read`/`write`, elementwise vector arithmetic,
       `vector.multi_reduction`).
    3. **Keeps accumulators in registers.** Transfers are folded into their
       base buffers, unit dimensions dropped, and an accumulator read and
       written at loop-invariant indices is hoisted out of the reduction
       loop. A reduction along the innermost loop then carries a whole
       vector of partial results across the loop and combines its lanes
       once at the end: a blocked order, with no horizontal reduction per
       tile.

    An innermost reduction is vectorized only when its order may change:
    integer and min/max combiners, and float sums and products marked
    `reassoc` (`zest-reassociate-reductions` marks sums). Ops left alone
    (dynamic ranges, memref loads in the body, fixed-order float
    reductions) are lowered to scalar loops as before. Runs after
    `zest-outline-kernels`, so each distinct kernel is vectorized once.
  }];
  let options = [
    Option<"vectorBits", "vector-bits", "unsigned", /*default=*/"256",
           "Width of a vector register in bits (256: AVX2)">,
    Option<"unroll", "unroll", "unsigned", /*default=*/"4",
           "Vector registers per tile along the innermost loop">,
  ];
  let dependentDialects = ["::mlir::affine::AffineDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
}

def WriteCopiesInPlacePass
    : Pass<"zest-write-copies-in-place", "::mlir::ModuleOp"> {
  let summary = "Ops write the slices their results are copied into";
  let description = [{
    Bufferized, a concatenation of one op's results (attention's q, k and v
    gradients joined into the fused QKV projection's gradient) is a buffer
    per result, written by the op, then a copy of each into its slice of the
    concatenation: three passes over the gradient and, on a GPU, three
    launches a layer. When a copy's source is a fresh allocation (or a
    reshape of one) that one op only writes, and its target a view of a
    fresh allocation that nothing reads or writes from that op up to the
    copy (other than through static views disjoint from the target's: the
    other parts of the concatenation, copied in between, as Pythia's q and
    k gradients are after its rotary embedding's backward), the op writes
    the target's view directly (reshaped as the source was): the copy and
    the source's buffer go, and the target is allocated before the op. A target may also be an argument of a private function
    that every call passes an allocation of its own, passed nowhere else in
    the call (a region's result, made an out-parameter): nothing else
    aliases it there either. The merged per-part ops of a rotary embedding
    write their two halves into the region's result so. Views compose:
    a slice of a slice of the target is the box of the target it covers.

    A source that several ops access before its copy (a column sum started
    from a fill, or from a copy of the old gradient, then copied into the
    unit's gradient buffer; a gradient assembled from parts, Pythia's q and
    k gradients after its rotary embedding's backward) is replaced by the
    target's view in every access, its own views taken again of that view,
    where all its accesses are non-call ops before the copy in the copy's
    block, nothing reads it after, and nothing accesses the copied part of
    the target from the source's first use up to the copy: the copy and
    the source go. A target allocated after that first use is allocated
    there only if it is no larger than the source (a whole gradient buffer
    held longer for one slice would raise the peak); else the copy stays.

    Left alone: a source read after its copy; an op that is a call (its
    signature fixes its buffers' layouts); a target whose copied part is
    accessed between the op and the copy; a view that cannot be reshaped
    back. Runs after bufferization and before deallocation.

    ```mlir
    %a = memref.alloc() : memref<1x128x12x64xbf16>
    zest.attention_backward ... outs(%a, ...)
    %c = memref.collapse_shape %a [[0], [1], [2, 3]]
    %t = memref.alloc() : memref<1x128x2304xbf16>
    %s = memref.subview %t[0, 0, 0] [1, 128, 768] [1, 1, 1]
    memref.copy %c, %s
    // becomes
    %t = memref.alloc() : memref<1x128x2304xbf16>
    %s = memref.subview %t[0, 0, 0] [1, 128, 768] [1, 1, 1]
    %e = memref.expand_shape %s [[0], [1], [2, 3]] ...
    zest.attention_backward ... outs(%e, ...)
    ```
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
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
