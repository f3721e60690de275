//===- SampleFiles.h - Samples read from files, per rank --------*- C++ -*-===//
//
// `--data` files in three formats (docs/Runtime.md):
//   - raw: every sample's data arguments back to back, row-major;
//   - NumPy `.npy`: one file per data argument (comma-separated, in
//     argument order), shaped [samples, ...the argument's per-sample shape];
//   - safetensors: one tensor per data argument, keyed by its position
//     among the data arguments ("0", "1", ...; any key if there is one).
// A rank reads only the samples it trains on (pread at their offsets), not
// the whole file.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_TRAINER_SAMPLEFILES_H
#define ZEST_RUNTIME_TRAINER_SAMPLEFILES_H

#include "ModelDescriptor.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zest {

/// One data argument's samples in a file: sample s (modulo `count`) is the
/// `sampleBytes` bytes at `base + s * stride`.
struct SampleColumn {
  std::shared_ptr<int> fd; // closed with the last column reading it
  std::string path;
  int64_t base = 0, stride = 0, sampleBytes = 0, count = 0;
};

/// Opens `spec` (the --data value) for data arguments of `specs` (shapes
/// with the micro-batch first); exits with a usage error that names the
/// file and what disagrees.
std::vector<SampleColumn> openSampleFiles(const std::string &spec,
                                          const std::vector<TensorSpec> &specs);

/// Whether `text` ends with `suffix` (a data file's kind by its name).
bool endsWith(const std::string &text, const std::string &suffix);

/// Opens data file `path` read-only and sets `size` to its bytes; exits
/// with a usage error naming the file if it cannot.
std::shared_ptr<int> openDataFile(const std::string &path, int64_t &size);

/// Parses the header of .npy file `path` (open as `fd`, `size` bytes): its
/// dtype as a safetensors name (U16 and U32 too), shape and where its data
/// starts; exits with a usage error naming the file if it is not one.
void readNpyHeader(const std::string &path, int fd, int64_t size,
                   std::string &dtype, std::vector<int64_t> &shape,
                   int64_t &dataOffset);

/// Reads sample `sample` (modulo the count) of `column` into `out`.
void readSample(const SampleColumn &column, int64_t sample, char *out);

} // namespace zest

#endif // ZEST_RUNTIME_TRAINER_SAMPLEFILES_H
