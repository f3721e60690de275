//===- DeviceMirrors.cpp - The driver's buffers on a device ---------------===//

#include "DeviceMirrors.h"

#include "zest_runtime.h"

#include <cstring>

using namespace zest;

DeviceMirrors::DeviceMirrors() : onDevice(zest_buffers_on_device() != 0) {}

DeviceMirrors::~DeviceMirrors() {
  for (auto &[host, mirror] : mirrors) {
    if (mirror.pinned)
      zest_pinned_free(mirror.device);
    else
      zest_buffer_free(mirror.device);
  }
  for (void *ptr : scratch)
    zest_pinned_free(ptr);
}

void *DeviceMirrors::pinnedScratch(int64_t bytes) {
  scratch.push_back(zest_pinned_alloc(bytes));
  return scratch.back();
}

std::vector<int64_t>
DeviceMirrors::mirrorDescriptor(Buffer &buffer, bool persistent, bool pinned) {
  std::vector<int64_t> descriptor = buffer.descriptor;
  // Arguments the step does not touch have no storage and need none.
  if (!onDevice || !buffer.data())
    return descriptor;
  auto [it, inserted] = mirrors.try_emplace(buffer.data());
  if (inserted) {
    int64_t bytes = buffer.spec.bytes();
    void *mirror = pinned ? zest_pinned_alloc(bytes) : zest_buffer_alloc(bytes);
    it->second = {mirror, bytes, persistent, pinned};
    if (persistent)
      upload(buffer);
  }
  int64_t address = reinterpret_cast<int64_t>(it->second.device);
  descriptor[0] = descriptor[1] = address;
  return descriptor;
}

std::vector<int64_t> DeviceMirrors::descriptorFor(Buffer &buffer,
                                                  bool persistent) {
  return mirrorDescriptor(buffer, persistent, /*pinned=*/false);
}

std::vector<int64_t> DeviceMirrors::pinnedDescriptorFor(Buffer &buffer,
                                                        bool persistent) {
  return mirrorDescriptor(buffer, persistent, /*pinned=*/true);
}

const DeviceMirrors::Mirror *DeviceMirrors::find(Buffer &buffer) const {
  return onDevice && buffer.data() ? &mirrors.at(buffer.data()) : nullptr;
}

void DeviceMirrors::upload(Buffer &buffer) {
  const Mirror *mirror = find(buffer);
  if (!mirror)
    return;
  if (mirror->pinned)
    std::memcpy(mirror->device, buffer.data(), mirror->bytes);
  else
    zest_copy_to_device(mirror->device, buffer.data(), mirror->bytes);
}

void DeviceMirrors::download(Buffer &buffer) {
  const Mirror *mirror = find(buffer);
  if (!mirror)
    return;
  if (mirror->pinned)
    std::memcpy(buffer.data(), mirror->device, mirror->bytes);
  else
    zest_copy_to_host(buffer.data(), mirror->device, mirror->bytes);
}

void DeviceMirrors::downloadPersistent() {
  for (auto &[host, mirror] : mirrors) {
    if (!mirror.persistent)
      continue;
    void *target = const_cast<void *>(host);
    if (mirror.pinned)
      std::memcpy(target, mirror.device, mirror.bytes);
    else
      zest_copy_to_host(target, mirror.device, mirror.bytes);
  }
}
