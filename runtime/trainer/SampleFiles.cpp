//===- SampleFiles.cpp - Samples read from files, per rank ----------------===//

#include "SampleFiles.h"

#include "../checkpoint/Checkpoint.h"
#include "../checkpoint/Safetensors.h"
#include "Options.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace zest;
using zest::checkpoint::shapeText;

std::shared_ptr<int> zest::openDataFile(const std::string &path,
                                        int64_t &size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    usageError("cannot open data file '" + path + "': " + std::strerror(errno));
  struct stat info;
  if (::fstat(fd, &info) != 0)
    usageError("cannot read data file '" + path + "'");
  size = int64_t(info.st_size);
  return std::shared_ptr<int>(new int(fd), [](int *f) {
    ::close(*f);
    delete f;
  });
}

namespace {

/// The safetensors dtype name of a NumPy `descr`, or "" if Zest has none.
std::string dtypeOfDescr(const std::string &descr) {
  static const std::pair<const char *, const char *> table[] = {
      {"<f4", "F32"},  {"<f8", "F64"}, {"<f2", "F16"}, {"<i8", "I64"},
      {"<i4", "I32"},  {"<i2", "I16"}, {"|i1", "I8"},  {"|u1", "U8"},
      {"|b1", "BOOL"}, {"<u2", "U16"}, {"<u4", "U32"}};
  for (auto [numpy, name] : table)
    if (descr == numpy)
      return name;
  return "";
}

} // namespace

/// Parses a .npy header: its dtype, shape and where the data starts.
void zest::readNpyHeader(const std::string &path, int fd, int64_t size,
                         std::string &dtype, std::vector<int64_t> &shape,
                         int64_t &dataOffset) {
  auto fail = [&](const std::string &what) {
    usageError("data file '" + path + "' is not a NumPy .npy file: " + what);
  };
  unsigned char prefix[12] = {};
  if (size < 10 || ::pread(fd, prefix, 12, 0) < 10 ||
      std::memcmp(prefix, "\x93NUMPY", 6) != 0)
    fail("no \\x93NUMPY magic");
  int64_t lengthBytes = prefix[6] == 1 ? 2 : 4;
  int64_t headerLength = 0;
  for (int64_t i = lengthBytes - 1; i >= 0; --i)
    headerLength = headerLength << 8 | prefix[8 + i];
  dataOffset = 8 + lengthBytes + headerLength;
  if (dataOffset > size)
    fail("truncated header");
  std::string header(size_t(headerLength), '\0');
  if (::pread(fd, header.data(), size_t(headerLength), 8 + lengthBytes) !=
      headerLength)
    fail("truncated header");
  auto valueOf = [&](const std::string &key) -> std::string {
    size_t at = header.find("'" + key + "'");
    if (at == std::string::npos)
      fail("its header has no '" + key + "'");
    size_t colon = header.find(':', at);
    size_t begin = header.find_first_not_of(' ', colon + 1);
    if (colon == std::string::npos || begin == std::string::npos)
      fail("malformed header");
    return header.substr(begin);
  };
  std::string descr = valueOf("descr");
  size_t close = descr.find('\'', 1);
  if (descr.empty() || descr[0] != '\'' || close == std::string::npos)
    fail("malformed 'descr'");
  descr = descr.substr(1, close - 1);
  dtype = dtypeOfDescr(descr);
  if (dtype.empty())
    usageError("data file '" + path + "' holds NumPy dtype '" + descr +
               "', which Zest does not read; save it little-endian as one "
               "of float32, float64, float16, int64, int32, int16, int8, "
               "uint32, uint16, uint8 or bool");
  if (valueOf("fortran_order").rfind("False", 0) != 0)
    usageError("data file '" + path +
               "' is in Fortran order; save it with "
               "numpy.ascontiguousarray");
  std::string tuple = valueOf("shape");
  size_t end = tuple.find(')');
  if (tuple.empty() || tuple[0] != '(' || end == std::string::npos)
    fail("malformed 'shape'");
  shape.clear();
  const char *cursor = tuple.c_str() + 1;
  while (cursor < tuple.c_str() + end) {
    char *next = nullptr;
    long long dim = std::strtoll(cursor, &next, 10);
    if (next == cursor)
      break;
    shape.push_back(dim);
    cursor = next;
    while (*cursor == ',' || *cursor == ' ')
      ++cursor;
  }
}

bool zest::endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

