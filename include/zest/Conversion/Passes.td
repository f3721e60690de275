//===- Passes.td - Zest conversion passes ------------------*- tablegen -*-===//

#ifndef ZEST_CONVERSION_PASSES_TD
#define ZEST_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertZestToRuntimePass
    : Pass<"convert-zest-to-runtime", "::mlir::ModuleOp"> {
  let summary = "Lowers Zest ops on tensors to runtime calls and tensor ops";
  let description = [{
    Runs before one-shot bufferization, on the sharded program:

    * `zest.unflatten` becomes `tensor.extract_slice` + `tensor.expand_shape`
      (a view after bufferization) and `zest.flatten` a zero-filled
      `tensor.empty` with one `tensor.insert_slice` per gradient.
    * Collectives become calls into the runtime C API
      (`zest_all_gather_start`, `zest_reduce_scatter_start`,
      `zest_all_reduce_start`, `zest_wait`) on raw pointers of the operand
      buffer (`bufferization.to_buffer`) and of a fresh result buffer
      (`memref.alloc`, handed back with `bufferization.to_tensor restrict`).
      Synchronous ops wait at once; `*_start` / `zest.wait` pairs wait at the
      `zest.wait`. Gathered buffers are marked in the runtime pool so their
      peak is reported.
    * A bucket's `zest.pack` becomes insertions into a `[pieces x n]`
      tensor and `zest.unpack` extractions from one (views for one piece).
      Unpacking a gathered bucket copies each member into a fresh buffer
      marked gathered, as an unbucketed gather's is.
    * Mixed precision (a unit's `gather_type` / `reduce_type`): the step
      rounds what it sends (an elementwise `arith.truncf` generic), the
      collective moves and reduces the 16-bit type, and what arrives is
      widened (`arith.extf`) where it is used: the widening moves into each
      parameter's view and fuses into elementwise consumers, and a consumer
      that rounds it back (an autocast model) reads the received values with
      no f32 copy. The same holds for any widening of the step, one that
      also transposes included (attention's `[B, S, H, D]` gradient widened
      into `[B, H, S, D]` for a rotary embedding's backward: its slices are
      widenings of the gradient's slices, and its readers read the 16-bit
      gradient). Being ordinary linalg, the conversions run wherever the
      step runs (kernels on a GPU). Over one rank nothing moves but the
      values are still rounded, so every world size computes with the same
      values.
    * `zest.release` is dropped: ownership-based deallocation frees every
      buffer after its last use, which the release verifier guarantees is no
      later than the release.

    Unit names are passed to the runtime as constant strings for traces.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::func::FuncDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

def MatmulToBlasPass : Pass<"zest-matmul-to-blas", "::mlir::ModuleOp"> {
  let summary = "Replaces matrix products and fused linear ops on memrefs by "
                "OpenBLAS and fused-kernel calls";
  let description = [{
    After bufferization, rewrites matrix products on f32 (or 16-bit into
    f32) memrefs into `zest_sgemm` / `zest_sgemm_batched` calls
    (`C += op(A) op(B)`, row major; `widening_gemm` for 16-bit operands):
    `linalg.matmul`, `linalg.batch_matmul` and generic contractions over
    loops `(batch..., m, n, k)` that read each operand as a strided batch of
    matrices (every batch loop and its two matrix loops, in any order, the
    innermost a matrix loop: see `zest-fold-transposes`). The leading
    dimension of each matrix is the stride of its outer matrix dimension,
    so a head of `[B, S, H, Dh]` is read in place with rows `H * Dh` apart.
    The longest batch loop is the call's batch (its stride per operand);
    any other batch loops become `scf.for` loops around the call, over
    rank-reduced subviews. Operands must have a unit inner stride; anything
    else is left to the loop lowering.

    `zest.linear` and `zest.linear_backward` on memrefs become calls to
    `zest_linear_forward` / `zest_linear_backward` (their `_bf16` variants
    for bf16 layers); an operand the kernels cannot take (a transposed
    view) goes through a contiguous copy.

    With `target=cuda` the calls are to the CUDA runtime's `zest_cuda_*`
    functions of the same signatures (device pointers; cuBLASLt).
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "Whose products to call: cpu (OpenBLAS, zest_*) or cuda "
           "(zest_cuda_*)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
  ];
}

def DropUpdatedResultsPass
    : Pass<"zest-drop-updated-results", "::mlir::ModuleOp"> {
  let summary = "Drops results that a function updated in its argument";
  let description = [{
    After bufferization, removes each function result marked
    `zest.updated = <n>` (by `zest-insert-optimizer`: an updated unit shard,
    optimizer state or gradient accumulator) whose returned buffer is
    argument `n` itself (modulo `memref.cast`): the update happened in place
    and the caller already holds the buffer. Upstream's
    `drop-equivalent-buffer-results` does the same but skips public
    functions, which entry points are. A marked result that is not its
    argument is kept, and zestc then reports that the update could not be
    done in place.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def PrepareEntryPointsPass
    : Pass<"zest-prepare-entry-points", "::mlir::ModuleOp"> {
  let summary = "Fixes the calling convention of the model's public functions";
  let description = [{
    Every public function with a body becomes an entry point called by the
    host driver: scalar (integer or float) arguments and results become 0-d
    tensors, so every value crosses the boundary as a memref descriptor; its
    arguments are marked `bufferization.writable = false`
    (the host owns those buffers; bufferization copies instead of writing
    into them), except, in training steps with an optimizer
    (`zest.optimizer`), the unit shards, optimizer state and gradient
    accumulators, which the step updates in place and it gets `llvm.emit_c_interface`, so after
    `buffer-results-to-out-params` it is callable as
    `_mlir_ciface_<name>(descriptor *args..., descriptor *results...)`.
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
}

def MapKernelsToGPUPass : Pass<"zest-map-kernels-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Turns the loop nests of outlined kernels into GPU launches";
  let description = [{
    For `zestc --target=cuda`, after `zest-outline-kernels`: every linalg op
    in a function marked `zest.kernel` becomes a `gpu.launch`, which
    upstream's `gpu-kernel-outlining`, `convert-gpu-to-nvvm` and
    `gpu-module-to-binary` take from there.

    Named ops are generalized and their parallel iterators moved in front
    of their reductions (a column sum becomes one thread per column, not one
    launch per row), then lowered to an `scf.parallel` over the parallel
    dimensions with the reductions as sequential `scf.for`s inside. The
    parallel space is linearized and spread over 1-D blocks of
    `block-size` threads (fewer for a smaller space); each thread
    recovers its indices by division and remainder and does nothing past
    the end.

    An f32 sum or maximum (`addf` / `maximumf` of the accumulator and a
    value computed per iteration) runs on blocks of threads instead when it
    reduces to a scalar (a loss, a squared norm for clipping) or along the
    inputs' contiguous dimension over at least a warp's 32 elements (the
    rows of a LayerNorm or a softmax): one block per output element, each
    thread combining a strided share in a register, `gpu.all_reduce`
    combining the partial results in a tree (warp shuffles, then shared
    memory) and thread 0 combining that with the buffer's element. No
    atomics: the order is fixed and the result deterministic. Any other
    such sum or maximum (across the contiguous dimension: a column sum, a
    bias's or a LayerNorm weight's gradient) keeps one thread per output,
    so that neighbouring threads read neighbouring elements, and each
    thread combines its elements in a register and adds the buffer's
    element once at the end, instead of reading and writing it per
    element. Any other op without parallel dimensions (a fill of a 0-d
    buffer, a product) runs on one thread.

    A sum or maximum into a buffer the step's glue filled with the
    combiner's identity (a LayerNorm's or a softmax's rows, a column sum's
    partial sums and result) calls a copy of its kernel,
    `<kernel>_from_identity`, that stores each result without reading the
    output, and the fill's call goes: a launch less per reduction. Up to 8
    calls may stand between the fill and the sum (a split column sum fills
    both its buffers, then sums twice) if every buffer they pass is known
    to be apart from the filled one (another allocation or entry-point
    argument, or a disjoint range of one), as may allocations and frees of
    such buffers.

    An elementwise op (one `scf.parallel` holding loads, elementwise
    arithmetic and stores) whose innermost loop indexes the last, unit-stride
    dimension of its buffers, with a range that is a multiple of the width
    W (`vector-bytes` over the widest such element: 4 f32 or 8 bf16 for 16
    bytes), gives each thread W consecutive elements: `vector.load` and
    `vector.store` of W elements aligned to W elements, vector arithmetic,
    values that do not vary along the loop kept scalar and broadcast where
    they meet vectors. A warp then moves 512 bytes per access instead of
    64 (bf16) or 128 (f32). Whether every such buffer starts at that
    alignment is checked in the launch (a view's offset is only known at
    run time); where one does not, the thread runs its W elements one by
    one. Other strides must be static multiples of W. A row group's
    elementwise ops take W elements of the row per thread and step the
    same way. `vector-bytes=0` keeps one element per thread.

    Each kernel's entry in the module's `zest.kernel_work` (its bytes and
    operations per call, from `zest-outline-kernels`) gets the number of
    launches a call makes, so that the GPU profile, which times launches,
    predicts per launch.

    The host part of a kernel must not touch buffer elements, which live
    in device memory. Scalars it computes from them (the optimizer's
    learning rate and flags, read from the hyperparameter buffer by the
    slices `zest-outline-kernels{device-buffers}` cloned in) are recomputed
    inside each launch that uses them, and so are views they place (the
    row an embedding's backward adds to); a loop marked
    `zest.per_position_loop` (one elementwise op on rows placed by loaded
    token ids) becomes one launch of a thread per position of the rows,
    each thread running all of the loop's iterations for its position,
    instead of a launch per iteration; a branch on such a condition (the
    optimizer's accumulate-or-apply) becomes its launches, each guarded
    inside by the condition or its negation, or one launch of the branch
    where its alternatives are one launch each of the same shape (innermost
    branches first, so nested ones merge too); a scalar stored into a buffer
    is stored by a one-thread launch. A `memref.load`, `memref.store` or
    `memref.copy` still on the host anywhere in the module is an error
    naming it.
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"256",
           "Threads per block of the 1-D launches">,
    Option<"vectorBytes", "vector-bytes", "int64_t", /*default=*/"16",
           "Bytes an elementwise op's thread reads or writes of a buffer at "
           "a time where it can (4, 8 or 16; 0: one element)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect",
  ];
}

def DescribeModelPass : Pass<"zest-describe-model", "::mlir::ModuleOp"> {
  let summary = "Records the model descriptor and drops the argument roles";
  let description = [{
    Runs first in the lowering, on the sharded module `zest-front` made.
    Checks that the host driver can call every entry point (public functions
    with a body: statically shaped tensors in and out, no name that clashes
    with the runtime's `zest_*` symbols or `main`), then records on the
    module what the host needs once the roles are gone:

    * `zest.model_descriptor`: the text the training program parses (units,
      parameters, entry-point signatures; docs/Runtime.md);
    * `zest.entry_points`: one `{name, c_interface_args}` per entry point,
      in descriptor order, with the number of memref descriptors its C
      interface takes once in-place updates are dropped (what
      `zest-verify-lowering` checks);
    * on each `zest.unit`, `zest.argument_bytes = {optimizer_state = N,
      accumulators = M}`: the bytes of the arguments holding its optimizer
      state and its gradient accumulators (the most any entry point takes),
      which live outside the pool; the report's unit table shows them.

    Then the `zest.*` argument, result and function attributes of every
    function are dropped, except `zest.updated` (for
    `zest-drop-updated-results`) and, with `keep-units`, `zest.unit` (for
    `zest-outline-regions`, which consumes it).

    ```
    zest-opt --zest-front="world-size=2" --zest-describe-model m.mlir
    ```
  }];
  let options = [
    Option<"keepUnits", "keep-units", "bool", /*default=*/"false",
           "Keep `zest.unit` on unit arguments (for zest-outline-regions)">,
  ];
}

def SplitReductionsPass : Pass<"zest-split-reductions", "::mlir::ModuleOp"> {
  let summary = "Splits large reductions into chunks and their combination "
                "(the device targets)";
  let description = [{
    On tensors, before bufferization, two kinds of reduction of at least
    `min-elements` iterations that `zest-map-kernels-to-gpu` would run on
    too few threads become, with upstream's `linalg::splitReduction`, a
    reduction to per-chunk partial results and the reduction of those:

    * A reduction to a scalar (a loss, the squared norm of a unit's gradient
      for clipping), over any number of dimensions that its operands hold
      contiguously (first collapsed into one with
      `linalg::collapseOpIterationDims`): `[chunks, n / chunks]` to `chunks`
      partial results, each one block's, then one block for the scalar,
      instead of one block for everything. `chunks` is the largest divisor
      of `n` up to 1024 that leaves chunks of at least 256 elements.
    * A reduction of dimensions of which the first input holds none
      innermost (a column sum: LayerNorm's and RMSNorm's weight and bias
      gradients, over the rows of a matrix or over the batch and sequence
      of a `[B, S, D]` array, those first collapsed into one as above),
      which is one thread per result element: with `chunks` outermost, the
      partial results `[chunks, outputs...]` take `chunks` times as many
      threads, neighbours reading neighbouring elements. `chunks` is the
      largest divisor of the reduced size that gives at most 2^17 threads
      and leaves each at least 16 elements; the combination is split again
      while it qualifies. Reductions with 2^16 results or more already fill
      a GPU and stay whole. A result whose indexing map pins unit
      dimensions to 0 (a keepdim sum's `[1, N]`, as torch-mlir imports a
      bias gradient) is reduced without them and expanded back: the split
      needs results indexed by loop dimensions.

    The partial results are buffers of the step, initialized outside any
    branch around the reduction, so the memory plan counts them and the
    branch stays a kernel. A size without such a divisor, a dynamic size or
    a combiner without a neutral element is left alone. Deterministic: the
    order of the additions is fixed.
  }];
  let options = [
    Option<"minElements", "min-elements", "int64_t", /*default=*/"65536",
           "Split reductions of at least this many elements">,
  ];
  let dependentDialects = [
    "::mlir::linalg::LinalgDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

def FuseRowsPass : Pass<"zest-fuse-rows", "::mlir::ModuleOp"> {
  let summary = "Groups the ops of a normalization into one row kernel "
                "(the device targets)";
  let description = [{
    On buffers, after the frees are placed and before the memory plan: a
    run of consecutive linalg ops that a block of threads per row can run
    one after the other becomes one `scf.execute_region` marked
    `zest.row_kernel` (the row count), which `zest-outline-kernels` makes
    one kernel and `zest-map-kernels-to-gpu` one launch: a LayerNorm's
    sums, centring, variance and scaling (and the residual add before them,
    or an activation after) are one kernel each way instead of ten, as
    eager's fused normalization kernels are.

    A group holds at least one f32/f64 sum or maximum along its rows (what
    `zest-map-kernels-to-gpu` runs as a block reduction), each reducing to
    one value per row of the same `rows`; its other ops are elementwise over
    `rows` (their leading loops) times the columns a row's threads share.
    Within a launch, blocks run in no particular order, so the ops must not
    let one row see another's work: wherever two of them touch the same
    buffer (distinct allocations and distinct arguments are distinct; views
    of one overlap by their static ranges) and one of them writes, both
    must touch it row by row — the leading indices being the row loops, the
    rows of a contiguous block of memory each (a column slice of a
    concatenation qualifies) — such that no row's elements of one meet
    another row's of the other. A weight read by every row is fine as long
    as nothing in the group writes it.

    Between the grouped ops may stand only views, constants, allocations
    (moved before the group) and frees (moved after it); anything else (a
    product, a collective, a copy) ends the group. Because this runs before
    `zest-plan-memory`, the plan sees the lifetimes the group gives its
    buffers and stays exact. A fill of a buffer with a reduction's identity
    right before that reduction goes (the reduction stores its result
    without reading the buffer).
  }];
  let dependentDialects = [
    "::mlir::linalg::LinalgDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
  ];
}

def UploadConstantsPass : Pass<"zest-upload-constants", "::mlir::ModuleOp"> {
  let summary = "Puts the step's constant buffers in device memory (the "
                "device targets)";
  let description = [{
    After bufferization, before deallocation: each `memref.get_global` of a
    constant global (a model's non-splat constant, a table) is host memory,
    which kernels cannot read on a GPU. It becomes a buffer the step
    allocates (from the device pool, so `zest-plan-memory` counts it and the
    deallocation passes free it after its last use) and fills from the
    global with `zest_upload_constant`, in stream order and without waiting
    for the device (the runtime copies from a page-locked copy of the
    global it makes once). The upload happens at each call: constants are
    small next to the step's activations. A
    mutable global or a constant of a dynamic shape, a strided layout or a
    non-scalar element type is an error.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect",
  ];
}

def LowerAssertsPass : Pass<"zest-lower-asserts", "::mlir::ModuleOp"> {
  let summary = "Turns the step's failed checks into runtime errors";
  let description = [{
    torch-mlir guards index inputs with `cf.assert` (an embedding's ids, a
    gather's indices: `index must be smaller than dim size`). Upstream's
    lowering prints the message and calls `abort()`: every rank dies of
    SIGABRT with Open MPI's stack dump and nothing says which data was at
    fault. Each `cf.assert` of host code (not of a GPU kernel) becomes
    `scf.if (!condition) zest_check_failed(message)`: the runtime prints
    `zest: rank R: error: the step's check failed: MESSAGE`, with the data
    the trainer says it is feeding (`zest_set_data_context`), and stops
    every rank with status 1 (MPI_Abort): no signal, no stack dump. Runs on
    loops, before `convert-scf-to-cf`.

    ```mlir
    cf.assert %ok, "index must be smaller than dim size"
    // becomes
    %failed = arith.xori %ok, %true : i1
    scf.if %failed {
      %global = llvm.mlir.addressof @zest.check.0 : !llvm.ptr
      %msg = llvm.getelementptr %global[0, 0] : ...
      func.call @zest_check_failed(%msg) : (!llvm.ptr) -> ()
    }
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::scf::SCFDialect",
  ];
}

def EmulateGPUKernelsPass
    : Pass<"zest-emulate-gpu-kernels", "::mlir::ModuleOp"> {
  let summary = "Compiles outlined GPU kernels for the host, one block per "
                "call (--target=cuda-emulated)";
  let description = [{
    After `gpu-kernel-outlining`, in place of the NVVM lowering: each
    `gpu.func` kernel becomes a private host function that runs one block
    of a launch, taking the kernel's arguments and then the block's index,
    the block's size and the grid's size (nine `index` values). Each
    `gpu.module` becomes a `gpu.binary` whose object is the image the
    emulated device's `cudaLibraryLoadData` recognizes, so the host side
    (`gpu.launch_func`, its translation, the runtime's module loading and
    `cudaLaunchKernel`) is exactly the GPU target's.

    A block's threads run as loops over the thread index, split where the
    threads synchronize, so that each thread sees the others' writes as on a
    GPU: at a `gpu.barrier`, and at a `gpu.all_reduce`, which becomes a
    combine over every thread's value after the loop that computes them.
    An `scf.if` holding either is executed once for the block; its condition
    must be the same for all threads (checked at run time: a divergent
    barrier is an error, as it is undefined on a GPU). A value computed
    before a split and used after it is kept per thread in a stack array.
    Constants are hoisted. Barriers in loops, `gpu.all_reduce` with a region,
    shuffles, shared memory and any other GPU op are errors naming the op.

    The host functions carry `zest.emulated_kernel` (module, name, and the
    positions of their buffers' aligned pointers among the LLVM parameters)
    for `zest-emulated-kernel-entries`.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::scf::SCFDialect",
  ];
}

def EmulatedKernelEntriesPass
    : Pass<"zest-emulated-kernel-entries", "::mlir::ModuleOp"> {
  let summary = "Registers the emulated kernels with the runtime";
  let description = [{
    On the LLVM dialect, after `zest-emulate-gpu-kernels` and the lowering:
    for each function marked `zest.emulated_kernel`, an entry
    `void (void **params, const int64_t *launch)` that loads each LLVM
    parameter from `params` (the array a launch passes, one pointer per
    parameter) and the nine launch values, and calls it; and one global
    constructor that registers every entry with
    `zest_emulated_register_kernel` (zest_runtime_emulated.h) under its
    module's and its kernel's name, with the buffer positions a launch
    checks.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def ReservePoolPass : Pass<"zest-reserve-pool", "::mlir::ModuleOp"> {
  let summary = "Hands the pool each entry point's memory plan when it starts";
  let description = [{
    `zest-plan-memory`'s replay places every buffer of an entry point at an
    offset of one arena (`placeBuffers`, greedy by size over the buffers'
    lifetimes). This pass makes the entry point start with
    `zest_pool_reserve(arena bytes, placement, count)`, the placement being
    a private constant global of (offset, bytes) per allocation in the order
    the step makes them. The runtime's pool then puts each allocation where
    the plan did: the step holds exactly the planned arena, takes it from
    the system or the device once, and reuses it every step (no page is
    returned and faulted in again). Should the step depart from the plan
    (an allocation of another size, or at a place still in use), the pool
    serves the rest of the step from its free lists; the footprint measured
    then exceeds the prediction, which the tests compare.

    An entry point whose allocations are not in a static order (made in a
    loop or a branch), or that leaves a buffer allocated, gets no
    placement: its buffers come from the free lists, whose footprint the
    plan predicts too.
  }];
  let options = [
    Option<"arenaAlignment", "arena-alignment", "int64_t", /*default=*/"64",
           "Alignment of every buffer in the arena: 64 (the pool's buckets) "
           "on the host, 256 on a GPU (cudaMalloc's, which cuBLASLt "
           "assumes); as zest-plan-memory's">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect",
  ];
}

def FinalizeLLVMPass : Pass<"zest-finalize-llvm", "::mlir::ModuleOp"> {
  let summary = "Moves kernel no-alias facts onto LLVM arguments and drops "
                "compile-time metadata";
  let description = [{
    Runs on the module in the LLVM dialect, before translation:

    * a kernel whose buffers never overlap (`zest.noalias_pointers` from
      `zest-outline-kernels`) gets `llvm.noalias` on those pointer
      arguments, which `convert-func-to-llvm` does not carry over;
      `zest.kernel` and `zest.noalias_pointers` are dropped;
    * `zest.unit` and `zest.bucket` declarations are erased: units are
      compile-time metadata, which the model descriptor carries on.
  }];
}

def VerifyLoweringPass : Pass<"zest-verify-lowering", "::mlir::ModuleOp"> {
  let summary = "Checks that the lowering left only what translation takes";
  let description = [{
    The last pass of the lowering (as IREE verifies its input before
    each phase): fails, naming the op where the model wrote it, if any
    operation outside the LLVM dialect is left (besides unrealized casts,
    reported through their operand, and `--target=cuda`'s serialized
    kernels and launches), and if an entry point's C interface takes
    another number of arguments than `zest.entry_points` records: a shard,
    optimizer state or accumulator that bufferization could not update in
    place would come back as an extra result, and the host would train on
    stale values.
  }];
}

#endif // ZEST_CONVERSION_PASSES_TD
