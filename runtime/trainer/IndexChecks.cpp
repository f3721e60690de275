//===- IndexChecks.cpp - Data that indexes a table, checked ---------------===//

#include "IndexChecks.h"
#include "Options.h"

#include <algorithm>
#include <cstring>
#include <vector>

using namespace zest;

std::string zest::describeBadIndex(int64_t value, const IndexBound &bound) {
  std::string n = std::to_string(bound.bound);
  if (!bound.table.empty())
    return value < 0 ? "is negative: " + bound.table + " takes ids 0 to " +
                           std::to_string(bound.bound - 1)
                     : "is outside the vocabulary of " + bound.table + " (" +
                           n + " ids)";
  std::string text = "is outside [0, " + n + ")";
  if (bound.hasIgnore)
    text += " and is not the ignored value " + std::to_string(bound.ignore);
  return text;
}

int64_t zest::integerAt(const DType &dtype, const char *data, int64_t i) {
  if (dtype.code == ZEST_I32) {
    int32_t value;
    std::memcpy(&value, data + i * 4, 4);
    return value;
  }
  int64_t value;
  std::memcpy(&value, data + i * 8, 8);
  return value;
}

namespace {

/// Flat element `i` of a sample of `shape` (the batch dimension first, not
/// part of a sample) as "[a, b]".
std::string positionText(const std::vector<int64_t> &shape, int64_t i) {
  std::vector<int64_t> index(shape.size() > 1 ? shape.size() - 1 : 0);
  for (size_t d = index.size(); d-- > 0;) {
    index[d] = i % shape[d + 1];
    i /= shape[d + 1];
  }
  std::string text = "[";
  for (size_t d = 0; d < index.size(); ++d)
    text += (d ? ", " : "") + std::to_string(index[d]);
  return text + "]";
}

} // namespace

void zest::rankSlice(int64_t count, int64_t &begin, int64_t &end) {
  int64_t rank = zest_rank(), ranks = zest_world_size();
  begin = count * rank / ranks;
  end = count * (rank + 1) / ranks;
}

int64_t zest::smallestOverRanks(int64_t local) {
  std::vector<int64_t> all(static_cast<size_t>(zest_world_size()));
  zest_host_all_gather(&local, all.data(), 1, ZEST_I64);
  return *std::min_element(all.begin(), all.end());
}

void zest::checkIndexColumn(const SampleColumn &column, const TensorSpec &spec,
                            const IndexBound &bound, size_t argument) {
  if (bound.bound <= 0 ||
      (spec.dtype.code != ZEST_I32 && spec.dtype.code != ZEST_I64))
    return;
  std::vector<char> sample(size_t(column.sampleBytes));
  int64_t perSample = column.sampleBytes / spec.dtype.bytes;
  int64_t begin, end, none = column.count * perSample, first = none;
  rankSlice(column.count, begin, end);
  for (int64_t s = begin; s < end && first == none; ++s) {
    readSample(column, s, sample.data());
    for (int64_t i = 0; i < perSample && first == none; ++i)
      if (!bound.allows(integerAt(spec.dtype, sample.data(), i)))
        first = s * perSample + i;
  }
  first = smallestOverRanks(first);
  if (first == none)
    return;
  int64_t s = first / perSample, i = first % perSample;
  readSample(column, s, sample.data());
  int64_t value = integerAt(spec.dtype, sample.data(), i);
  dataError(column.path + ": sample " + std::to_string(s) + ", position " +
            positionText(spec.shape, i) + " of data argument " +
            std::to_string(argument) + ": " +
            (bound.table.empty() ? "index " : "id ") + std::to_string(value) +
            " " + describeBadIndex(value, bound));
}
