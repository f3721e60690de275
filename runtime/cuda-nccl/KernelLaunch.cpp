//===- KernelLaunch.cpp - Launching zestc's GPU kernels -------------------===//
//
// `zestc --target=cuda` leaves kernel launches to MLIR's GPU runtime ABI
// (the mgpu* functions that gpu.launch_func translates to), which Debian's
// MLIR does not ship. Zest implements it on the CUDA driver API with two
// differences that matter for a training step:
//
// * Modules are registered by global constructors, before main picks this
//   rank's GPU: loading is deferred to the first lookup of a kernel.
// * Every launch goes to the runtime's compute stream, and the per-launch
//   "stream" is that stream: creating, synchronizing and destroying it are
//   no-ops. Kernels, products and collectives are ordered on the compute
//   stream, so the host never waits for a kernel; it waits only where the
//   runtime must (zest_wait of a staged collective, barriers, the end).
//
//===----------------------------------------------------------------------===//

#include "Device.h"

#include <cuda.h>

#include <mutex>
#include <string>
#include <unordered_map>

using namespace zest::rt;

namespace {

/// A kernel binary (fatbin or cubin, or PTX to JIT) and, once loaded, its
/// module and the functions looked up in it.
struct LazyModule {
  const void *image = nullptr;
  bool ptx = false;
  int optLevel = 3;
  CUmodule module = nullptr;
  std::unordered_map<std::string, CUfunction> functions;
  std::mutex mutex;
};

void checkDriver(CUresult status, const std::string &what) {
  if (status == CUDA_SUCCESS)
    return;
  const char *text = nullptr;
  cuGetErrorString(status, &text);
  fatal("CUDA error in " + what + ": " + (text ? text : "unknown error"));
}

/// The module, loaded into this rank's device context on first use.
CUmodule loadModule(LazyModule &lazy) {
  if (lazy.module)
    return lazy.module;
  if (!cuda::streams.compute)
    fatal("this executable was compiled with zestc --target=cuda: run it "
          "with ZEST_BACKEND=nccl (one GPU per rank) or ZEST_BACKEND=staged");
  // The runtime API made the device's primary context current.
  cuda::checkCuda(cudaSetDevice(cuda::streams.device), "cudaSetDevice");
  cuda::checkCuda(cudaFree(nullptr), "initializing the device context");
  if (lazy.ptx) {
    CUjit_option options[] = {CU_JIT_OPTIMIZATION_LEVEL};
    void *values[] = {reinterpret_cast<void *>(intptr_t(lazy.optLevel))};
    checkDriver(
        cuModuleLoadDataEx(&lazy.module, lazy.image, 1, options, values),
        "JIT-compiling a kernel module's PTX");
  } else {
    checkDriver(cuModuleLoadData(&lazy.module, lazy.image),
                "loading a kernel module");
  }
  return lazy.module;
}

} // namespace

extern "C" {

void *mgpuModuleLoad(void *data, size_t /*size*/) {
  auto *lazy = new LazyModule;
  lazy->image = data;
  return lazy;
}

void *mgpuModuleLoadJIT(void *data, int optLevel) {
  auto *lazy = new LazyModule;
  lazy->image = data;
  lazy->ptx = true;
  lazy->optLevel = optLevel;
  return lazy;
}

void mgpuModuleUnload(void *module) {
  // At exit, after the runtime has finalized: the context goes with the
  // process, so the module is not unloaded one by one.
  delete static_cast<LazyModule *>(module);
}

void *mgpuModuleGetFunction(void *module, const char *name) {
  auto &lazy = *static_cast<LazyModule *>(module);
  std::lock_guard<std::mutex> lock(lazy.mutex);
  auto [it, inserted] = lazy.functions.try_emplace(name, nullptr);
  if (inserted)
    checkDriver(cuModuleGetFunction(&it->second, loadModule(lazy), name),
                std::string("looking up kernel ") + name);
  return it->second;
}

void *mgpuStreamCreate() { return cuda::streams.compute; }

void mgpuStreamSynchronize(void * /*stream*/) {}

void mgpuStreamDestroy(void * /*stream*/) {}

void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t sharedBytes, void *stream,
                      void **params, void **extra, size_t /*paramsCount*/) {
  checkDriver(cuLaunchKernel(static_cast<CUfunction>(function), gridX, gridY,
                             gridZ, blockX, blockY, blockZ, sharedBytes,
                             static_cast<CUstream>(stream), params, extra),
              "launching a kernel of " + std::to_string(gridX) + " x " +
                  std::to_string(blockX) + " threads");
}

} // extern "C"
