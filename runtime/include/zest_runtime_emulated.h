/*===- zest_runtime_emulated.h - zestc's kernels on the emulated GPU -*- C
 *-*-===
 *
 * zestc --target=cuda-emulated compiles each GPU kernel for the host as one
 * function that runs one block: all its threads, in phases split at the
 * block's barriers (zest-emulate-gpu-kernels). A global constructor
 * registers each kernel under its GPU module's and its own name; the
 * emulated cudaLibraryGetKernel finds it there, and the emulated
 * cudaLaunchKernel calls it once per block with the launch's parameters
 * (the same void ** array the real launch takes).
 *
 *===----------------------------------------------------------------------===*/

#ifndef ZEST_RUNTIME_EMULATED_H
#define ZEST_RUNTIME_EMULATED_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* `launch` holds the block's index (x, y, z), the block's size (x, y, z)
 * and the grid's size (x, y, z). */
typedef void (*zest_emulated_kernel_t)(void **params, const int64_t *launch);

/* Registers `kernel` of GPU module `module`. It takes `num_params`
 * parameters of `param_bytes[i]` bytes each (a launch copies them, as
 * cudaLaunchKernel does); those at `buffers[0 .. num_buffers)` are the
 * aligned pointers of its buffers, which a launch checks are device
 * memory. */
void zest_emulated_register_kernel(const char *module, const char *name,
                                   zest_emulated_kernel_t kernel,
                                   int32_t num_params,
                                   const int32_t *param_bytes,
                                   const int32_t *buffers, int32_t num_buffers);

/* Called by an emulated kernel whose threads disagree on a branch that
 * holds a barrier; ends the job naming the kernel. */
void zest_emulated_divergent_barrier(void);

/* Defined (returning 1) only by the emulated device's runtime: the device
 * runtime's host code asks whether its times are a GPU's. */
int zest_emulated_device(void);

/* The image zestc embeds for a GPU module of emulated kernels (what
 * cudaLibraryLoadData receives): this prefix, then the module's name. */
#define ZEST_EMULATED_IMAGE_PREFIX "zest-emulated-kernels:"

#ifdef __cplusplus
}
#endif

#endif /* ZEST_RUNTIME_EMULATED_H */
