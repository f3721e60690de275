//===- KernelLaunch.cpp - Launching zestc's GPU kernels -------------------===//
//
// `zestc --target=cuda` leaves kernel launches to MLIR's GPU runtime ABI
// (the mgpu* functions that gpu.launch_func translates to), which Debian's
// MLIR does not ship. Zest implements it on the CUDA runtime's library API
// (cudaLibraryLoadData, cudaLibraryGetKernel, cudaLaunchKernel), so that an
// executable needs no libcuda to start and reports a missing driver or GPU
// as an error, with two differences that matter for a training step:
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
#include "KernelTimes.h"

#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

using namespace zest::rt;

namespace {

/// A kernel binary (fatbin or cubin, or PTX to JIT) and, once loaded, its
/// library and the kernels looked up in it.
struct LazyModule {
  const void *image = nullptr;
  bool ptx = false;
  int optLevel = 3;
  cudaLibrary_t library = nullptr;
  std::unordered_map<std::string, cudaKernel_t> kernels;
  std::mutex mutex;
};

/// The names of the kernels looked up so far, for ZEST_KERNEL_TIMES.
std::unordered_map<void *, std::string> &kernelNames() {
  static std::unordered_map<void *, std::string> names;
  return names;
}

/// The library, loaded on this rank's device on first use.
cudaLibrary_t loadModule(LazyModule &lazy) {
  if (lazy.library)
    return lazy.library;
  if (!cuda::streams.compute)
    fatal("this executable was compiled with zestc --target=cuda: run it "
          "with ZEST_BACKEND=nccl (one GPU per rank) or ZEST_BACKEND=staged");
  cuda::checkCuda(cudaSetDevice(cuda::streams.device), "cudaSetDevice");
  cudaJitOption options[] = {cudaJitOptimizationLevel};
  void *values[] = {reinterpret_cast<void *>(intptr_t(lazy.optLevel))};
  cuda::checkCuda(cudaLibraryLoadData(&lazy.library, lazy.image,
                                      lazy.ptx ? options : nullptr,
                                      lazy.ptx ? values : nullptr,
                                      lazy.ptx ? 1 : 0, nullptr, nullptr, 0),
                  lazy.ptx ? "JIT-compiling a kernel module's PTX"
                           : "loading a kernel module");
  return lazy.library;
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
  // process, so the library is not unloaded one by one.
  delete static_cast<LazyModule *>(module);
}

void *mgpuModuleGetFunction(void *module, const char *name) {
  // Every launch looks its kernel up: by the addresses of its module and of
  // its name (a constant of the executable), without a lock or a string
  // once found.
  struct Hash {
    size_t operator()(const std::pair<void *, const char *> &key) const {
      return std::hash<void *>()(key.first) ^
             (std::hash<const void *>()(key.second) << 1);
    }
  };
  thread_local std::unordered_map<std::pair<void *, const char *>, void *, Hash>
      found;
  auto [cached, isNew] = found.try_emplace({module, name}, nullptr);
  if (!isNew)
    return cached->second;
  auto &lazy = *static_cast<LazyModule *>(module);
  std::lock_guard<std::mutex> lock(lazy.mutex);
  auto [it, inserted] = lazy.kernels.try_emplace(name, nullptr);
  if (inserted) {
    cuda::checkCuda(cudaLibraryGetKernel(&it->second, loadModule(lazy), name),
                    std::string("looking up kernel ") + name);
    kernelNames()[it->second] = name;
  }
  cached->second = it->second;
  return it->second;
}

void *mgpuStreamCreate() { return cuda::streams.compute; }

void mgpuStreamSynchronize(void * /*stream*/) {}

void mgpuStreamDestroy(void * /*stream*/) {}

void mgpuLaunchKernel(void *kernel, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t sharedBytes, void *stream,
                      void **params, void **extra, size_t /*paramsCount*/) {
  if (extra)
    fatal("a kernel launch passes its arguments as 'extra', which the "
          "runtime does not support");
  auto cudaStream = static_cast<cudaStream_t>(stream);
  // Named with its launch's size: a kernel on too few threads (one per
  // column of a reduction, say) shows in the profile as such.
  cuda::TimedScope timed(
      [&] {
        return kernelNames()[kernel] + " (" +
               std::to_string(gridX * gridY * gridZ) + " blocks x " +
               std::to_string(blockX * blockY * blockZ) + " threads)";
      },
      cudaStream);
  cudaError_t status = cudaLaunchKernel(kernel, dim3(gridX, gridY, gridZ),
                                        dim3(blockX, blockY, blockZ), params,
                                        sharedBytes, cudaStream);
  if (status != cudaSuccess) // the message is built only then
    cuda::checkCuda(status, "launching a kernel of " + std::to_string(gridX) +
                                " x " + std::to_string(blockX) + " threads");
}

} // extern "C"
