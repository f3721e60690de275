//===- IndexChecks.h - Data that indexes a table, checked -------*- C++ -*-===//
//
// A data argument the importer found indexing a table (an embedding's ids,
// a loss's targets: `index_bound` in the model descriptor) is checked
// before the first step, on every rank alike, so that bad data stops all
// of them with one line naming the file, the sample, the position, the
// value and the bound, instead of failing inside the step.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_TRAINER_INDEXCHECKS_H
#define ZEST_RUNTIME_TRAINER_INDEXCHECKS_H

#include "ModelDescriptor.h"
#include "SampleFiles.h"

#include <cstdint>
#include <string>

namespace zest {

/// What is wrong with `value` against `bound`, as a predicate ("is outside
/// the vocabulary of model.embed_tokens (64 ids)").
std::string describeBadIndex(int64_t value, const IndexBound &bound);

/// Element `i` of an integer buffer of `dtype`.
int64_t integerAt(const DType &dtype, const char *data, int64_t i);

/// The part [begin, end) of `count` items this rank checks: each rank
/// reads 1 / W of a file, so that a large one is checked W times faster.
void rankSlice(int64_t count, int64_t &begin, int64_t &end);

/// The smallest of every rank's `local` (a collective: every rank calls it).
int64_t smallestOverRanks(int64_t local);

/// Exits every rank (dataError) at the first value of `column` (data
/// argument `argument`, of `spec`) that `bound` does not allow; the ranks
/// share the reading.
void checkIndexColumn(const SampleColumn &column, const TensorSpec &spec,
                      const IndexBound &bound, size_t argument);

} // namespace zest

#endif // ZEST_RUNTIME_TRAINER_INDEXCHECKS_H
