//===- HeapPages.h - The heap: kept and mapped ahead ------------*- C++ -*-===//
//
// A steady-state step should fault no page. The runtime's pool places the
// step's buffers in one arena, but MPI and oneDNN allocate with malloc
// every step (libnbc's temporaries, oneDNN's packing buffers per product),
// so the executable tells glibc to keep what is freed, and maps the heap's
// pages before a later step first writes them.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_TRAINER_HEAPPAGES_H
#define ZEST_RUNTIME_TRAINER_HEAPPAGES_H

#include <cstdint>

namespace zest {

/// Keeps memory the program frees for its next use instead of returning it
/// to the OS, and grows the heap with room to spare. The executable owns
/// its process, so it may set this; a host loading the shared library keeps
/// its own policy.
void keepFreedMemory();

/// Page faults of this process so far (minor: a page mapped on first touch,
/// as after memory went back to the OS; major: read from disk).
int64_t pageFaults();

/// Maps every page of the heap that no one has written yet, after a step
/// has grown the heap (the first, or a later one).
class HeapPrefaulter {
public:
  void afterStep();

private:
  /// The end of what is mapped already (0: nothing yet).
  uintptr_t mappedEnd = 0;
};

} // namespace zest

#endif // ZEST_RUNTIME_TRAINER_HEAPPAGES_H
