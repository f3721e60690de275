#!/usr/bin/env bash
# run.sh of a Zest GPU bundle (scripts/gpu-bundle.sh): runs the GPU tests
# and benchmarks on this host and prints a table of PASS/FAIL and figures.
#
#   run.sh              on this host's GPU (CUDA, cuBLASLt and NCCL found in
#                       LD_LIBRARY_PATH, /usr/local/cuda, the system's
#                       library folders or any python3's nvidia-* wheels)
#   run.sh --emulated   the same tests on the emulated device (no GPU)
#
# Logs go to ./zest-gpu-logs (or $ZEST_GPU_LOGS). Exits non-zero if any
# test fails.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
EMULATED=0
[ "${1:-}" = --emulated ] && EMULATED=1
LOGS=${ZEST_GPU_LOGS:-$PWD/zest-gpu-logs}
mkdir -p "$LOGS"

export OPAL_PREFIX=$HERE/openmpi
export PATH=$HERE/openmpi/bin:$PATH
export LD_LIBRARY_PATH=$HERE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN="timeout 600 mpirun --oversubscribe -np"

# The folder holding $1 (a soname), from the usual places and the nvidia-*
# wheels of every python3 site-packages.
find_library() {
  local dirs=() dir
  IFS=: read -r -a dirs <<<"${LD_LIBRARY_PATH:-}"
  dirs+=(/usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu
    /usr/lib64 /usr/lib)
  if command -v python3 >/dev/null; then
    while read -r site; do
      dirs+=("$site"/nvidia/*/lib)
    done < <(python3 -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null)
  fi
  for dir in "${dirs[@]}"; do
    if [ -e "$dir/$1" ]; then
      echo "$dir"
      return 0
    fi
  done
  return 1
}

GPUS=0
SUFFIX=-emulated
if [ $EMULATED = 0 ]; then
  SUFFIX=
  for lib in libcudart.so.13 libcublasLt.so.13 libnccl.so.2; do
    if ! dir=$(find_library $lib); then
      echo "run.sh: $lib not found (LD_LIBRARY_PATH, /usr/local/cuda," \
        "system folders, python3 nvidia-* wheels)" >&2
      exit 1
    fi
    echo "run.sh: $lib in $dir"
    export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$dir
  done
  GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  nvidia-smi -L 2>/dev/null
  echo "run.sh: $GPUS GPU(s)"
else
  echo "run.sh: on the emulated device (results are not GPU results)"
fi

RESULTS=()
record() { RESULTS+=("$(printf '%-34s %-5s %s' "$1" "$2" "$3")"); }

# check NAME PATTERN COMMAND...: PASS if COMMAND succeeds and its output
# matches PATTERN.
check() {
  local name=$1 pattern=$2
  shift 2
  if "$@" >"$LOGS/$name.log" 2>&1 && grep -q -- "$pattern" "$LOGS/$name.log"; then
    record "$name" PASS "$(grep -- "$pattern" "$LOGS/$name.log" | tail -1)"
  else
    record "$name" FAIL "see $LOGS/$name.log"
  fi
}

# The CUDA backends and products (the runtime's device tests).
check backend-nccl-1 " 0 failed" env ZEST_BACKEND=nccl $MPIRUN 1 \
  "$HERE/bin/zest-cuda-backend-test$SUFFIX"
check backend-staged-2 " 0 failed" env ZEST_BACKEND=staged $MPIRUN 2 \
  "$HERE/bin/zest-cuda-backend-test$SUFFIX"
if [ $EMULATED = 1 ] || [ "$GPUS" -ge 2 ]; then
  check backend-nccl-2 " 0 failed" env ZEST_BACKEND=nccl $MPIRUN 2 \
    "$HERE/bin/zest-cuda-backend-test$SUFFIX"
fi
check linear "0 failures" env ZEST_BACKEND=nccl $MPIRUN 1 \
  "$HERE/bin/zest-cuda-linear-test$SUFFIX"

# Training against the CPU twins, and the exact memory plan.
# (The lists are read on descriptor 3: mpirun would read standard input.)
while IFS='|' read -r -u 3 name ranks rtol run; do
  backend=nccl
  [ "$ranks" -gt 1 ] && [ $EMULATED = 0 ] && [ "$GPUS" -lt "$ranks" ] &&
    backend=staged
  log=$LOGS/train-$name.log
  # shellcheck disable=SC2086
  if env ZEST_BACKEND=$backend $MPIRUN "$ranks" "$HERE/bin/$name$SUFFIX" \
    $run >"$log" 2>&1; then
    check "train-$name-$backend" "match" python3 "$HERE/tools/compare.py" \
      losses "$HERE/ref/$name.log" "$log" --rtol "$rtol"
    check "plan-$name" "== measured" python3 "$HERE/tools/checkplan.py" \
      "$HERE/ref/$name$SUFFIX.json" "$log" 1
  else
    record "train-$name-$backend" FAIL "see $log"
  fi
done 3<"$HERE/models.txt"

# Figures (a GPU only).
FIGURES=()
if [ $EMULATED = 0 ]; then
  check bench-linear "TFLOP" env ZEST_BACKEND=nccl $MPIRUN 1 \
    "$HERE/bin/zest-bench-cuda-linear"
  check bench-collectives-nccl "GB/s" env ZEST_BACKEND=nccl $MPIRUN 1 \
    "$HERE/bin/zest-bench-cuda-collectives"
  while IFS='|' read -r -u 3 name steps; do
    log=$LOGS/bench-$name.log
    if env ZEST_BACKEND=nccl $MPIRUN 1 "$HERE/bin/$name" --steps "$steps" \
      --lr 0.01 >"$log" 2>&1; then
      FIGURES+=("$name: $(grep summary "$log")")
      check "plan-$name" "== measured" python3 "$HERE/tools/checkplan.py" \
        "$HERE/ref/$name.json" "$log" 1
    else
      record "bench-$name" FAIL "see $log"
    fi
  done 3<"$HERE/bench.txt"
fi

echo
printf '%-34s %-5s %s\n' test result detail
printf '%s\n' "${RESULTS[@]}"
for figure in "${FIGURES[@]}"; do
  echo "$figure"
done
for file in "$LOGS"/bench-linear.log "$LOGS"/bench-collectives-nccl.log; do
  [ -f "$file" ] && cat "$file"
done
if printf '%s\n' "${RESULTS[@]}" | grep -q ' FAIL '; then
  exit 1
fi
