//===- DeviceMemory.cpp - The emulated GPU's memory -----------------------===//

#include "DeviceMemory.h"
#include "../common/Backend.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <execinfo.h>
#include <map>
#include <mutex>
#include <sys/mman.h>
#include <unistd.h>

using namespace zest::emulated;

namespace {

constexpr size_t kAlignment = 256;

/// The reserved region, its allocations (offset -> size) and free ranges.
struct Region {
  char *base = nullptr;
  size_t size = 0;
  size_t highWater = 0; // bytes from base ever handed out, page-rounded
  std::map<size_t, size_t> allocations, free;
  std::map<const char *, size_t> pinned; // base -> bytes
  int scopes = 0;
  std::recursive_mutex mutex;
  struct sigaction previous {};
};

Region &region();

/// What an allocation of `bytes` occupies: at least one alignment unit.
size_t paddedSize(size_t bytes) {
  return (std::max<size_t>(bytes, 1) + kAlignment - 1) / kAlignment *
         kAlignment;
}

/// Device memory is handed out and protected in transparent huge pages
/// where the system has them: a scope's mprotect then changes one entry per
/// 2 MiB instead of 512 (it was most of an emulated kernel test's time).
constexpr size_t kHugePage = 2 << 20;

size_t hugePageRound(size_t bytes) {
  return (bytes + kHugePage - 1) / kHugePage * kHugePage;
}

void protect(Region &r, size_t from, size_t to, bool access) {
  if (to > from && mprotect(r.base + from, to - from,
                            access ? PROT_READ | PROT_WRITE : PROT_NONE))
    zest::rt::fatal("emulated device: mprotect failed: " +
                    std::string(std::strerror(errno)));
}

/// The allocation holding `ptr`, or allocations.end().
std::map<size_t, size_t>::iterator findAllocation(Region &r, const void *ptr) {
  auto p = static_cast<const char *>(ptr);
  if (p < r.base || p >= r.base + r.size)
    return r.allocations.end();
  size_t offset = size_t(p - r.base);
  auto it = r.allocations.upper_bound(offset);
  if (it == r.allocations.begin())
    return r.allocations.end();
  --it;
  return offset < it->first + it->second ? it : r.allocations.end();
}

/// A host access to the region outside a device call ends here.
void onFault(int signal, siginfo_t *info, void *context) {
  Region &r = region();
  if (inDeviceRegion(info->si_addr)) {
    char message[256];
    int length = std::snprintf(
        message, sizeof(message),
        "zest: error: emulated device: the host accessed device memory at %p "
        "outside any kernel, copy or collective (a real GPU's memory is not "
        "the host's); where:\n",
        info->si_addr);
    ssize_t ignored = write(STDERR_FILENO, message, size_t(length));
    (void)ignored;
    void *frames[32];
    backtrace_symbols_fd(frames, backtrace(frames, 32), STDERR_FILENO);
    _exit(1);
  }
  // Not ours: whoever handled it before (MPI's reporter), or the default.
  if (r.previous.sa_flags & SA_SIGINFO && r.previous.sa_sigaction) {
    r.previous.sa_sigaction(signal, info, context);
    return;
  }
  sigaction(signal, &r.previous, nullptr);
  raise(signal);
}

Region &region() {
  static Region *r = [] {
    auto *r = new Region;
    // Address space only (no memory is committed until written): as much
    // as asked, or less where the system limits reservations.
    const char *gib = std::getenv("ZEST_EMULATED_DEVICE_GIB");
    void *base = MAP_FAILED;
    for (size_t size = size_t(gib ? std::atoll(gib) : 64) << 30;
         base == MAP_FAILED && size >= (size_t(1) << 30); size /= 2) {
      r->size = size;
      base = mmap(nullptr, size + kHugePage, PROT_NONE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    }
    if (base == MAP_FAILED)
      zest::rt::fatal("emulated device: cannot reserve its memory region "
                      "(ZEST_EMULATED_DEVICE_GIB sets its size)");
    uintptr_t aligned = (reinterpret_cast<uintptr_t>(base) + kHugePage - 1) &
                        ~uintptr_t(kHugePage - 1);
    r->base = reinterpret_cast<char *>(aligned);
    // Best effort: without transparent huge pages it protects page by page.
    (void)madvise(r->base, r->size, MADV_HUGEPAGE);
    r->free[0] = r->size;
    struct sigaction action {};
    action.sa_sigaction = onFault;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &r->previous);
    return r;
  }();
  return *r;
}

} // namespace

