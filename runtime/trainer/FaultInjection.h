//===- FaultInjection.h - Faults the failure tests inject -------*- C++ -*-===//
//
// ZEST_TEST_FAULT=<rank>:<step>:<kind> makes that rank fail at that step:
// `exit` dies before the step, `hang` stalls there, `save` dies in the
// middle of the checkpoint taken after it (its own file written, the others
// and `latest` not). docs/Runtime.md; test/E2E/failures.test and
// checkpoint-rotation.test.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_TRAINER_FAULTINJECTION_H
#define ZEST_RUNTIME_TRAINER_FAULTINJECTION_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace zest {

struct Fault {
  int rank = -1;
  int64_t step = -1;
  std::string kind;

  /// Whether `kind` strikes `rank` at 1-based `step`.
  bool strikes(int atRank, int64_t atStep, const char *atKind) const {
    return atRank == rank && atStep == step && kind == atKind;
  }
};

inline Fault readFault() {
  Fault fault;
  if (const char *text = std::getenv("ZEST_TEST_FAULT")) {
    char kind[16] = "";
    long long step = -1;
    if (std::sscanf(text, "%d:%lld:%15s", &fault.rank, &step, kind) == 3)
      fault.step = step, fault.kind = kind;
  }
  return fault;
}

} // namespace zest

#endif // ZEST_RUNTIME_TRAINER_FAULTINJECTION_H
