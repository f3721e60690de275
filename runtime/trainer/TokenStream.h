//===- TokenStream.h - Training windows cut from a token stream -*- C++ -*-===//
//
// `--tokens FILE` (docs/Runtime.md): a language-model corpus as one stream
// of token ids, raw little-endian uint16 (nanoGPT's and llm.c's `.bin`) or
// a 1-D `.npy` of uint16, uint32, int32 or int64, memory-mapped (a corpus
// larger than memory works). Sample s is a window of T consecutive tokens
// (T: the data arguments' sequence length): ids = w[0:T] and, for a batch
// (ids, targets), targets = w[1:T+1]. The stream is cut into windows
// starting at multiples of T; sample s takes the window a seeded
// permutation of them assigns to s modulo their number, with a new
// permutation each pass. Samples are numbered across the global batch, so
// the ranks of a step read disjoint windows, and a resumed run reads what
// the uninterrupted one would have.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_TRAINER_TOKENSTREAM_H
#define ZEST_RUNTIME_TRAINER_TOKENSTREAM_H

#include "ModelDescriptor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zest {

class TokenStream {
public:
  /// Opens `path` for data arguments `specs` ([batch, T] integers: the ids,
  /// and optionally the targets); every token must be one `bound` allows
  /// (when it has one: the model's vocabulary). Every rank reads the same
  /// file and finds the same problems, so a bad token or file exits all of
  /// them with one message.
  TokenStream(const std::string &path, const std::vector<TensorSpec> &specs,
              const IndexBound &bound, uint64_t seed);
  ~TokenStream();
  TokenStream(const TokenStream &) = delete;
  TokenStream &operator=(const TokenStream &) = delete;

  /// Writes sample `sample`'s row of data argument `column` (0: ids, 1:
  /// targets) into `out`, in that argument's integer type.
  void read(int64_t sample, size_t column, char *out) const;

private:
  /// Token `index` of the stream.
  int64_t token(int64_t index) const;
  /// The first token of sample `sample`'s window.
  int64_t windowStart(int64_t sample) const;
  /// Exits every rank if a token is negative or not below the bound.
  void checkTokens(const IndexBound &bound) const;
  /// Releases the mapped pages of tokens [first, end) once checked.
  void releaseScanned(int64_t first, int64_t end) const;
  /// Tokens checked between releases (64 MiB of uint32).
  static constexpr int64_t kScanChunk = int64_t(1) << 24;

  std::string path;
  std::vector<TensorSpec> specs;
  uint64_t seed;
  const unsigned char *mapped = nullptr;
  int64_t mappedBytes = 0, dataOffset = 0, count = 0, tokenBytes = 2;
  bool isSigned = false;
  int64_t length = 0, windows = 0;
};

} // namespace zest

#endif // ZEST_RUNTIME_TRAINER_TOKENSTREAM_H
