//===- DeviceMemory.h - The emulated GPU's memory ---------------*- C++ -*-===//
//
// The emulated device's memory is one reserved region of the address space,
// mapped without access except while an emulated kernel, copy, product or
// collective runs (an AccessScope). A host access to device memory anywhere
// else faults, and the fault handler names the address and the allocation;
// every emulated API checks that the pointers it is given are of the kind it
// expects and names the call otherwise. This is what makes the emulated
// device strict where a real GPU would crash, hang or read garbage.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_CUDA_EMULATED_DEVICEMEMORY_H
#define ZEST_RUNTIME_CUDA_EMULATED_DEVICEMEMORY_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace zest::emulated {

/// Allocates `bytes` of device memory, 256-byte aligned as cudaMalloc's;
/// null when the region is exhausted.
void *allocateDevice(size_t bytes);
/// Frees what allocateDevice returned; false for any other pointer.
bool freeDevice(void *ptr);
/// Whether [ptr, ptr + bytes) lies inside one device allocation.
bool isDevice(const void *ptr, size_t bytes = 1);
/// Whether `ptr` points into the device region at all (allocated or not).
bool inDeviceRegion(const void *ptr);

/// Page-locked host memory (cudaMallocHost): ordinary host memory the
/// emulated copies accept as pinned.
void *allocatePinned(size_t bytes);
bool freePinned(void *ptr);
bool isPinned(const void *ptr);

/// Device memory is accessible while at least one scope is alive.
class AccessScope {
public:
  AccessScope();
  ~AccessScope();
  AccessScope(const AccessScope &) = delete;
  AccessScope &operator=(const AccessScope &) = delete;
};

/// Ends the job with `message` (an emulated device's error: a bug the real
/// GPU would show as a crash, a hang or a wrong result).
[[noreturn]] void deviceError(const std::string &message);

/// "0x... (host memory)" or "0x... (device allocation of N bytes + offset)".
std::string describePointer(const void *ptr);

/// Checks that [ptr, ptr + bytes) is device memory for `what`, the API call
/// and the argument's role ("cudaMemcpyAsync destination").
void requireDevice(const void *ptr, size_t bytes, const std::string &what);
/// Checks that `ptr` is host memory for `what`.
void requireHost(const void *ptr, const std::string &what);

} // namespace zest::emulated

#endif // ZEST_RUNTIME_CUDA_EMULATED_DEVICEMEMORY_H
