/*===- zest_runtime.h - Zest runtime C API ------------------------*- C -*-===*
 *
 * The runtime that compiled Zest programs and their host drivers call: rank
 * and world size, asynchronous collectives on flat buffers, a pool for
 * gathered parameter buffers, counters and a Chrome trace. Plain C, stable,
 * usable from C, C++ and Python (ctypes).
 *
 * Errors never return silently: a failed collective, a timeout or a runtime
 * misuse prints `zest: rank R: <what> (<sizes>)` and aborts every rank
 * with a non-zero exit status.
 *
 *===----------------------------------------------------------------------===*/

#ifndef ZEST_RUNTIME_H
#define ZEST_RUNTIME_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types of flat buffers (the safetensors names in comments). */
typedef enum zest_dtype {
  ZEST_F32 = 0,  /* F32 */
  ZEST_F64 = 1,  /* F64 */
  ZEST_F16 = 2,  /* F16 */
  ZEST_BF16 = 3, /* BF16 */
  ZEST_I32 = 4,  /* I32 */
  ZEST_I64 = 5,  /* I64 */
  ZEST_I8 = 6,   /* I8 */
  ZEST_U8 = 7    /* U8 */
} zest_dtype_t;

/* Reductions; ZEST_AVG divides the sum by the group's size. */
typedef enum zest_reduction { ZEST_SUM = 0, ZEST_AVG = 1 } zest_reduction_t;

/* The ranks a collective runs over. Ranks form a `replicas x shards` mesh
 * (zest_set_mesh; 1 x world by default): rank r is shard r % shards of
 * replica r / shards. A sharded unit is gathered and reduce-scattered over
 * its SHARD group (the `shards` ranks of its replica, consecutive ranks, so
 * on a multi-GPU node they share the fast link) and its gradient shard is
 * all-reduced over its REPLICA group (the ranks holding the same shard). */
typedef enum zest_group {
  ZEST_GROUP_WORLD = 0,   /* every rank */
  ZEST_GROUP_SHARD = 1,   /* the ranks of this rank's replica */
  ZEST_GROUP_REPLICA = 2, /* the ranks holding this rank's shard */
  /* Expert parallelism (zest_set_expert_groups; the world and each rank
   * alone by default): */
  ZEST_GROUP_EXPERT = 3,        /* this rank's expert group: consecutive
                                   ranks that split the experts */
  ZEST_GROUP_EXPERT_REPLICA = 4 /* the ranks holding this rank's experts,
                                   one per expert group */
} zest_group_t;

/* Whether a collective over `group` crosses the replica groups of a mesh of
 * `replicas` groups (between nodes): what ZEST_REPLICA_LINK, and the cost
 * model's replica link, carry. */
static inline int zest_group_spans_replicas(zest_group_t group,
                                            int64_t replicas) {
  return group == ZEST_GROUP_REPLICA ||
         (group == ZEST_GROUP_WORLD && replicas > 1);
}

/* A pending collective; 0 is never a valid handle. */
typedef int64_t zest_request_t;

/* The optimizer's hyperparameters: compiled training steps (zestc
 * --optimizer=sgd|adamw) take them as one `tensor<ZEST_HYPER_COUNT x f32>`
 * argument, refilled by the host before every micro-batch, so learning-rate
 * schedules and bias corrections need no recompilation and nothing per
 * element runs on the host. */
typedef enum zest_hyper {
  ZEST_HYPER_LR = 0,           /* learning rate of this step */
  ZEST_HYPER_WEIGHT_DECAY = 1, /* SGD: L2 (added to the gradient); AdamW:
                                  decoupled (p *= 1 - lr * wd) */
  ZEST_HYPER_BETA1 = 2,        /* AdamW beta1; SGD momentum */
  ZEST_HYPER_BETA2 = 3,        /* AdamW beta2 */
  ZEST_HYPER_EPS = 4,          /* AdamW epsilon */
  ZEST_HYPER_STEP_SIZE = 5,    /* AdamW: lr / (1 - beta1^t) */
  ZEST_HYPER_BIAS_CORRECTION2_SQRT = 6, /* AdamW: sqrt(1 - beta2^t) */
  ZEST_HYPER_GRAD_SCALE = 7, /* gradients are multiplied by this (1/accum) */
  ZEST_HYPER_ACCUMULATE = 8, /* != 0: add the accumulated gradient */
  ZEST_HYPER_APPLY = 9,      /* != 0: update parameters (last micro-batch);
                                0: store the gradient sum for later */
  ZEST_HYPER_COUNT = 10
} zest_hyper_t;

/*--- Lifetime ------------------------------------------------------------*/

