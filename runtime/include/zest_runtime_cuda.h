/*===- zest_runtime_cuda.h - The CUDA backends' part of the C API -*- C -*-===
 *
 * With ZEST_BACKEND=nccl (one GPU per rank, NCCL) or ZEST_BACKEND=staged
 * (device -> host -> MPI -> device; ranks may share a GPU), the collectives
 * of zest_runtime.h take device pointers and are ordered on this process's
 * compute stream: a collective reads what was enqueued on the stream before
 * its start, and work enqueued after its zest_wait sees its result. Only
 * executables linked with the CUDA runtime library (zest_runtime_cuda) have
 * these backends.
 *
 *===----------------------------------------------------------------------===*/

#ifndef ZEST_RUNTIME_CUDA_H
#define ZEST_RUNTIME_CUDA_H

#include "zest_runtime.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The cuBLASLt workspace, taken from the runtime's pool at the first product
 * and kept; a fused linear backward with an activation also takes its
 * gradient g (m x n elements) from the pool for the call.
 * zest-plan-memory counts both. */
#define ZEST_CUDA_WORKSPACE_BYTES (32 << 20)

/* The pool bytes zest_cuda_cross_entropy_forward (backward = 0) and
 * _backward (1) take for the duration of a call, which zest-plan-memory
 * counts: the partial sums and counts of ZEST_CUDA_LOSS_CHUNKS chunks of
 * rows (16 bytes each), then a reducing forward's rows' losses (rows
 * floats; none for ZEST_LOSS_NONE, which writes them to `loss`) or the
 * backward's gradient scale (a float), rounded up to 16 bytes: the fused
 * head places the backward's scratch right after the forward's, and its
 * partial sums are doubles, which a GPU reads only when aligned. */
#define ZEST_CUDA_LOSS_CHUNKS 1024
static inline int64_t
zest_cuda_cross_entropy_scratch(int backward, int64_t rows, int32_t reduction) {
  if (rows == 0 || (!backward && reduction == ZEST_LOSS_NONE))
    return 0;
  return (ZEST_CUDA_LOSS_CHUNKS * 16 + (backward ? 4 : rows * 4) + 15) / 16 *
         16;
}

/* The pool bytes zest_cuda_linear_cross_entropy takes for the duration of a
 * call, which zest-plan-memory counts: a reducing forward's scratch (every
 * row's loss) and a backward's (the gradient's scale over all rows), both
 * held while the chunks run. */
static inline int64_t
zest_cuda_linear_cross_entropy_scratch(int64_t rows, int32_t reduction) {
  return zest_cuda_cross_entropy_scratch(0, rows, reduction) +
         zest_cuda_cross_entropy_scratch(1, rows, reduction);
}

/* The pool bytes zest_cuda_attention_backward takes for the duration of a
 * call, which zest-plan-memory counts: a float per query row (dout . out). */
static inline int64_t zest_cuda_attention_backward_scratch(int64_t batch,
                                                           int64_t heads,
                                                           int64_t q_len) {
  return batch * heads * q_len * 4;
}

/* The compute stream (a cudaStream_t) kernels and copies must use. */
void *zest_cuda_compute_stream(void);
/* The CUDA device this rank drives. */
int zest_cuda_device(void);

/* Products and fused linear layers on cuBLASLt, with the contracts of
 * zest_sgemm(_batched) and zest_linear_*(_bf16, _f16) in zest_runtime.h on
 * device pointers, enqueued on the compute stream (zestc --target=cuda calls
 * these). Forward epilogues: BIAS, GELU(_AUX)_BIAS (tanh GELU, the
 * pre-activation kept), RELU_BIAS; GELU with erf, SiLU and ReLU with a kept
 * pre-activation run one elementwise kernel after a BIAS product. f32
 * products accumulate in f32 without TF32. */
#define ZEST_PRODUCT(KIND, SUFFIX, T)                                          \
  void zest_cuda_##KIND##SUFFIX(ZEST_##KIND##_PARAMS(T));
#include "zest_products.def"
#undef ZEST_PRODUCT

#ifdef __cplusplus
}
#endif

#endif /* ZEST_RUNTIME_CUDA_H */
