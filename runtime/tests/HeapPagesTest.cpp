//===- HeapPagesTest.cpp - Heap pages mapped between steps ----------------===//
//
//   zest-heap-pages-test control|prefault
//
// Fragments the heap the way a step's transient allocations do (a free chunk
// whose tail was never written, below a live allocation; a top chunk eaten
// into), then makes two requests a later step would make and writes them:
// one the free chunk takes, one only the top can hold. Prints the page
// faults of each. With `prefault`, HeapPrefaulter::afterStep runs first (as
// the executable runs it after every step): both must fault no page, and the
// live allocations keep their contents.
//
//===----------------------------------------------------------------------===//

#include "../trainer/HeapPages.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr size_t kMiB = size_t(1) << 20;

/// Writes every byte of `bytes` at `memory` and returns the faults it took.
int64_t faultsOfWriting(void *memory, size_t bytes) {
  int64_t before = zest::pageFaults();
  std::memset(memory, 0x5a, bytes);
  return zest::pageFaults() - before;
}

/// Live allocations with known contents, and a freed 8 MiB chunk below one
/// of them of which only the first page was written.
std::vector<char *> fragment() {
  std::vector<char *> live;
  for (int i = 0; i < 8; ++i) {
    live.push_back(static_cast<char *>(std::malloc(kMiB)));
    std::memset(live.back(), i + 1, kMiB);
  }
  char *unwritten = static_cast<char *>(std::malloc(8 * kMiB));
  unwritten[0] = 1;
  live.push_back(static_cast<char *>(std::malloc(4096)));
  std::memset(live.back(), 9, 4096);
  std::free(unwritten);
  return live;
}

bool contentsKept(const std::vector<char *> &live) {
  for (size_t i = 0; i < live.size(); ++i) {
    size_t bytes = i + 1 < live.size() ? kMiB : 4096;
    for (size_t at = 0; at < bytes; at += 997)
      if (live[i][at] != char(i + 1))
        return false;
  }
  return true;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2 || (std::strcmp(argv[1], "control") != 0 &&
                    std::strcmp(argv[1], "prefault") != 0)) {
    std::fprintf(stderr, "usage: zest-heap-pages-test control|prefault\n");
    return 2;
  }
  zest::keepFreedMemory();
  std::vector<char *> live = fragment();
  if (std::strcmp(argv[1], "prefault") == 0)
    zest::HeapPrefaulter().afterStep();
  // The freed chunk's unwritten tail, then the top.
  void *reused = std::malloc(6 * kMiB);
  std::printf("free chunk: %lld page faults\n",
              static_cast<long long>(faultsOfWriting(reused, 6 * kMiB)));
  void *fromTop = std::malloc(24 * kMiB);
  std::printf("top: %lld page faults\n",
              static_cast<long long>(faultsOfWriting(fromTop, 24 * kMiB)));
  std::printf("live allocations %s\n",
              contentsKept(live) ? "unchanged" : "CHANGED");
  std::free(fromTop);
  std::free(reused);
  for (char *memory : live)
    std::free(memory);
  return 0;
}
