//===- BlasCoreType.cpp - OpenBLAS kernels that match the CPU -------------===//
//
// OpenBLAS built with DYNAMIC_ARCH (Debian's) picks its kernels from the
// CPU's family and model when it loads. A CPU newer than the library (0.3.21
// does not know Sapphire or Emerald Rapids) falls back to its SSE3 kernels
// ("Prescott"), which run matrix products 3-5x slower than the AVX2 or
// AVX-512 kernels the CPU supports. The only public way to choose is the
// environment variable OPENBLAS_CORETYPE, read once at load time, so a
// program that finds the fallback re-executes itself with the variable set.
//
//===----------------------------------------------------------------------===//

#include "zest_runtime.h"

#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <strings.h>
#include <unistd.h>

/// OpenBLAS's own query; weak so that other BLAS libraries still link.
extern "C" __attribute__((weak)) char *openblas_get_corename(void);

namespace {

/// The OpenBLAS kernels this CPU's vector extensions call for; null for a
/// CPU without AVX2 and FMA, where OpenBLAS's choice stands.
const char *wantedCoreType() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
    return nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return "SkylakeX";
  return "Haswell";
}

/// Whether OpenBLAS's kernels `core` use AVX2 and FMA (the names
/// openblas_get_corename returns, compared without case).
bool usesAvx2(const char *core) {
  for (const char *fast : {"haswell", "skylakex", "cooperlake",
                           "sapphirerapids", "zen", "excavator"})
    if (strcasecmp(core, fast) == 0)
      return true;
  return false;
}

} // namespace

extern "C" const char *zest_blas_kernels(int *matchesCpu) {
  const char *core = openblas_get_corename ? openblas_get_corename() : nullptr;
  if (matchesCpu)
    *matchesCpu = !core || !wantedCoreType() || usesAvx2(core);
  return core;
}

extern "C" void zest_select_blas_kernels(char **argv) {
  if (std::getenv("OPENBLAS_CORETYPE"))
    return; // The user (or an earlier exec) chose.
  int matchesCpu = 1;
  zest_blas_kernels(&matchesCpu);
  if (matchesCpu)
    return;
  const char *wanted = wantedCoreType();
  setenv("OPENBLAS_CORETYPE", wanted, 1);
  execv("/proc/self/exe", argv);
  // The exec failed (no /proc): carry on with the slower kernels.
  unsetenv("OPENBLAS_CORETYPE");
}
