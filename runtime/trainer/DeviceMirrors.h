//===- DeviceMirrors.h - The driver's buffers on a device -------*- C++ -*-===//
//
// An executable compiled with --target=cuda computes on device memory, while
// the driver initializes, loads, fills and saves host buffers. Each host
// buffer the step reads gets a device mirror: persistent ones (parameter
// shards, optimizer state, accumulators) are uploaded once and downloaded
// before a checkpoint is written; per-call ones (data, hyperparameters,
// random streams) are uploaded before each call; results are downloaded
// after it. On the CPU backend nothing is mirrored. Offloaded arguments
// (zestc --offload) are mirrored in pinned host memory instead.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_TRAINER_DEVICEMIRRORS_H
#define ZEST_RUNTIME_TRAINER_DEVICEMIRRORS_H

#include "Buffer.h"

#include <map>
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
  /// The same with the mirror in pinned host memory (an offloaded argument,
  /// which the step reads and writes on the host with asynchronous copies
  /// to and from the device): uploaded and downloaded by plain copies.
  std::vector<int64_t> pinnedDescriptorFor(Buffer &buffer, bool persistent);
  /// Pinned host memory of `bytes` that only the step uses (an offload
  /// stage, which receives copies from the device), freed with the mirrors.
  void *pinnedScratch(int64_t bytes);
  /// Copies `buffer` to its mirror, or its mirror back to it.
  void upload(Buffer &buffer);
  void download(Buffer &buffer);
  /// Brings every persistent buffer's device values back to the host.
  void downloadPersistent();
  /// Whether the step computes on a device (its buffers are mirrored).
  bool computesOnDevice() const { return onDevice; }

private:
  struct Mirror {
    void *device; // or pinned host memory
    int64_t bytes;
    bool persistent;
    bool pinned;
  };
  std::vector<int64_t> mirrorDescriptor(Buffer &buffer, bool persistent,
                                        bool pinned);
  /// `buffer`'s mirror; null when nothing is mirrored.
  const Mirror *find(Buffer &buffer) const;

  /// Whether the step's buffers live on a device (zest_buffers_on_device).
  bool onDevice;
  /// By host address: entry points that share a host buffer share its
  /// mirror.
  std::map<const void *, Mirror> mirrors;
  std::vector<void *> scratch;
};

} // namespace zest

#endif // ZEST_RUNTIME_TRAINER_DEVICEMIRRORS_H
