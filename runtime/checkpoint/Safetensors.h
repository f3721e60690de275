//===- Safetensors.h - Read and write safetensors files ---------*- C++ -*-===//
//
// The format Hugging Face and PyTorch users load: an 8-byte little-endian
// header length, a JSON header {"name": {"dtype", "shape", "data_offsets"},
// "__metadata__": {string: string}}, then the raw little-endian data.
// Writes are atomic (AtomicFile.h).
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_CHECKPOINT_SAFETENSORS_H
#define ZEST_RUNTIME_CHECKPOINT_SAFETENSORS_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace zest::safetensors {

struct Tensor {
  std::string dtype; // safetensors name
  std::vector<int64_t> shape;
  std::vector<char> data;
};

struct File {
  std::map<std::string, std::string> metadata;
  /// Tensors in the order they are written.
  std::vector<std::pair<std::string, Tensor>> tensors;

  const Tensor *find(const std::string &name) const;
};

/// An F32 tensor of `shape` holding a copy of the floats at `values`.
Tensor f32Tensor(std::vector<int64_t> shape, const float *values);

/// Bytes of one element of a safetensors dtype, or 0 if unknown.
int64_t dtypeBytes(const std::string &dtype);

/// A tensor as the header describes it: where its bytes lie in the file.
struct Entry {
  std::string dtype;
  std::vector<int64_t> shape;
  int64_t fileOffset = 0, bytes = 0;
};

struct Header {
  std::map<std::string, std::string> metadata;
  /// Tensors in the header's order.
  std::vector<std::pair<std::string, Entry>> tensors;
};

/// Reads and checks the header of `path` only (for readers that fetch
/// parts of tensors, as each rank does with its samples); on failure returns
/// false with a message naming the file and what is wrong.
bool readHeader(const std::string &path, Header &out, std::string &error);

/// Reads `path`; on failure returns false with a message naming the file
/// and what is wrong (missing, truncated, bad header, sizes that disagree).
bool read(const std::string &path, File &out, std::string &error);

/// Writes `file` to `path` atomically; false with a message on failure.
bool write(const std::string &path, const File &file, std::string &error);

} // namespace zest::safetensors

#endif // ZEST_RUNTIME_CHECKPOINT_SAFETENSORS_H
