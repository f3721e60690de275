//===- TokenStream.cpp - Training windows cut from a token stream ---------===//

#include "TokenStream.h"
#include "IndexChecks.h"

#include "../checkpoint/Checkpoint.h"
#include "Data.h"
#include "Options.h"
#include "SampleFiles.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <sys/mman.h>
#include <unistd.h>

using namespace zest;

namespace {

/// A bijection of [0, n) chosen by `key`: a 4-round Feistel network over
/// the next even power of two, walked until it lands below n.
uint64_t permute(uint64_t index, uint64_t n, uint64_t key) {
  unsigned bits = 2;
  while (bits < 62 && (uint64_t(1) << bits) < n)
    bits += 2;
  unsigned half = bits / 2;
  uint64_t mask = (uint64_t(1) << half) - 1;
  do {
    uint64_t left = index >> half, right = index & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      uint64_t next = left ^ (mix(right ^ mix(key + round)) & mask);
      left = right;
      right = next;
    }
    index = left << half | right;
  } while (index >= n);
  return index;
}

/// The stream's element type from a .npy dtype: bytes and signedness.
void elementOf(const std::string &path, const std::string &dtype,
               int64_t &bytes, bool &isSigned) {
  static const struct {
    const char *name;
    int64_t bytes;
    bool isSigned;
  } table[] = {
      {"U16", 2, false}, {"U32", 4, false}, {"I32", 4, true}, {"I64", 8, true}};
  for (const auto &entry : table)
    if (dtype == entry.name) {
      bytes = entry.bytes;
      isSigned = entry.isSigned;
      return;
    }
  dataError(path +
            ": a token stream holds uint16, uint32, int32 or int64 "
            "ids, not " +
            dtype);
}

} // namespace

TokenStream::TokenStream(const std::string &path,
                         const std::vector<TensorSpec> &specs,
                         const IndexBound &bound, uint64_t seed)
    : path(path), specs(specs), seed(seed) {
  if (specs.empty() || specs.size() > 2)
    usageError("--tokens feeds a batch of token ids [batch, T] (and its "
               "targets [batch, T]); this entry point takes " +
               std::to_string(specs.size()) + " data arguments");
  for (const TensorSpec &spec : specs) {
    bool integer = spec.dtype.code == ZEST_I64 || spec.dtype.code == ZEST_I32;
    if (!integer || spec.shape.size() != 2 ||
        spec.shape[1] != specs[0].shape[1])
      usageError("--tokens feeds token ids [batch, T] of int64 or int32; "
                 "this entry point's data arguments are " +
                 checkpoint::shapeText(spec.shape) + " " + spec.dtype.name);
  }
  length = specs[0].shape[1];
  int64_t size = 0;
  std::shared_ptr<int> fd = openDataFile(path, size);
  if (endsWith(path, ".npy")) {
    std::string dtype;
    std::vector<int64_t> shape;
    readNpyHeader(path, *fd, size, dtype, shape, dataOffset);
    if (shape.size() != 1)
      dataError(path + ": a token stream is 1-D, not of shape " +
                checkpoint::shapeText(shape));
    elementOf(path, dtype, tokenBytes, isSigned);
    count = shape[0];
    if (dataOffset + count * tokenBytes > size)
      dataError(path + ": the file ends before its " + std::to_string(count) +
                " tokens");
  } else {
    if (size % 2 != 0)
      dataError(path + ": " + std::to_string(size) +
                " bytes: not a raw stream of uint16 tokens (nanoGPT's "
                ".bin); a .npy file may hold other types");
    count = size / 2;
  }
  int64_t needed = length + (specs.size() == 2 ? 1 : 0);
  if (count < needed)
    dataError(path + " holds " + std::to_string(count) +
              " tokens, fewer than one window of " + std::to_string(needed));
  windows = (count - needed) / length + 1;
  mappedBytes = size;
  void *at = ::mmap(nullptr, size_t(size), PROT_READ, MAP_SHARED, *fd, 0);
  if (at == MAP_FAILED)
    dataError(path + ": cannot map the token stream: " + std::strerror(errno));
  mapped = static_cast<const unsigned char *>(at);
  checkTokens(bound);
}