/* Where OpenBLAS did not recognise this CPU and fell back to kernels
 * without AVX2 although the CPU has AVX2 and FMA (or AVX-512), re-executes
 * the program (argv as main received it) with OPENBLAS_CORETYPE naming the
 * kernels that match (Haswell or SkylakeX): OpenBLAS reads it only when it
 * loads. Does nothing when OPENBLAS_CORETYPE is set or the BLAS is not
 * OpenBLAS. Executables zestc makes call it first thing in main, before
 * zest_init (MPI must not have started); hosts of --emit=shared libraries
 * may call it the same way. */
void zest_select_blas_kernels(char **argv);
/* The name of the OpenBLAS kernels in use (null for another BLAS) and, in
 * *matchesCpu when not null, 0 where they lack AVX2 on a CPU that has it. */
const char *zest_blas_kernels(int *matchesCpu);

/* Initializes the runtime and the backend (MPI_Init). Reads the options
 * ZEST_TIMEOUT_S (seconds a wait may take before all ranks abort, default
 * 300), ZEST_PROGRESS (poll | thread), ZEST_LINK (<GB/s>,<latency us>: a
 * modeled link; each collective then completes no earlier than latency +
 * bytes sent / bandwidth after the link is free, and a wait sleeps, without
 * using CPU, until it has) and ZEST_REPLICA_LINK (the same for collectives
 * between replica groups of a hybrid mesh, on a link of their own; without
 * it they use ZEST_LINK's). Returns 0 on success. */
int zest_init(int *argc, char ***argv);
/* Finalizes the backend; the trace is written first if enabled. */
void zest_finalize(void);
/* Marks the end of a training step (the trainer calls it after each): with
 * ZEST_KERNEL_TIMES=1 the CUDA backends time every kernel, product,
 * collective and copy on the GPU and print, at zest_finalize, the time per
 * name over the steps after the first. */
void zest_step_end(void);
/* Prints `zest: rank R: <message>` to stderr and makes every rank exit with
 * `code` (MPI_Abort). Never returns. */
