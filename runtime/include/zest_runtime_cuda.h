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

#ifdef __cplusplus
extern "C" {
#endif

/* The compute stream (a cudaStream_t) kernels and copies must use. */
void *zest_cuda_compute_stream(void);
/* The CUDA device this rank drives. */
int zest_cuda_device(void);

#ifdef __cplusplus
}
#endif

#endif /* ZEST_RUNTIME_CUDA_H */
