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

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The cuBLASLt workspace, taken from the runtime's pool at the first product
 * and kept; a fused linear backward with an activation also takes its
 * gradient g (m x n elements) from the pool for the call.
 * zest-plan-memory counts both. */
#define ZEST_CUDA_WORKSPACE_BYTES (32 << 20)

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
void zest_cuda_sgemm(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                     int64_t k, const float *a, int64_t lda, const float *b,
                     int64_t ldb, float *c, int64_t ldc, int32_t accumulate);
void zest_cuda_sgemm_batched(int32_t trans_a, int32_t trans_b, int64_t batch,
                             int64_t m, int64_t n, int64_t k, const float *a,
                             int64_t lda, int64_t stride_a, const float *b,
                             int64_t ldb, int64_t stride_b, float *c,
                             int64_t ldc, int64_t stride_c, int32_t accumulate);
void zest_cuda_linear_forward(int64_t m, int64_t n, int64_t k, const float *x,
                              int64_t ldx, const float *w, int64_t ldw,
                              int32_t w_transposed, const float *bias,
                              int32_t activation, float *pre, int64_t ldpre,
                              float *y, int64_t ldy);
void zest_cuda_linear_backward(int64_t m, int64_t n, int64_t k, const float *dy,
                               int64_t lddy, const float *pre, int64_t ldpre,
                               int32_t activation, const float *x, int64_t ldx,
                               const float *w, int64_t ldw,
                               int32_t w_transposed, float *dx, int64_t lddx,
                               float *dw, int64_t lddw, int32_t dw_transposed,
                               float *db);
void zest_cuda_linear_forward_bf16(int64_t m, int64_t n, int64_t k,
                                   const uint16_t *x, int64_t ldx,
                                   const uint16_t *w, int64_t ldw,
                                   int32_t w_transposed, const uint16_t *bias,
                                   int32_t activation, uint16_t *pre,
                                   int64_t ldpre, uint16_t *y, int64_t ldy);
void zest_cuda_linear_backward_bf16(int64_t m, int64_t n, int64_t k,
                                    const uint16_t *dy, int64_t lddy,
                                    const uint16_t *pre, int64_t ldpre,
                                    int32_t activation, const uint16_t *x,
                                    int64_t ldx, const uint16_t *w, int64_t ldw,
                                    int32_t w_transposed, uint16_t *dx,
                                    int64_t lddx, uint16_t *dw, int64_t lddw,
                                    int32_t dw_transposed, uint16_t *db);
void zest_cuda_linear_forward_f16(int64_t m, int64_t n, int64_t k,
                                  const uint16_t *x, int64_t ldx,
                                  const uint16_t *w, int64_t ldw,
                                  int32_t w_transposed, const uint16_t *bias,
                                  int32_t activation, uint16_t *pre,
                                  int64_t ldpre, uint16_t *y, int64_t ldy);
void zest_cuda_linear_backward_f16(int64_t m, int64_t n, int64_t k,
                                   const uint16_t *dy, int64_t lddy,
                                   const uint16_t *pre, int64_t ldpre,
                                   int32_t activation, const uint16_t *x,
                                   int64_t ldx, const uint16_t *w, int64_t ldw,
                                   int32_t w_transposed, uint16_t *dx,
                                   int64_t lddx, uint16_t *dw, int64_t lddw,
                                   int32_t dw_transposed, uint16_t *db);

#ifdef __cplusplus
}
#endif

#endif /* ZEST_RUNTIME_CUDA_H */
