//===- DeviceMirrors.h - The driver's buffers on a device -------*- C++ -*-===//
//
// An executable compiled with --target=cuda computes on device memory, while
// the driver initializes, loads, fills and saves host buffers. Each host
// buffer the step reads gets a device mirror: persistent ones (parameter
// shards, optimizer state, accumulators) are uploaded once and downloaded
// before a checkpoint is written; per-call ones (data, hyperparameters,
// random streams) are uploaded before each call; results are downloaded
// after it. On the CPU backend nothing is mirrored. Offloaded arguments
// (zestc --offload) stay in host memory, pinned.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_TRAINER_DEVICEMIRRORS_H
#define ZEST_RUNTIME_TRAINER_DEVICEMIRRORS_H

#include "Buffer.h"

#include <map>
#include <set>
#include <vector>

namespace zest {

class DeviceMirrors {
public:
  DeviceMirrors();
  /// Frees the mirrors (before zest_finalize).
  ~DeviceMirrors();
  DeviceMirrors(const DeviceMirrors &) = delete;
  DeviceMirrors &operator=(const DeviceMirrors &) = delete;

  /// The memref descriptor of `buffer`'s device mirror (`buffer`'s own
  /// descriptor when nothing is mirrored). A persistent buffer's mirror is
  /// shared by every entry point that takes it and uploaded once.
  std::vector<int64_t> descriptorFor(Buffer &buffer, bool persistent);
  /// `buffer`'s own descriptor, its memory pinned (once) for the step's
  /// asynchronous copies: an offloaded argument the step reads and writes
  /// in host memory.
  std::vector<int64_t> pinnedDescriptorFor(Buffer &buffer);
  /// Copies `buffer` to its mirror, or its mirror back to it.
  void upload(Buffer &buffer);
  void download(Buffer &buffer);
  /// Brings every persistent buffer's device values back to the host.
  void downloadPersistent();

private:
  struct Mirror {
    void *device;
    int64_t bytes;
    bool persistent;
  };
  /// `buffer`'s mirror; null when nothing is mirrored.
  const Mirror *find(Buffer &buffer) const;

  /// Whether the step's buffers live on a device (zest_buffers_on_device).
  bool onDevice;
  /// By host address: entry points that share a host buffer share its
  /// mirror.
  std::map<const void *, Mirror> mirrors;
  /// Host buffers pinned for offload, unpinned with the mirrors.
  std::set<void *> pinned;
};

} // namespace zest

#endif // ZEST_RUNTIME_TRAINER_DEVICEMIRRORS_H