TokenStream::~TokenStream() {
  if (mapped)
    ::munmap(const_cast<unsigned char *>(mapped), size_t(mappedBytes));
}

int64_t TokenStream::token(int64_t index) const {
  const unsigned char *at = mapped + dataOffset + index * tokenBytes;
  switch (tokenBytes) {
  case 2: {
    uint16_t value;
    std::memcpy(&value, at, 2);
    return value;
  }
  case 4: {
    uint32_t value;
    std::memcpy(&value, at, 4);
    return isSigned ? int64_t(int32_t(value)) : int64_t(value);
  }
  default: {
    int64_t value;
    std::memcpy(&value, at, 8);
    return value;
  }
  }
}

void TokenStream::releaseScanned(int64_t first, int64_t end) const {
  // Whole pages inside the tokens' bytes: the pages drop out of this
  // process's memory (the page cache may keep them), so that the check of
  // a corpus larger than memory does not show as its resident size.
  const int64_t page = ::sysconf(_SC_PAGESIZE);
  int64_t from = (dataOffset + first * tokenBytes + page - 1) / page * page,
          to = (dataOffset + end * tokenBytes) / page * page;
  if (to > from)
    ::madvise(const_cast<unsigned char *>(mapped) + from, size_t(to - from),
              MADV_DONTNEED);
}

void TokenStream::checkTokens(const IndexBound &bound) const {
  bool narrow = false;
  for (const TensorSpec &spec : specs)
    narrow |= spec.dtype.code == ZEST_I32;
  int64_t limit = bound.bound > 0 ? bound.bound
                  : narrow ? int64_t(std::numeric_limits<int32_t>::max()) + 1
                           : std::numeric_limits<int64_t>::max();
  // uint16 ids (the common case) need no look when the bound exceeds them.
  if (tokenBytes == 2 && limit > 0xffff)
    return;
  // Each rank reads 1 / W of the stream; all agree on the first bad id.
  int64_t begin, end, first = count;
  rankSlice(count, begin, end);
  for (int64_t chunk = begin; chunk < end && first == count;
       chunk += kScanChunk) {
    int64_t stop = std::min(end, chunk + kScanChunk);
    for (int64_t i = chunk; i < stop && first == count; ++i) {
      int64_t value = token(i);
      if (value < 0 || value >= limit)
        first = i;
    }
    releaseScanned(chunk, stop);
  }
  first = smallestOverRanks(first);
  if (first == count)
    return;
  int64_t value = token(first);
  std::string what = !bound.table.empty() ? describeBadIndex(value, bound)
                     : value < 0          ? "is negative"
                     : bound.bound > 0    ? "is outside the vocabulary (" +
                                             std::to_string(bound.bound) +
                                             " ids, --token-bound)"
                                       : "does not fit the model's int32 ids";
  dataError(path + ": token " + std::to_string(value) + " at offset " +
            std::to_string(first) + " " + what);
}

int64_t TokenStream::windowStart(int64_t sample) const {
  uint64_t pass = uint64_t(sample) / uint64_t(windows);
  uint64_t index = uint64_t(sample) % uint64_t(windows);
  uint64_t key = mix(mix(seed ^ 0x70c3e5ull) + pass);
  return int64_t(permute(index, uint64_t(windows), key)) * length;
}

void TokenStream::read(int64_t sample, size_t column, char *out) const {
  int64_t start = windowStart(sample) + int64_t(column);
  bool wide = specs[column].dtype.code == ZEST_I64;
  for (int64_t t = 0; t < length; ++t) {
    int64_t value = token(start + t);
    if (wide)
      std::memcpy(out + t * 8, &value, 8);
    else {
      int32_t narrow = int32_t(value);
      std::memcpy(out + t * 4, &narrow, 4);
    }
  }
}
