//===- ReferenceCheck.h - Kernel results against a reference ----*- C++ -*-===//
//
// What the fused-kernel tests share: results compared with a
// double-precision reference within a tolerance relative to the
// reference's largest finite magnitude (at least 1, the inputs' scale: a
// result that is exactly 0 is computed as a rounding of 0), non-finite
// values (+inf log-sum-exps, NaN means) required exactly; counted cases and
// failures, each failure printed.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_TESTS_REFERENCECHECK_H
#define ZEST_RUNTIME_TESTS_REFERENCECHECK_H

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

struct ReferenceCheck {
  int cases = 0, failures = 0;

  void compare(const char *what, const std::vector<double> &got,
               const std::vector<double> &want, double tolerance,
               const std::string &name) {
    ++cases;
    double scale = 1, worst = 0;
    for (double x : want)
      if (std::isfinite(x))
        scale = std::max(scale, std::fabs(x));
    for (size_t i = 0; i < want.size(); ++i) {
      if (!std::isfinite(want[i]) || !std::isfinite(got[i])) {
        bool same =
            std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i];
        if (!same)
          worst = INFINITY;
        continue;
      }
      worst = std::max(worst, std::fabs(got[i] - want[i]));
    }
    if (!(worst <= tolerance * scale)) {
      ++failures;
      std::printf("FAIL %s %s: max difference %g (allowed %g)\n", what,
                  name.c_str(), worst, tolerance * scale);
      std::fflush(stdout); // kept if a later error aborts the process
    }
  }

  /// A case that holds when `ok` (a property rather than values).
  void expect(bool ok, const char *what, const std::string &name) {
    ++cases;
    if (ok)
      return;
    ++failures;
    std::printf("FAIL %s %s\n", what, name.c_str());
    std::fflush(stdout);
  }

  /// Prints "<what>: N cases, M failures"; the exit status.
  int report(const char *what) const {
    std::printf("%s: %d cases, %d failures\n", what, cases, failures);
    return failures == 0 ? 0 : 1;
  }
};

#endif // ZEST_RUNTIME_TESTS_REFERENCECHECK_H