void *zest::emulated::allocateDevice(size_t bytes) {
  Region &r = region();
  std::lock_guard<std::recursive_mutex> lock(r.mutex);
  size_t size = paddedSize(bytes);
  for (auto it = r.free.begin(); it != r.free.end(); ++it) {
    if (it->second < size)
      continue;
    size_t offset = it->first, left = it->second - size;
    r.free.erase(it);
    if (left)
      r.free[offset + size] = left;
    r.allocations[offset] = bytes;
    size_t end = hugePageRound(offset + size);
    if (end > r.highWater) {
      if (r.scopes)
        protect(r, r.highWater, end, true);
      r.highWater = end;
    }
    // Fresh device memory is garbage on a GPU: NaNs here, so a step that
    // reads what it never wrote shows it in its losses.
    AccessScope scope;
    std::memset(r.base + offset, 0xff, bytes);
    return r.base + offset;
  }
  return nullptr;
}

bool zest::emulated::freeDevice(void *ptr) {
  Region &r = region();
  std::lock_guard<std::recursive_mutex> lock(r.mutex);
  auto it = findAllocation(r, ptr);
  if (it == r.allocations.end() || r.base + it->first != ptr)
    return false;
  size_t offset = it->first;
  size_t size = paddedSize(it->second);
  r.allocations.erase(it);
  // Coalesce with the free neighbours.
  auto next = r.free.lower_bound(offset);
  if (next != r.free.end() && next->first == offset + size) {
    size += next->second;
    next = r.free.erase(next);
  }
  if (next != r.free.begin()) {
    auto before = std::prev(next);
    if (before->first + before->second == offset) {
      before->second += size;
      return true;
    }
  }
  r.free[offset] = size;
  return true;
}

bool zest::emulated::isDevice(const void *ptr, size_t bytes) {
  Region &r = region();
  std::lock_guard<std::recursive_mutex> lock(r.mutex);
  auto it = findAllocation(r, ptr);
  if (it == r.allocations.end())
    return false;
  size_t offset = size_t(static_cast<const char *>(ptr) - r.base);
  return offset + bytes <= it->first + std::max<size_t>(it->second, 1);
}

bool zest::emulated::inDeviceRegion(const void *ptr) {
  Region &r = region();
  auto p = static_cast<const char *>(ptr);
  return p >= r.base && p < r.base + r.size;
}

void *zest::emulated::allocatePinned(size_t bytes) {
  void *ptr = std::aligned_alloc(kAlignment, paddedSize(bytes));
  Region &r = region();
  std::lock_guard<std::recursive_mutex> lock(r.mutex);
  r.pinned[static_cast<const char *>(ptr)] = bytes;
  return ptr;
}

bool zest::emulated::freePinned(void *ptr) {
  Region &r = region();
  std::lock_guard<std::recursive_mutex> lock(r.mutex);
  if (!r.pinned.erase(static_cast<const char *>(ptr)))
    return false;
  std::free(ptr);
  return true;
}

bool zest::emulated::isPinned(const void *ptr) {
  Region &r = region();
  std::lock_guard<std::recursive_mutex> lock(r.mutex);
  auto p = static_cast<const char *>(ptr);
  auto it = r.pinned.upper_bound(p);
  if (it == r.pinned.begin())
    return false;
  --it;
  return p < it->first + std::max<size_t>(it->second, 1);
}

AccessScope::AccessScope() {
  Region &r = region();
  std::lock_guard<std::recursive_mutex> lock(r.mutex);
  if (r.scopes++ == 0)
    protect(r, 0, r.highWater, true);
}

AccessScope::~AccessScope() {
  Region &r = region();
  std::lock_guard<std::recursive_mutex> lock(r.mutex);
  if (--r.scopes == 0)
    protect(r, 0, r.highWater, false);
}

void zest::emulated::deviceError(const std::string &message) {
  zest::rt::fatal("emulated device: " + message);
}

std::string zest::emulated::describePointer(const void *ptr) {
  char address[32];
  std::snprintf(address, sizeof(address), "%p", ptr);
  Region &r = region();
  std::lock_guard<std::recursive_mutex> lock(r.mutex);
  if (!inDeviceRegion(ptr))
    return std::string(address) + " (host memory)";
  auto it = findAllocation(r, ptr);
  if (it == r.allocations.end())
    return std::string(address) + " (device memory not allocated or freed)";
  return std::string(address) + " (device allocation of " +
         std::to_string(it->second) + " bytes, at offset " +
         std::to_string(static_cast<const char *>(ptr) - r.base - it->first) +
         ")";
}

void zest::emulated::requireDevice(const void *ptr, size_t bytes,
                                   const std::string &what) {
  if (bytes == 0 || isDevice(ptr, bytes))
    return;
  deviceError(what + " is " + describePointer(ptr) + ", but " +
              std::to_string(bytes) +
              " bytes of device memory are needed there");
}

void zest::emulated::requireHost(const void *ptr, const std::string &what) {
  if (!inDeviceRegion(ptr))
    return;
  deviceError(what + " must be host memory but is " + describePointer(ptr));
}