namespace {

int64_t perSampleBytes(const TensorSpec &spec) {
  return spec.bytes() / spec.shape[0];
}

/// The argument's per-sample shape: its shape without the micro-batch.
std::vector<int64_t> sampleShape(const TensorSpec &spec) {
  return {spec.shape.begin() + 1, spec.shape.end()};
}

/// Checks a file tensor of `dtype` and `shape` ([samples, ...]) against
/// data argument `index`; returns its sample count.
int64_t checkColumn(const std::string &where, const std::string &dtype,
                    const std::vector<int64_t> &shape, const TensorSpec &spec,
                    size_t index) {
  std::string argument = "data argument #" + std::to_string(index) + " (" +
                         spec.dtype.name + ", per sample " +
                         shapeText(sampleShape(spec)) + ")";
  if (dtype != spec.dtype.name)
    usageError(where + " holds " + dtype + " values but " + argument +
               " takes " + spec.dtype.name);
  if (shape.empty() ||
      std::vector<int64_t>(shape.begin() + 1, shape.end()) != sampleShape(spec))
    usageError(where + " has shape " + shapeText(shape) + "; " + argument +
               " needs [samples, " + shapeText(sampleShape(spec)).substr(1));
  if (shape[0] <= 0)
    usageError(where + " holds no samples");
  return shape[0];
}

std::vector<SampleColumn> openRaw(const std::string &path,
                                  const std::vector<TensorSpec> &specs) {
  int64_t size = 0;
  std::shared_ptr<int> fd = openDataFile(path, size);
  int64_t sampleBytes = 0;
  for (const TensorSpec &spec : specs)
    sampleBytes += perSampleBytes(spec);
  if (size == 0 || size % sampleBytes != 0)
    usageError("data file '" + path + "' has " + std::to_string(size) +
               " bytes, not a positive multiple of the " +
               std::to_string(sampleBytes) + "-byte sample");
  std::vector<SampleColumn> columns;
  int64_t offset = 0;
  for (const TensorSpec &spec : specs) {
    columns.push_back({fd, path, offset, sampleBytes, perSampleBytes(spec),
                       size / sampleBytes});
    offset += perSampleBytes(spec);
  }
  return columns;
}

std::vector<SampleColumn> openNpy(const std::string &spec,
                                  const std::vector<TensorSpec> &specs) {
  std::vector<std::string> paths;
  for (size_t begin = 0; begin <= spec.size();) {
    size_t comma = spec.find(',', begin);
    if (comma == std::string::npos)
      comma = spec.size();
    paths.push_back(spec.substr(begin, comma - begin));
    begin = comma + 1;
  }
  if (paths.size() != specs.size())
    usageError("--data names " + std::to_string(paths.size()) +
               " .npy file(s) but the entry point takes " +
               std::to_string(specs.size()) +
               " data argument(s); give one file per argument, in order, "
               "separated by commas");
  std::vector<SampleColumn> columns;
  for (size_t i = 0; i < paths.size(); ++i) {
    int64_t size = 0, dataOffset = 0;
    std::shared_ptr<int> fd = openDataFile(paths[i], size);
    std::string dtype;
    std::vector<int64_t> shape;
    readNpyHeader(paths[i], *fd, size, dtype, shape, dataOffset);
    std::string where = "data file '" + paths[i] + "'";
    int64_t count = checkColumn(where, dtype, shape, specs[i], i);
    int64_t bytes = perSampleBytes(specs[i]);
    if (dataOffset + count * bytes > size)
      usageError(where + " is truncated: its header promises " +
                 std::to_string(count) + " samples");
    columns.push_back({fd, paths[i], dataOffset, bytes, bytes, count});
  }
  return columns;
}

std::vector<SampleColumn>
openSafetensors(const std::string &path, const std::vector<TensorSpec> &specs) {
  safetensors::Header header;
  std::string error;
  if (!safetensors::readHeader(path, header, error))
    usageError(error);
  int64_t size = 0;
  std::shared_ptr<int> fd = openDataFile(path, size);
  std::vector<SampleColumn> columns;
  for (size_t i = 0; i < specs.size(); ++i) {
    const safetensors::Entry *entry = nullptr;
    std::string key = std::to_string(i);
    for (const auto &[name, tensor] : header.tensors)
      if (name == key || (specs.size() == 1 && header.tensors.size() == 1))
        entry = &tensor, key = name;
    if (!entry)
      usageError("data file '" + path + "' has no tensor '" + key +
                 "' for data argument #" + std::to_string(i) +
                 "; key its tensors by data argument position (\"0\", "
                 "\"1\", ...)");
    std::string where = "tensor '" + key + "' of data file '" + path + "'";
    int64_t count = checkColumn(where, entry->dtype, entry->shape, specs[i], i);
    int64_t bytes = perSampleBytes(specs[i]);
    columns.push_back({fd, path, entry->fileOffset, bytes, bytes, count});
  }
  return columns;
}

} // namespace

std::vector<SampleColumn>
zest::openSampleFiles(const std::string &spec,
                      const std::vector<TensorSpec> &specs) {
  std::vector<SampleColumn> columns =
      endsWith(spec, ".npy")           ? openNpy(spec, specs)
      : endsWith(spec, ".safetensors") ? openSafetensors(spec, specs)
                                       : openRaw(spec, specs);
  for (const SampleColumn &column : columns)
    if (column.count != columns.front().count)
      usageError("data files disagree on the number of samples: '" +
                 columns.front().path + "' has " +
                 std::to_string(columns.front().count) + ", '" + column.path +
                 "' has " + std::to_string(column.count));
  return columns;
}

void zest::readSample(const SampleColumn &column, int64_t sample, char *out) {
  int64_t offset = column.base + (sample % column.count) * column.stride;
  int64_t done = 0;
  while (done < column.sampleBytes) {
    ssize_t got = ::pread(*column.fd, out + done,
                          size_t(column.sampleBytes - done), offset + done);
    if (got <= 0)
      usageError("cannot read sample " + std::to_string(sample) + " of '" +
                 column.path +
                 "': " + (got == 0 ? "file shrank" : std::strerror(errno)));
    done += got;
  }
}
