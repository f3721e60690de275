//===- HeapPages.cpp - The executable's heap: kept and mapped ahead -------===//

#include "HeapPages.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 // Linux 5.14
#endif

using namespace zest;

/// What the heap grows by beyond each request: room for the largest
/// transient allocation of a step, oneDNN's packing buffers (16 MB at most
/// for Llama 160M's products, measured with heaptrack).
static constexpr size_t kHeapTopPadBytes = size_t(32) << 20;

void zest::keepFreedMemory() {
  // MPI's nonblocking collectives allocate temporaries per call (libnbc's
  // reduce-scatter: twice the message), which glibc mapped and unmapped, so
  // every step faulted them in again (GPT-2 124M at W=2: 121,000 faults a
  // step).
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  mallopt(M_TOP_PAD, int(kHeapTopPadBytes));
}

int64_t zest::pageFaults() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return int64_t(usage.ru_minflt) + int64_t(usage.ru_majflt);
}

/// Where the heap starts, from /proc/self/maps' [heap] line (0: unknown).
static uintptr_t heapStart() {
  std::FILE *maps = std::fopen("/proc/self/maps", "r");
  if (!maps)
    return 0;
  char line[512];
  uintptr_t start = 0;
  while (std::fgets(line, sizeof line, maps))
    if (std::strstr(line, "[heap]")) {
      unsigned long begin = 0;
      if (std::sscanf(line, "%lx-", &begin) == 1)
        start = uintptr_t(begin);
      break;
    }
  std::fclose(maps);
  return start;
}

/// Writes a byte of every page of the free top chunk, where the kernel
/// lacks MADV_POPULATE_WRITE: the heap's next growth is carved from there.
/// Pages inside the heap stay as they are (their owners' data).
static void touchTopChunk() {
  struct mallinfo2 info = mallinfo2();
  size_t page = size_t(sysconf(_SC_PAGESIZE));
  if (info.keepcost < 2 * page)
    return;
  size_t bytes = std::min(info.keepcost - page, kHeapTopPadBytes);
  auto *top = static_cast<volatile char *>(std::malloc(bytes));
  if (!top)
    return;
  for (size_t offset = 0; offset < bytes; offset += page)
    top[offset] = 0;
  std::free(const_cast<char *>(top));
}

/// Grows the heap's free top chunk to the pad where allocations have eaten
/// into it: a later request the free chunks below cannot hold is carved from
/// the top, on pages mapped ahead, instead of growing the heap in the step
/// (Pythia-160M at W=2: 50-250 pages in a late step, glibc's sysmalloc
/// first). A request of the pad's size goes to the smallest free chunk that
/// holds it, so the free chunks that large are taken first (and given back
/// unchanged); the next one comes from the top, which grows by no more than
/// it lacks (no pad on top of that: each of its pages is mapped).
static void growTopChunk() {
  if (mallinfo2().keepcost >= kHeapTopPadBytes)
    return;
  mallopt(M_TOP_PAD, 0);
  std::vector<void *> taken;
  while (taken.size() < 64) {
    void *end = sbrk(0);
    void *chunk = std::malloc(kHeapTopPadBytes);
    if (!chunk)
      break;
    taken.push_back(chunk);
    if (sbrk(0) != end) // carved from the top, which had to grow
      break;
  }
  for (auto it = taken.rbegin(); it != taken.rend(); ++it)
    std::free(*it);
  mallopt(M_TOP_PAD, int(kHeapTopPadBytes));
}

void HeapPrefaulter::afterStep() {
  // Pages of the heap no one has written yet: free chunks' unused tails and
  // the pad above the top, which malloc hands out later without growing
  // the heap. oneDNN's JIT kernels then wrote them first in some later step
  // (Pythia-160M at W=2: 493 pages in the 6th step, every one below the
  // heap's end after the first step, none of them faulted before).
  // MADV_POPULATE_WRITE maps them writable without touching their contents.
  growTopChunk();
  auto end = reinterpret_cast<uintptr_t>(sbrk(0));
  if (end <= mappedEnd)
    return;
  uintptr_t begin = mappedEnd ? mappedEnd : heapStart();
  size_t page = size_t(sysconf(_SC_PAGESIZE));
  begin &= ~uintptr_t(page - 1);
  bool mapped = begin != 0 && madvise(reinterpret_cast<void *>(begin),
                                      end - begin, MADV_POPULATE_WRITE) == 0;
  if (!mapped && mappedEnd == 0)
    touchTopChunk();
  mappedEnd = end;
}
