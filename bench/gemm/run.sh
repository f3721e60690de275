#!/usr/bin/env bash
# sgemm GFLOP/s of the BLAS libraries on a transformer step's shapes (GPT-2
# 124M, 128 tokens: each linear layer's forward, input and weight gradient,
# the tied head, attention's per-head products), side by side in one
# process, one thread each, against this core's measured FMA peak:
# OpenBLAS and oneDNN (Zest's candidates, Debian), BLIS (Debian, if
# installed: libblis4-serial) and MKL (from the package index: its wheel is
# downloaded once into the build directory, 220 MB).
#   bench/gemm/run.sh [build-dir] [--no-mkl]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${1:-build}
OUT="$BUILD_DIR/bench/gemm"
mkdir -p "$OUT"
source bench/common.sh
LIB=/usr/lib/x86_64-linux-gnu
libs=(openblas=$LIB/openblas-pthread/libopenblas.so.0
  onednn=$LIB/libdnnl.so.2:dnnl_sgemm)
[ -e $LIB/blis-serial/libblis.so.4 ] && libs+=(blis=$LIB/blis-serial/libblis.so.4)
if [ "${2:-}" != "--no-mkl" ]; then
  scripts/setup-venv.sh >/dev/null
  MKL="$OUT/mkl/mkl-2026.2.0.data/data/lib"
  if [ ! -e "$MKL/libmkl_rt.so.3" ]; then
    .venv/bin/pip download -q mkl==2026.2.0 --no-deps -d "$OUT/wheel"
    .venv/bin/python -m zipfile -e "$OUT"/wheel/mkl-2026.2.0-*.whl "$OUT/mkl"
  fi
  libs+=(mkl="$MKL/libmkl_rt.so.3")
  export LD_LIBRARY_PATH="$MKL" MKL_THREADING_LAYER=SEQUENTIAL
fi
# One core's fp32 peak: 12 independent chains of 512-bit FMAs (or 256-bit
# where the CPU lacks AVX-512).
cat >"$OUT/peak.c" <<'C'
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
#ifdef __AVX512F__
typedef __m512 V;
#define FMA _mm512_fmadd_ps
#define SET _mm512_set1_ps
#define LANES 16
#else
typedef __m256 V;
#define FMA _mm256_fmadd_ps
#define SET _mm256_set1_ps
#define LANES 8
#endif
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(void) {
  V a[12], x = SET(1.0000001f), y = SET(0.9999999f);
  for (int i = 0; i < 12; i++) a[i] = SET((float)i);
  double best = 0;
  for (int r = 0; r < 5; r++) {
    long n = 20000000;
    double t = now();
    for (long i = 0; i < n; i++) {
#pragma GCC unroll 12
      for (int j = 0; j < 12; j++) a[j] = FMA(a[j], x, y);
    }
    t = now() - t;
    if (n * 12.0 * 2 * LANES / t / 1e9 > best) best = n * 12.0 * 2 * LANES / t / 1e9;
  }
  float s = 0;
  float *p = (float *)a;
  for (int i = 0; i < 12 * LANES; i++) s += p[i];
  printf("%.1f %g\n", best, s);
  return 0;
}
C
cc -O2 -march=native -o "$OUT/peak" "$OUT/peak.c"
peak=$("$OUT/peak" | cut -d' ' -f1)
echo "one core's fp32 FMA peak: $peak GFLOP/s"
"$BUILD_DIR/bin/zest-bench-gemm" --peak-gflops="$peak" "${libs[@]}"
