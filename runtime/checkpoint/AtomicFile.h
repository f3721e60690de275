//===- AtomicFile.h - Crash-safe file writes ---------------------*- C++
//-*-===//
//
// Checkpoint files are replaced, never rewritten in place: the contents go to
// a temporary file in the same folder, are fsynced, and the temporary is
// renamed over the target, so a crash leaves either the old or the new file.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_CHECKPOINT_ATOMICFILE_H
#define ZEST_RUNTIME_CHECKPOINT_ATOMICFILE_H

#include <cstddef>
#include <string>
#include <vector>

namespace zest {

/// A piece of a file's contents, written in order.
struct Chunk {
  const void *data;
  size_t size;
};

/// Writes `chunks` to `path` atomically; false with a message on failure.
bool writeFileAtomically(const std::string &path,
                         const std::vector<Chunk> &chunks, std::string &error);

/// Makes the entries of `path`'s folder durable (renames into or out of it);
/// false with a message on failure.
bool syncParentFolder(const std::string &path, std::string &error);

} // namespace zest

#endif // ZEST_RUNTIME_CHECKPOINT_ATOMICFILE_H
