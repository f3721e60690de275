//===- DeviceMirrors.cpp - The driver's buffers on a device ---------------===//

#include "DeviceMirrors.h"

#include "zest_runtime.h"

using namespace zest;

DeviceMirrors::DeviceMirrors() : onDevice(zest_buffers_on_device() != 0) {}

DeviceMirrors::~DeviceMirrors() {
  for (auto &[host, mirror] : mirrors)
    zest_buffer_free(mirror.device);
  for (void *host : pinned)
    zest_unpin_host(host);
}

std::vector<int64_t> DeviceMirrors::pinnedDescriptorFor(Buffer &buffer) {
  if (buffer.data() && pinned.insert(buffer.data()).second)
    zest_pin_host(buffer.data(), buffer.spec.bytes());
  return buffer.descriptor;
}

std::vector<int64_t> DeviceMirrors::descriptorFor(Buffer &buffer,
                                                  bool persistent) {
  std::vector<int64_t> descriptor = buffer.descriptor;
  // Arguments the step does not touch have no storage and need none.
  if (!onDevice || !buffer.data())
    return descriptor;
  auto [it, inserted] = mirrors.try_emplace(buffer.data());
  if (inserted) {
    it->second = {zest_buffer_alloc(buffer.spec.bytes()), buffer.spec.bytes(),
                  persistent};
    if (persistent)
      zest_copy_to_device(it->second.device, buffer.data(),
                          buffer.spec.bytes());
  }
  int64_t address = reinterpret_cast<int64_t>(it->second.device);
  descriptor[0] = descriptor[1] = address;
  return descriptor;
}

const DeviceMirrors::Mirror *DeviceMirrors::find(Buffer &buffer) const {
  return onDevice && buffer.data() ? &mirrors.at(buffer.data()) : nullptr;
}

void DeviceMirrors::upload(Buffer &buffer) {
  if (const Mirror *mirror = find(buffer))
    zest_copy_to_device(mirror->device, buffer.data(), mirror->bytes);
}

void DeviceMirrors::download(Buffer &buffer) {
  if (const Mirror *mirror = find(buffer))
    zest_copy_to_host(buffer.data(), mirror->device, mirror->bytes);
}

void DeviceMirrors::downloadPersistent() {
  for (auto &[host, mirror] : mirrors)
    if (mirror.persistent)
      zest_copy_to_host(const_cast<void *>(host), mirror.device, mirror.bytes);
}
