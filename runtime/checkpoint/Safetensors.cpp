//===- Safetensors.cpp - Read and write safetensors files -----------------===//

#include "Safetensors.h"
#include "AtomicFile.h"
#include "Json.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

using namespace zest;
using namespace zest::safetensors;

const Tensor *File::find(const std::string &name) const {
  for (const auto &[key, tensor] : tensors)
    if (key == name)
      return &tensor;
  return nullptr;
}

Tensor safetensors::f32Tensor(std::vector<int64_t> shape, const float *values) {
  int64_t numel = 1;
  for (int64_t dim : shape)
    numel *= dim;
  const char *bytes = reinterpret_cast<const char *>(values);
  return {"F32", std::move(shape),
          std::vector<char>(bytes, bytes + numel * sizeof(float))};
}

int64_t safetensors::dtypeBytes(const std::string &dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64")
    return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32")
    return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16")
    return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL")
    return 1;
  return 0;
}

bool safetensors::readHeader(const std::string &path, Header &out,
                             std::string &error) {
  FILE *file = std::fopen(path.c_str(), "rb");
  if (!file) {
    error = "cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  auto fail = [&](const std::string &what) {
    if (file)
      std::fclose(file);
    error = "'" + path + "' is not a valid safetensors file: " + what;
    return false;
  };
  std::fseek(file, 0, SEEK_END);
  long size = std::ftell(file);
  std::fseek(file, 0, SEEK_SET);
  unsigned char lengthBytes[8];
  if (size < 8 || std::fread(lengthBytes, 1, 8, file) != 8)
    return fail("shorter than its 8-byte header length");
  uint64_t headerLength = 0;
  for (int i = 7; i >= 0; --i)
    headerLength = headerLength << 8 | lengthBytes[i];
  if (headerLength > uint64_t(size) - 8)
    return fail("header length " + std::to_string(headerLength) +
                " exceeds the file size " + std::to_string(size));
  std::string header(headerLength, '\0');
  if (std::fread(header.data(), 1, headerLength, file) != headerLength)
    return fail("truncated header");
  std::fclose(file);
  file = nullptr;
  json::Value root;
  std::string jsonError;
  if (!json::parse(header, root, jsonError) || root.kind != json::Value::Object)
    return fail("header is not a JSON object (" + jsonError + ")");
  int64_t dataBegin = 8 + int64_t(headerLength);
  uint64_t dataSize = uint64_t(size) - uint64_t(dataBegin);
  for (const auto &[name, entry] : root.object) {
    if (name == "__metadata__") {
      for (const auto &[key, value] : entry.object)
        out.metadata[key] = value.string;
      continue;
    }
    const json::Value *dtype = entry.find("dtype");
    const json::Value *shape = entry.find("shape");
    const json::Value *offsets = entry.find("data_offsets");
    if (!dtype || !shape || !offsets || offsets->array.size() != 2)
      return error = "'" + path + "': tensor '" + name +
                     "' lacks dtype, shape or data_offsets",
             false;
    Entry tensor;
    tensor.dtype = dtype->string;
    int64_t numel = 1;
    for (const json::Value &dim : shape->array) {
      tensor.shape.push_back(dim.asInt());
      numel *= dim.asInt();
    }
    int64_t begin = offsets->array[0].asInt(), end = offsets->array[1].asInt();
    int64_t bytes = dtypeBytes(tensor.dtype);
    if (bytes == 0 || begin < 0 || end < begin || uint64_t(end) > dataSize ||
        end - begin != numel * bytes)
      return error = "'" + path + "': tensor '" + name +
                     "' has inconsistent dtype, shape or data_offsets",
             false;
    tensor.fileOffset = dataBegin + begin;
    tensor.bytes = end - begin;
    out.tensors.emplace_back(name, std::move(tensor));
  }
  return true;
}

bool safetensors::read(const std::string &path, File &out, std::string &error) {
  Header header;
  if (!readHeader(path, header, error))
    return false;
  FILE *file = std::fopen(path.c_str(), "rb");
  if (!file) {
    error = "cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  out.metadata = header.metadata;
  for (auto &[name, entry] : header.tensors) {
    Tensor tensor{entry.dtype, entry.shape, std::vector<char>(entry.bytes)};
    if (std::fseek(file, long(entry.fileOffset), SEEK_SET) != 0 ||
        (entry.bytes && std::fread(tensor.data.data(), 1, size_t(entry.bytes),
                                   file) != size_t(entry.bytes))) {
      std::fclose(file);
      error = "'" + path + "' is not a valid safetensors file: truncated data";
      return false;
    }
    out.tensors.emplace_back(name, std::move(tensor));
  }
  std::fclose(file);
  return true;
}

bool safetensors::write(const std::string &path, const File &file,
                        std::string &error) {
  std::string header = "{";
  if (!file.metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto &[key, value] : file.metadata) {
      header +=
          (first ? "" : ",") + json::quote(key) + ":" + json::quote(value);
      first = false;
    }
    header += "}";
  }
  int64_t offset = 0;
  for (const auto &[name, tensor] : file.tensors) {
    if (header.size() > 1)
      header += ",";
    header += json::quote(name) + ":{\"dtype\":" + json::quote(tensor.dtype) +
              ",\"shape\":[";
    for (size_t i = 0; i < tensor.shape.size(); ++i)
      header += (i ? "," : "") + std::to_string(tensor.shape[i]);
    int64_t end = offset + int64_t(tensor.data.size());
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(end) + "]}";
    offset = end;
  }
  header += "}";
  // Pad the header with spaces to 8 bytes, as the reference writer does.
  while (header.size() % 8)
    header += ' ';

  unsigned char lengthBytes[8];
  uint64_t length = header.size();
  for (int i = 0; i < 8; ++i)
    lengthBytes[i] = (length >> (8 * i)) & 0xff;
  std::vector<Chunk> chunks = {{lengthBytes, 8},
                               {header.data(), header.size()}};
  for (const auto &[name, tensor] : file.tensors)
    chunks.push_back({tensor.data.data(), tensor.data.size()});
  return writeFileAtomically(path, chunks, error);
}