void zest_fatal(int code, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((noreturn, format(printf, 2, 3)))
#endif
    ;

/* A check of the compiled step failed (zest-lower-asserts: torch-mlir's
 * index checks, `message`): prints `zest: rank R: error: the step's check
 * failed: <message>`, with the data context if one was set, and makes every
 * rank exit with status 1. Never returns. */
void zest_check_failed(const char *message)
#if defined(__GNUC__)
    __attribute__((noreturn))
#endif
    ;
/* What the next calls compute on, for zest_check_failed's message:
 * samples [first, first + count) of `source` (the trainer: "'data.bin'",
 * "the token stream 'train.bin'"). `source` is kept, not copied: it must
 * outlive the calls; NULL clears the context. Two stores: cheap enough for
 * every call, the text is made only on failure. */
void zest_set_data_context(const char *source, int64_t first, int64_t count);

int zest_rank(void);
int zest_world_size(void);
/* Arranges the ranks as a `replicas x shards` mesh (hybrid sharding) and
 * creates the SHARD and REPLICA sub-communicators. Every rank must call it
 * with the same values, before any collective on those groups and while
 * none is in flight. Aborts the job unless replicas * shards equals the
 * world size. */
void zest_set_mesh(int replicas, int shards);
/* Arranges the ranks in expert groups of `size` consecutive ranks (expert
 * parallelism) and creates the EXPERT and EXPERT_REPLICA
 * sub-communicators; collective like zest_set_mesh, independent of the
 * mesh. Aborts the job unless `size` divides the world size. */
void zest_set_expert_groups(int size);
/* This rank's index in, and the number of ranks of, `group`. */
int zest_group_rank(zest_group_t group);
int zest_group_size(zest_group_t group);
/* Bytes of one element of `dtype`, 0 for an unknown code (inline: the
 * compiler's cost model counts collective bytes with it too). */
static inline int64_t zest_dtype_bytes(zest_dtype_t dtype) {
  switch (dtype) {
  case ZEST_F64:
  case ZEST_I64:
    return 8;
  case ZEST_F32:
  case ZEST_I32:
    return 4;
  case ZEST_F16:
  case ZEST_BF16:
    return 2;
  case ZEST_I8:
  case ZEST_U8:
    return 1;
  }
  return 0;
}
/* Bytes of one element of `dtype`; aborts the job for an unknown code. */
int64_t zest_dtype_size(zest_dtype_t dtype);
/* Seconds a wait may block before the job is aborted. */
void zest_set_timeout(double seconds);

/*--- Collectives ---------------------------------------------------------*/
/* `count` is per rank for gathers and reduce-scatters (the shard size) and
 * the whole buffer for all-reduces. They run over the ranks of `group`, in
 * group rank order; ZEST_AVG divides by the group's size. Buffers must not
 * be touched until the request is waited on. `tag` names the unit in traces
 * (may be NULL). Every rank of a group must issue the same collectives on
 * it in the same order. An all-gather runs in place when `send` is this
 * rank's slot of `recv` (recv + group rank * count elements); an
 * all-reduce when `send` == `recv`. */

zest_request_t zest_all_gather_start(const void *send, void *recv,
                                     int64_t count, zest_dtype_t dtype,
                                     zest_group_t group, const char *tag);
zest_request_t zest_reduce_scatter_start(const void *send, void *recv,
                                         int64_t count, zest_dtype_t dtype,
                                         zest_reduction_t op,
                                         zest_group_t group, const char *tag);
zest_request_t zest_all_reduce_start(const void *send, void *recv,
                                     int64_t count, zest_dtype_t dtype,
                                     zest_reduction_t op, zest_group_t group,
                                     const char *tag);
/* Blocks until the request completes (or the timeout aborts the job). */
void zest_wait(zest_request_t request);
/* Drives pending requests forward without blocking (MPI's nonblocking
 * collectives advance only inside MPI calls); returns at once when none is
 * in flight or before zest_init. The runtime's products and fused linear
 * layers call it, so a prefetched gather moves between them. */
void zest_progress(void);

/*--- Expert parallelism ----------------------------------------------------*/
/* The ranks of the SHARD group (an expert group; the world without a mesh)
 * hold `experts / group size` consecutive experts each: group rank j holds
 * experts [j * local, (j + 1) * local). `ends` ([experts], int32 or int64 as
 * `ends_bits` says) are the cumulative row ends of this rank's rows grouped
 * by expert. Blocking; every rank of the group calls them in the same
 * order, and each rank of a group lists the same experts.
 *
 * zest_expert_routing exchanges the row counts: routing[j * local + l]
 * (int64, [experts]) is the number of rows group rank j sends this rank for
 * its local expert l; local_ends ([local], `ends_bits` wide) the cumulative
 * ends of what this rank receives, expert-major (all of its first expert's
 * rows, from rank 0 first, then its second's). */
void zest_expert_routing(const void *ends, int64_t ends_bits, int64_t experts,
                         int64_t *routing, void *local_ends);
/* Sends each expert's rows of `rows` ([in_rows, cols] elements of `dtype`,
 * grouped by `ends`, ends[experts-1] <= in_rows) to the rank holding the
 * expert and receives this rank's experts' rows into `out` ([out_rows,
 * cols]) in zest_expert_routing's order; rows past the last are zeroed.
 * Aborts the job when they exceed `out_rows` (the compiled plan's worst
 * case). */
void zest_expert_dispatch(const void *rows, int64_t in_rows, int64_t cols,
                          zest_dtype_t dtype, const void *ends,
                          int64_t ends_bits, int64_t experts,
                          const int64_t *routing, void *out, int64_t out_rows);
/* The inverse of zest_expert_dispatch: `rows` ([in_rows, cols], laid out as
 * dispatch receives) go back to the ranks they came from, each into its
 * place among that rank's rows `out` ([out_rows, cols], grouped by `ends`);
 * rows of `out` past ends[experts-1] are zeroed. */
void zest_expert_combine(const void *rows, int64_t in_rows, int64_t cols,
                         zest_dtype_t dtype, const void *ends,
                         int64_t ends_bits, int64_t experts,
                         const int64_t *routing, void *out, int64_t out_rows);

void zest_broadcast(void *buffer, int64_t count, zest_dtype_t dtype, int root);
void zest_barrier(void);

/* Blocking collectives over all ranks on host memory, whatever the backend
 * (the collectives above take device memory under a CUDA backend): for a
 * driver's scalars, such as the loss average and agreement checks. */
void zest_host_all_reduce(const void *send, void *recv, int64_t count,
                          zest_dtype_t dtype, zest_reduction_t op);
void zest_host_all_gather(const void *send, void *recv, int64_t count,
                          zest_dtype_t dtype);

/*--- Memory --------------------------------------------------------------*/
/* Buffers come from the pool, in 64-byte multiples. A compiled step starts
 * by handing the pool its memory plan (zest_pool_reserve, emitted by
 * zestc): an arena and, for each allocation the step will make in order,
 * where in the arena it goes. The step then holds exactly the planned arena
 * and, once it is touched, never asks the system or the device for memory
 * again. Allocations without a plan (or after the step departs from it)
 * come from size-bucketed free lists instead, where a freed buffer is
 * reused by the next allocation of its bucket. Gathered buffers are counted
 * separately so the peak of gathered parameter bytes is known. */

/* Makes the arena at least `bytes` and follows `placement` (`count` pairs
 * of arena offset and bytes, one per allocation to come, in order) when no
 * buffer lives in the arena; otherwise changes nothing. */
void zest_pool_reserve(int64_t bytes, const int64_t *placement, int64_t count);
void *zest_pool_alloc(int64_t bytes);
void zest_pool_free(void *ptr);
/* A buffer kept until zest_finalize, outside the arena (a library's
 * workspace, taken at its first use): counted in pool_bytes. */
void *zest_pool_alloc_kept(int64_t bytes);
/* Marks `ptr` (from zest_pool_alloc) as a gathered parameter buffer. */
void zest_pool_mark_gathered(void *ptr);

/* Where compiled code's buffers live: 0 for host memory (the CPU backend),
 * 1 for device memory (the CUDA backends), which the host reads and writes
 * only through the copies below. */
int zest_buffers_on_device(void);
/* A long-lived buffer (a parameter shard, optimizer state, a batch) in the
 * backend's memory, outside the pool's accounting, until zest_buffer_free
 * (before zest_finalize). */
void *zest_buffer_alloc(int64_t bytes);
void zest_buffer_free(void *ptr);
/* Copies between host memory and zest_buffer_alloc / pool memory, ordered
 * with the compiled code's work: to the device, `host` may be reused on
 * return; to the host, the bytes are there on return. Plain copies when the
 * buffers are host memory. */
void zest_copy_to_device(void *device, const void *host, int64_t bytes);
void zest_copy_to_host(void *host, const void *device, int64_t bytes);
/* A constant of the program (host data that never changes while it runs,
 * such as a folded table) into device memory, in order with the compiled
 * code's work and without waiting for it: the first call for `host` keeps
 * a page-locked copy of its bytes (until zest_finalize), and every call
 * copies from that copy asynchronously. A plain copy when buffers are host
 * memory. */
void zest_upload_constant(void *device, const void *host, int64_t bytes);
/* Offload (zestc --offload): page-locked host memory for the arguments the
 * step keeps on the host, which the copies below read and write (host
 * memory on the CPU backend), until zest_pinned_free (before
 * zest_finalize). */
void *zest_pinned_alloc(int64_t bytes);
void zest_pinned_free(void *ptr);
/* Asynchronous copies between pinned host memory and device memory, in
 * order with the compiled code's work: to the device, `host` is read when
 * the device gets there; to the host, the bytes are there once
 * zest_copy_wait(host) returns. Either way the device buffer may be freed
 * (and reused by later work) as soon as the call returns. */
void zest_copy_to_device_async(void *device, const void *host, int64_t bytes);
void zest_copy_to_host_start(void *host, const void *device, int64_t bytes);
void zest_copy_wait(const void *host);

typedef struct zest_counters {
  int64_t pool_bytes;           /* bytes live in the pool now */
  int64_t pool_peak_bytes;      /* high-water mark of pool_bytes */
  int64_t gathered_bytes;       /* gathered parameter bytes live now */
  int64_t gathered_peak_bytes;  /* high-water mark of gathered_bytes */
  int64_t bytes_sent;           /* bytes this rank sent in collectives */
  int64_t collectives;          /* collectives started */
  int64_t wait_us;              /* microseconds spent blocked in zest_wait */
  int64_t buffer_bytes;         /* bytes asked of zest_buffer_alloc, live */
  int64_t pinned_bytes;         /* bytes asked of zest_pinned_alloc, live */
  int64_t pool_held_bytes;      /* bytes the pool holds of the system's or
                                   the device's memory: the arena up to its
                                   highest live buffer, kept buffers, and the
                                   free lists' buffers, live or not */
  int64_t pool_held_peak_bytes; /* high-water mark of pool_held_bytes */
  int64_t exchange_bytes;       /* bytes this rank sent in expert
                                   parallelism's row exchanges (not in
                                   bytes_sent: they depend on the routing) */
} zest_counters_t;

void zest_get_counters(zest_counters_t *counters);
/* Resets the peaks to the current values and the traffic counters to 0. */
void zest_reset_counters(void);

/*--- Entry points as CUDA graphs ----------------------------------------*/

/* With graphs on (zestc --cuda-graphs, the default for CUDA targets) and a
 * backend that can capture them (cuda-nccl), zest_call_entry(key, name,
 * entry, args) runs entry(args) as is at its first call for `key` (kernels
 * load, products are planned, the pool fills), captures its device work as
 * a CUDA graph at the second, and launches the graph then and at every later
 * call instead of running the entry's host code: the arguments must be the
 * same buffers at every call (their contents may change). An entry whose
 * first call waited on the host for the device (an offload copy, a
 * collective through host memory, a grouped product's offsets) is never
 * captured, and rank 0 says why once. Off, or on the CPU, it calls
 * entry(args). */
typedef void (*zest_entry_fn_t)(void **args);
void zest_set_cuda_graphs(int enabled);
void zest_call_entry(int64_t key, const char *name, zest_entry_fn_t entry,
                     void **args);

/*--- Trace ---------------------------------------------------------------*/

/* Microseconds since zest_init. */
double zest_now_us(void);
void zest_trace_enable(int enabled);
/* Records a complete span [start_us, end_us) on this rank. */
void zest_trace_span(const char *name, const char *category, double start_us,
                     double end_us);
/* Writes this rank's Chrome trace JSON (spans + pool counters) to `path`.
 * Returns 0 on success. */
int zest_trace_write(const char *path);

/*--- Kernels -------------------------------------------------------------*/

/* Activations of the fused linear kernels. */
typedef enum {
  ZEST_ACTIVATION_NONE = 0,
  ZEST_ACTIVATION_RELU = 1,
  ZEST_ACTIVATION_GELU_TANH = 2, /* PyTorch GELU(approximate="tanh") */
  ZEST_ACTIVATION_GELU_ERF = 3,  /* PyTorch GELU() */
  ZEST_ACTIVATION_SILU = 4
} zest_activation_t;

/* The parameters of each kind of product, spelled once: zest_products.def
 * declares zest_<kind>(_bf16, _f16) with them here and zest_cuda_<kind>(...)
 * in zest_runtime_cuda.h; the runtimes define them with the same macros,
 * and zestc checks its calls against them. T is the element storage;
 * ZEST_<kind>_ARGS names the parameters, to forward them. */

/* zest_sgemm: row-major C[M,N] += op(A) op(B) (C = op(A) op(B) when
 * accumulate == 0), op = transpose when trans_* != 0; lda/ldb/ldc are row
 * strides in elements. */
#define ZEST_sgemm_PARAMS(T)                                                   \
  int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k,           \
      const T *a, int64_t lda, const T *b, int64_t ldb, T *c, int64_t ldc,     \
      int32_t accumulate
#define ZEST_sgemm_ARGS                                                        \
  trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, accumulate

/* zest_sgemm_batched: `batch` independent products; operand i starts at
 * a + i * stride_a. */
#define ZEST_sgemm_batched_PARAMS(T)                                           \
  int32_t trans_a, int32_t trans_b, int64_t batch, int64_t m, int64_t n,       \
      int64_t k, const T *a, int64_t lda, int64_t stride_a, const T *b,        \
      int64_t ldb, int64_t stride_b, T *c, int64_t ldc, int64_t stride_c,      \
      int32_t accumulate
#define ZEST_sgemm_batched_ARGS                                                \
  trans_a, trans_b, batch, m, n, k, a, lda, stride_a, b, ldb, stride_b, c,     \
      ldc, stride_c, accumulate

/* zest_widening_gemm(_batched): the products of zest_sgemm(_batched) with
 * 16-bit operands A and B (T: the bf16 or f16 bit patterns) and an f32 C,
 * products accumulated in f32: what a matrix product of bf16 tensors into
 * an f32 accumulator (PyTorch's autocast, as torch-mlir imports it)
 * computes, and cuBLASLt's mixed-precision product. */
#define ZEST_widening_gemm_PARAMS(T)                                           \
  int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k,           \
      const T *a, int64_t lda, const T *b, int64_t ldb, float *c, int64_t ldc, \
      int32_t accumulate
#define ZEST_widening_gemm_ARGS ZEST_sgemm_ARGS
#define ZEST_widening_gemm_batched_PARAMS(T)                                   \
  int32_t trans_a, int32_t trans_b, int64_t batch, int64_t m, int64_t n,       \
      int64_t k, const T *a, int64_t lda, int64_t stride_a, const T *b,        \
      int64_t ldb, int64_t stride_b, float *c, int64_t ldc, int64_t stride_c,  \
      int32_t accumulate
#define ZEST_widening_gemm_batched_ARGS ZEST_sgemm_batched_ARGS

/* Inside a function with ZEST_sgemm_PARAMS (or widening_gemm's): the
 * arguments of the batched product that computes the same one product. */
#define ZEST_gemm_AS_BATCHED_ARGS                                              \
  trans_a, trans_b, 1, m, n, k, a, lda, 0, b, ldb, 0, c, ldc, 0, accumulate

/* zest_linear_forward: row-major Y[M,N] = act(X[M,K] W^T + bias), with W
 * the [N,K] weight of torch.nn.Linear (w_transposed != 0) or a [K,N]
 * matrix. `bias` may be null. When `pre` is not null it receives
 * X W^T + bias (the pre-activation backward needs); it may equal `y` for
 * act = NONE. On the CPU the product runs on OpenBLAS starting from the
 * broadcast bias, and the activation is applied in one vectorized pass over
 * the output. */
#define ZEST_linear_forward_PARAMS(T)                                          \
  int64_t m, int64_t n, int64_t k, const T *x, int64_t ldx, const T *w,        \
      int64_t ldw, int32_t w_transposed, const T *bias, int32_t activation,    \
      T *pre, int64_t ldpre, T *y, int64_t ldy
#define ZEST_linear_forward_ARGS                                               \
  m, n, k, x, ldx, w, ldw, w_transposed, bias, activation, pre, ldpre, y, ldy

/* zest_linear_backward, for the layer of zest_linear_forward (m rows, n
 * outputs, k inputs), row-major: g = dy * act'(pre) (dy itself for
 * act = NONE, and `pre` unused; for RELU the layer's output may stand for
 * `pre`), then
 *   dx[M,K] = g W   (W [N,K], w_transposed != 0)  or  g W^T  (W [K,N]),
 *   dw      = g^T x ([N,K], dw_transposed != 0)   or  x^T g  ([K,N]),
 *   db[N]   = column sums of g.
 * Any of dx, dw, db may be null (then w, x are not read). Outputs are
 * overwritten. g is formed once, with db summed in the same pass; the two
 * products run on OpenBLAS on the CPU. */
#define ZEST_linear_backward_PARAMS(T)                                         \
  int64_t m, int64_t n, int64_t k, const T *dy, int64_t lddy, const T *pre,    \
      int64_t ldpre, int32_t activation, const T *x, int64_t ldx, const T *w,  \
      int64_t ldw, int32_t w_transposed, T *dx, int64_t lddx, T *dw,           \
      int64_t lddw, int32_t dw_transposed, T *db
#define ZEST_linear_backward_ARGS                                              \
  m, n, k, dy, lddy, pre, ldpre, activation, x, ldx, w, ldw, w_transposed, dx, \
      lddx, dw, lddw, dw_transposed, db

/* What the mask of zest_attention_forward / _backward holds (mask_kind):
 * none, one byte per element (attend where non-zero), or a float added to
 * the scores, in the inputs' storage type (SAME) or in f32. */
#define ZEST_ATTENTION_MASK_NONE 0
#define ZEST_ATTENTION_MASK_BOOL 1
#define ZEST_ATTENTION_MASK_SAME 2
#define ZEST_ATTENTION_MASK_F32 3

/* The layout of a 4-D operand of zest_attention_forward / _backward: the
 * strides, in elements, between consecutive batches, heads and rows (a
 * row's elements are contiguous). A contiguous row-major [batch, heads,
 * rows, dim] array has strides heads * rows * dim, rows * dim and dim; a
 * [batch, rows, heads, dim] one (heads split from a projection's rows)
 * rows * heads * dim, dim and heads * dim. */
#define ZEST_ATTENTION_STRIDES(NAME)                                           \
  int64_t NAME##_batch_stride, int64_t NAME##_head_stride,                     \
      int64_t NAME##_row_stride
#define ZEST_ATTENTION_STRIDE_ARGS(NAME)                                       \
  NAME##_batch_stride, NAME##_head_stride, NAME##_row_stride

/* zest_attention_forward: FlashAttention-2's forward. q [batch, heads,
 * q_len, head_dim], k [batch, kv_heads, kv_len, head_dim], v [batch,
 * kv_heads, kv_len, value_dim], out [batch, heads, q_len, value_dim], each
 * laid out as its strides say (ZEST_ATTENTION_STRIDES); query head h reads
 * key/value head h / (heads / kv_heads). Scores are scale * q.k, plus the
 * mask (mask_kind; a contiguous [mask_batch, mask_heads, mask_rows,
 * mask_cols] array, each size 1 or the scores' own), with keys j > i masked
 * when `causal`. lse receives each row's log-sum-exp (f32, contiguous
 * [batch, heads, q_len]); a row that sees no key gets a zero output and lse
 * = +inf. No [q_len, kv_len] array is formed: keys are visited in blocks
 * with an online softmax, products on the runtime's sgemm, accumulated in
 * f32. */
#define ZEST_attention_forward_PARAMS(T)                                       \
  int64_t batch, int64_t heads, int64_t kv_heads, int64_t q_len,               \
      int64_t kv_len, int64_t head_dim, int64_t value_dim, float scale,        \
      int32_t causal, const T *q, const T *k, const T *v, const void *mask,    \
      int32_t mask_kind, int64_t mask_batch, int64_t mask_heads,               \
      int64_t mask_rows, int64_t mask_cols, T *out, float *lse,                \
      ZEST_ATTENTION_STRIDES(q), ZEST_ATTENTION_STRIDES(k),                    \
      ZEST_ATTENTION_STRIDES(v), ZEST_ATTENTION_STRIDES(out)
#define ZEST_attention_forward_ARGS                                            \
  batch, heads, kv_heads, q_len, kv_len, head_dim, value_dim, scale, causal,   \
      q, k, v, mask, mask_kind, mask_batch, mask_heads, mask_rows, mask_cols,  \
      out, lse, ZEST_ATTENTION_STRIDE_ARGS(q), ZEST_ATTENTION_STRIDE_ARGS(k),  \
      ZEST_ATTENTION_STRIDE_ARGS(v), ZEST_ATTENTION_STRIDE_ARGS(out)

/* zest_attention_backward: the gradients dq, dk, dv (shaped as q, k, v;
 * overwritten) of zest_attention_forward's output given dout, from its
 * inputs, output and lse: each block of probabilities is recomputed from
 * lse; dk and dv of a key/value head sum over the query heads reading it.
 * Every 4-D operand has its own strides. */
#define ZEST_attention_backward_PARAMS(T)                                      \
  int64_t batch, int64_t heads, int64_t kv_heads, int64_t q_len,               \
      int64_t kv_len, int64_t head_dim, int64_t value_dim, float scale,        \
      int32_t causal, const T *q, const T *k, const T *v, const void *mask,    \
      int32_t mask_kind, int64_t mask_batch, int64_t mask_heads,               \
      int64_t mask_rows, int64_t mask_cols, const T *out, const float *lse,    \
      const T *dout, T *dq, T *dk, T *dv, ZEST_ATTENTION_STRIDES(q),           \
      ZEST_ATTENTION_STRIDES(k), ZEST_ATTENTION_STRIDES(v),                    \
      ZEST_ATTENTION_STRIDES(out), ZEST_ATTENTION_STRIDES(dout),               \
      ZEST_ATTENTION_STRIDES(dq), ZEST_ATTENTION_STRIDES(dk),                  \
      ZEST_ATTENTION_STRIDES(dv)
#define ZEST_attention_backward_ARGS                                           \
  batch, heads, kv_heads, q_len, kv_len, head_dim, value_dim, scale, causal,   \
      q, k, v, mask, mask_kind, mask_batch, mask_heads, mask_rows, mask_cols,  \
      out, lse, dout, dq, dk, dv, ZEST_ATTENTION_STRIDE_ARGS(q),               \
      ZEST_ATTENTION_STRIDE_ARGS(k), ZEST_ATTENTION_STRIDE_ARGS(v),            \
      ZEST_ATTENTION_STRIDE_ARGS(out), ZEST_ATTENTION_STRIDE_ARGS(dout),       \
      ZEST_ATTENTION_STRIDE_ARGS(dq), ZEST_ATTENTION_STRIDE_ARGS(dk),          \
      ZEST_ATTENTION_STRIDE_ARGS(dv)

/* How zest_cross_entropy_* combine their rows' losses (reduction). */
#define ZEST_LOSS_NONE 0
#define ZEST_LOSS_MEAN 1
#define ZEST_LOSS_SUM 2

/* zest_cross_entropy_forward: PyTorch's cross_entropy of `logits` [rows,
 * classes] (row stride ld) against class indices `target` [rows]
 * (target_bits 64 or 32), in f32 whatever the storage: each row's
 * log-sum-exp into lse [rows] and its loss
 *   lse - (1 - label_smoothing) x[target] - label_smoothing / classes *
 *   sum_c x[c]
 * (0 on rows whose target is ignore_index) into loss: every row's
 * (ZEST_LOSS_NONE, loss [rows]), their sum (SUM) or their mean over the
 * rows not ignored (MEAN; NaN if none), loss [1]. One pass over each row
 * (an online maximum and sum); a target outside [0, classes) aborts. */
#define ZEST_cross_entropy_forward_PARAMS(T)                                   \
  int64_t rows, int64_t classes, const T *logits, int64_t ld,                  \
      const void *target, int32_t target_bits, int64_t ignore_index,           \
      float label_smoothing, int32_t reduction, float *loss, float *lse
#define ZEST_cross_entropy_forward_ARGS                                        \
  rows, classes, logits, ld, target, target_bits, ignore_index,                \
      label_smoothing, reduction, loss, lse
/* zest_cross_entropy_backward: the logits' gradient (row stride ld_grad,
 * overwritten) of zest_cross_entropy_forward's loss given its gradient
 * grad_loss ([rows] for NONE, else [1]) and lse:
 *   g_i (exp(x - lse_i) - (1 - label_smoothing) [c == t_i]
 *        - label_smoothing / classes),
 * g_i divided by the rows not ignored for MEAN, 0 on ignored rows.
 * grad_logits may be logits itself (ld_grad == ld): each logit is read
 * before its gradient is written, so the gradient overwrites the logits
 * (zest-reuse-logits). */
#define ZEST_cross_entropy_backward_PARAMS(T)                                  \
  int64_t rows, int64_t classes, const T *logits, int64_t ld,                  \
      const void *target, int32_t target_bits, int64_t ignore_index,           \
      float label_smoothing, int32_t reduction, const float *grad_loss,        \
      const float *lse, T *grad_logits, int64_t ld_grad
#define ZEST_cross_entropy_backward_ARGS                                       \
  rows, classes, logits, ld, target, target_bits, ignore_index,                \
      label_smoothing, reduction, grad_loss, lse, grad_logits, ld_grad

/* zest_linear_cross_entropy: a linear head without bias, its cross-entropy
 * (reduction MEAN or SUM, as zest_cross_entropy_forward) and the head's
 * gradients, over `rows` in chunks of `chunk_rows`. For each chunk: its
 * logits x_c op(W) into `logits` ([chunk_rows, classes], row stride
 * ld_logits), their log-sum-exps into lse (every row's, [rows]) and their
 * losses, their gradient given grad_loss ([1]) written over them, then
 *   dx_c = g_c W (W [classes, k], w_transposed != 0) or g_c W^T (W [k,
 *   classes]),
 *   dw  += g_c^T x_c ([classes, k], dw_transposed != 0) or x_c^T g_c,
 * with op(W) = W^T (w_transposed) or W. dx and dw may be null. The loss
 * (loss [1]) and both gradients equal the unfused product, forward and
 * backward's: MEAN divides by the rows not ignored over all chunks. The
 * whole [rows, classes] logits never exist. x, W, the logits and their
 * gradient are stored in T (_bf16, _f16: the logits' product accumulated
 * in f32 and rounded once); dx and dw are f32, accumulated in f32 and not
 * rounded (autocast's widened products). */
#define ZEST_linear_cross_entropy_PARAMS(T)                                    \
  int64_t rows, int64_t classes, int64_t k, const T *x, int64_t ldx,           \
      const T *w, int64_t ldw, int32_t w_transposed, const void *target,       \
      int32_t target_bits, int64_t ignore_index, float label_smoothing,        \
      int32_t reduction, const float *grad_loss, int64_t chunk_rows,           \
      T *logits, int64_t ld_logits, float *lse, float *loss, float *dx,        \
      int64_t lddx, float *dw, int64_t lddw, int32_t dw_transposed
#define ZEST_linear_cross_entropy_ARGS                                         \
  rows, classes, k, x, ldx, w, ldw, w_transposed, target, target_bits,         \
      ignore_index, label_smoothing, reduction, grad_loss, chunk_rows, logits, \
      ld_logits, lse, loss, dx, lddx, dw, lddw, dw_transposed

/* zest_grouped_matmul: rows grouped by run-time offsets, each group times
 * its matrix. x [rows, k], y [rows, n] and w are contiguous row-major; w is
 * [groups, k, n], or [groups, n, k] when w_transposed (a mixture-of-experts
 * layer's [experts, out, in]). offsets [groups] (offset_bits 32 or 64) are
 * the groups' cumulative ends: rows [offsets[g-1], offsets[g]) (from 0)
 * get y = x w[g] (or x w[g]^T); rows past the last end get 0. An end below
 * the previous one counts as an empty group, one past `rows` as `rows`.
 * Products accumulate in f32; _bf16 / _f16 round y once. */
#define ZEST_grouped_matmul_PARAMS(T)                                          \
  int64_t rows, int64_t n, int64_t k, int64_t groups, const T *x, const T *w,  \
      int32_t w_transposed, const void *offsets, int32_t offset_bits, T *y
#define ZEST_grouped_matmul_ARGS                                               \
  rows, n, k, groups, x, w, w_transposed, offsets, offset_bits, y

/* zest_grouped_matmul_weight_grad: each group's weight gradient of
 * zest_grouped_matmul, x[rows of g]^T dy[rows of g] ([k, n]; [n, k] when
 * dw_transposed) into dw[g] (overwritten; 0 for an empty group). x [rows,
 * k], dy [rows, n], dw [groups, ...] contiguous; offsets as above. */
#define ZEST_grouped_matmul_weight_grad_PARAMS(T)                              \
  int64_t rows, int64_t n, int64_t k, int64_t groups, const T *x, const T *dy, \
      const void *offsets, int32_t offset_bits, T *dw, int32_t dw_transposed
#define ZEST_grouped_matmul_weight_grad_ARGS                                   \
  rows, n, k, groups, x, dy, offsets, offset_bits, dw, dw_transposed

/* The CPU runtime's products (OpenBLAS). The layers with bf16 (_bf16) or f16
 * (_f16) storage, uint16_t bit patterns for every matrix and vector,
 * accumulate their products in f32 and run the epilogues in f32; each stored
 * tensor is rounded to 16 bits once (to nearest even), and a stored
 * intermediate (the pre-activation, g) is rounded before it is used, as
 * PyTorch's CPU bf16 linear layers compute. */
#define ZEST_PRODUCT(KIND, SUFFIX, T)                                          \
  void zest_##KIND##SUFFIX(ZEST_##KIND##_PARAMS(T));
#include "zest_products.def"
#undef ZEST_PRODUCT

#ifdef __cplusplus
}
#endif

#endif /* ZEST_RUNTIME_H */
