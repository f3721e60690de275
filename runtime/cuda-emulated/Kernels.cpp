//===- Kernels.cpp - Kernel modules and launches on the emulated GPU ------===//
//
// zestc --target=cuda-emulated embeds, for each GPU module, an image naming
// it (zest_runtime_emulated.h) and registers each kernel, compiled for the
// host, from a global constructor. cudaLibraryLoadData accepts only such an
// image (a real GPU binary cannot run here); cudaLaunchKernel checks the
// launch and its buffers, then runs the kernel block by block with device
// memory accessible.
//
//===----------------------------------------------------------------------===//

#include "DeviceMemory.h"
#include "Launch.h"
#include "Streams.h"
#include "zest_runtime_emulated.h"

#include <cstring>
#include <map>
#include <string>
#include <vector>

using namespace zest::emulated;

struct CUlib_st {
  std::string module;
};

struct CUkern_st {
  std::string module, name;
  zest_emulated_kernel_t entry = nullptr;
  std::vector<int32_t> paramBytes;
  std::vector<int32_t> buffers;
};

thread_local ThreadIndex zest::emulated::current;

namespace {

/// The kernel whose blocks are running, for errors from inside it.
thread_local const CUkern_st *running = nullptr;

std::map<std::pair<std::string, std::string>, CUkern_st> &registry() {
  static auto *kernels =
      new std::map<std::pair<std::string, std::string>, CUkern_st>;
  return *kernels;
}

uint64_t count(dim3 d) { return uint64_t(d.x) * d.y * d.z; }

/// Checks a launch's shape as a GPU would (a block of at most 1024 threads).
void checkShape(const std::string &kernel, dim3 grid, dim3 block) {
  if (count(block) == 0 || count(block) > 1024 || count(grid) == 0)
    deviceError("a launch of kernel " + kernel + " has a grid of " +
                std::to_string(count(grid)) + " blocks of " +
                std::to_string(count(block)) +
                " threads (a block has 1 to 1024 threads)");
}

void checkBuffers(const CUkern_st &kernel, void **params) {
  for (int32_t index : kernel.buffers) {
    void *pointer = *static_cast<void **>(params[index]);
    if (pointer && !isDevice(pointer))
      deviceError("kernel " + kernel.name + " of module " + kernel.module +
                  " is launched with parameter #" + std::to_string(index) +
                  " (a buffer) at " + describePointer(pointer) +
                  ": kernels read and write device memory only");
  }
}

} // namespace

void zest::emulated::launchThreads(const char *kernel, dim3 grid, dim3 block,
                                   cudaStream_t stream,
                                   std::function<void()> thread) {
  checkShape(kernel, grid, block);
  enqueueWork(
      stream,
      [=] {
        ThreadIndex &index = current;
        index.grid = grid, index.blockSize = block;
        for (unsigned bz = 0; bz < grid.z; ++bz)
          for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx)
              for (unsigned tz = 0; tz < block.z; ++tz)
                for (unsigned ty = 0; ty < block.y; ++ty)
                  for (unsigned tx = 0; tx < block.x; ++tx) {
                    index.block = dim3(bx, by, bz);
                    index.thread = dim3(tx, ty, tz);
                    thread();
                  }
      },
      std::string("a launch of kernel ") + kernel);
}

extern "C" {

void zest_emulated_register_kernel(const char *module, const char *name,
                                   zest_emulated_kernel_t entry,
                                   int32_t numParams, const int32_t *paramBytes,
                                   const int32_t *buffers, int32_t numBuffers) {
  CUkern_st &kernel = registry()[{module, name}];
  kernel.module = module, kernel.name = name;
  kernel.entry = entry;
  kernel.paramBytes.assign(paramBytes, paramBytes + numParams);
  kernel.buffers.assign(buffers, buffers + numBuffers);
}

cudaError_t cudaLibraryLoadData(cudaLibrary_t *library, const void *code,
                                cudaJitOption *, void **, unsigned int,
                                cudaLibraryOption *, void **, unsigned int) {
  const char *image = static_cast<const char *>(code);
  size_t prefix = std::strlen(ZEST_EMULATED_IMAGE_PREFIX);
  if (std::strncmp(image, ZEST_EMULATED_IMAGE_PREFIX, prefix) != 0)
    deviceError("this executable's kernels are GPU code (zestc "
                "--target=cuda), which the emulated device cannot run: "
                "compile with --target=cuda-emulated");
  // One per module, alive with the process as a real GPU's libraries are
  // (the runtime never unloads them).
  static auto *libraries = new std::map<std::string, CUlib_st>;
  std::string module = image + prefix;
  *library = &libraries->try_emplace(module, CUlib_st{module}).first->second;
  return cudaSuccess;
}

cudaError_t cudaLibraryGetKernel(cudaKernel_t *kernel, cudaLibrary_t library,
                                 const char *name) {
  auto it = registry().find({library->module, name});
  if (it == registry().end())
    deviceError("no kernel " + std::string(name) + " in module " +
                library->module + " was registered");
  *kernel = &it->second;
  return cudaSuccess;
}

cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block,
                             void **params, size_t sharedBytes,
                             cudaStream_t stream) {
  auto *kernel = static_cast<const CUkern_st *>(func);
  std::string name = kernel->name;
  checkShape(name, grid, block);
  if (sharedBytes)
    deviceError("kernel " + name +
                " is launched with dynamic shared "
                "memory, which zestc's kernels do not use");
  checkBuffers(*kernel, params);
  // The launch's parameters are read now, as cudaLaunchKernel does.
  std::vector<char> values;
  std::vector<size_t> offsets;
  for (size_t i = 0; i < kernel->paramBytes.size(); ++i) {
    offsets.push_back(values.size());
    auto bytes = static_cast<const char *>(params[i]);
    values.insert(values.end(), bytes, bytes + kernel->paramBytes[i]);
    values.resize((values.size() + 7) / 8 * 8); // aligned for any scalar
  }
  enqueueWork(
      stream,
      [kernel, grid, block, values, offsets]() mutable {
        std::vector<void *> copied;
        for (size_t offset : offsets)
          copied.push_back(values.data() + offset);
        int64_t launch[9] = {0,       0,      0,      block.x, block.y,
                             block.z, grid.x, grid.y, grid.z};
        running = kernel;
        for (unsigned z = 0; z < grid.z; ++z)
          for (unsigned y = 0; y < grid.y; ++y)
            for (unsigned x = 0; x < grid.x; ++x) {
              launch[0] = x, launch[1] = y, launch[2] = z;
              kernel->entry(copied.data(), launch);
            }
        running = nullptr;
      },
      "a launch of kernel " + name);
  return cudaSuccess;
}

void zest_emulated_divergent_barrier(void) {
  deviceError(std::string("kernel ") + (running ? running->name : "?") +
              " synchronizes its block under a condition that differs between "
              "the block's threads (undefined on a GPU: it hangs or races)");
}

} // extern "C"
