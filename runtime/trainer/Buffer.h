//===- Buffer.h - Host buffers and memref descriptors -----------*- C++ -*-===//

#ifndef ZEST_RUNTIME_TRAINER_BUFFER_H
#define ZEST_RUNTIME_TRAINER_BUFFER_H

#include "ModelDescriptor.h"

#include <cstdint>
#include <vector>

namespace zest {

/// A host buffer and the memref descriptor compiled code receives:
/// {allocated, aligned, offset, sizes[rank], strides[rank]}. It owns its
/// bytes, or describes `external` storage the caller keeps alive (null for
/// an argument the compiled code does not touch, such as the gradient
/// accumulator without accumulation).
struct Buffer {
  TensorSpec spec;
  std::vector<char> bytes;
  char *storage;
  std::vector<int64_t> descriptor;

  explicit Buffer(const TensorSpec &spec)
      : Buffer(spec, std::vector<char>(size_t(spec.bytes()) + 64, 0)) {}
  Buffer(const TensorSpec &spec, void *external)
      : Buffer(spec, std::vector<char>()) {
    setStorage(static_cast<char *>(external));
  }

private:
  Buffer(const TensorSpec &spec, std::vector<char> owned)
      : spec(spec), bytes(std::move(owned)) {
    setStorage(bytes.data());
  }
  void setStorage(char *data) {
    storage = data;
    int64_t address = reinterpret_cast<int64_t>(storage);
    descriptor = {address, address, 0};
    for (int64_t dim : spec.shape)
      descriptor.push_back(dim);
    int64_t stride = 1;
    std::vector<int64_t> strides(spec.shape.size());
    for (int64_t i = int64_t(spec.shape.size()) - 1; i >= 0; --i) {
      strides[i] = stride;
      stride *= spec.shape[i];
    }
    descriptor.insert(descriptor.end(), strides.begin(), strides.end());
  }

public:
  float *f32() { return reinterpret_cast<float *>(storage); }
  void *data() { return storage; }
};

/// Reads element `i` of a float buffer as double.
inline double readFloat(Buffer &buffer, int64_t i) {
  if (buffer.spec.dtype.code == ZEST_F64)
    return reinterpret_cast<double *>(buffer.data())[i];
  return buffer.f32()[i];
}

} // namespace zest

#endif // ZEST_RUNTIME_TRAINER_BUFFER_H
