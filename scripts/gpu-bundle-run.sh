#!/usr/bin/env bash
# run.sh of a Zest GPU bundle (scripts/gpu-bundle.sh): runs the GPU tests
# and benchmarks on this host and prints a table of PASS/FAIL and figures.
#
#   run.sh              on this host's GPU (CUDA, cuBLASLt and NCCL found in
#                       LD_LIBRARY_PATH, /usr/local/cuda, the system's
#                       library folders or any python3's nvidia-* wheels)
#   run.sh --emulated   the same tests on the emulated device (no GPU)
#   run.sh --micro      only the runtime's device tests and the product,
#                       attention and transport micro-benchmarks
#   run.sh --models     only the training checks and the benchmark stacks
#                       (not the runtime's device tests and the transport
#                       and product micro-benchmarks, nor the Hugging Face
#                       models)
#   run.sh --hf         only the Hugging Face models (gpu-bundle.sh --hf),
#                       f32 and bf16, against eager PyTorch and
#                       torch.compile (under autocast with each side's
#                       MFU), Zest with and without CUDA graphs, and the
#                       profile table (ZEST_KERNEL_TIMES)
#   run.sh --profile    instead of the tests, where GPU time goes in two
#                       steps of each benchmark stack (Nsight Compute's
#                       ncu, one time per kernel launch, summed by kernel)
#                       and in the Hugging Face models' steps (the
#                       runtime's ZEST_KERNEL_TIMES: events around each
#                       kernel, product, collective and copy)
#
# Logs go to ./zest-gpu-logs (or $ZEST_GPU_LOGS); each run is stopped after
# $ZEST_GPU_TIMEOUT seconds (600); ZEST_GPU_HF="gpt2|gpt2_bf16" (an
# extended regular expression) runs only those Hugging Face models. Exits
# non-zero if any test fails.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
EMULATED=0
PROFILE=0
MICRO=1
MODELS=1
HF=1
case "${1:-}" in
--emulated) EMULATED=1 ;;
--micro) MODELS=0 HF=0 ;;
--models) MICRO=0 HF=0 ;;
--hf) MICRO=0 MODELS=0 ;;
--profile) PROFILE=1 ;;
esac
LOGS=${ZEST_GPU_LOGS:-$PWD/zest-gpu-logs}
mkdir -p "$LOGS"

export OPAL_PREFIX=$HERE/openmpi
export PATH=$HERE/openmpi/bin:$PATH
export LD_LIBRARY_PATH=$HERE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
# Each run is stopped after ZEST_GPU_TIMEOUT seconds (600): a hang costs
# that much, not the whole session.
MPIRUN="timeout ${ZEST_GPU_TIMEOUT:-600} mpirun --oversubscribe -np"

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

# ncu from PATH, the CUDA toolkit or an Nsight Compute installation.
find_ncu() {
  local ncu
  for ncu in "$(command -v ncu)" /usr/local/cuda/bin/ncu \
    /opt/nvidia/nsight-compute/*/ncu; do
    [ -x "$ncu" ] && echo "$ncu" && return 0
  done
  return 1
}

# time_kernels NAME LOG: 4 steps of Hugging Face model NAME under
# ZEST_KERNEL_TIMES (its thousands of launches a step are too many to replay
# under ncu; the runtime times them with events), the table in LOG.
time_kernels() {
  env ZEST_BACKEND=nccl ZEST_KERNEL_TIMES=1 $MPIRUN 1 "$HERE/bin/$1" \
    --steps 4 --lr 0.01 --data "$HERE/ref/$1-tokens.bin" >"$2" 2>&1
}

if [ $PROFILE = 1 ]; then
  NCU=$(find_ncu) ||
    echo "run.sh: no Nsight Compute (ncu): the stacks are not profiled" >&2
  while [ -n "$NCU" ] && IFS='|' read -r -u 3 name L D B T S; do
    echo "== $name: GPU time by kernel over 2 steps (ncu, caches and clocks" \
      "as in a run)"
    env ZEST_BACKEND=nccl $MPIRUN 1 "$NCU" --csv --metrics \
      gpu__time_duration.sum --cache-control none --clock-control none \
      --log-file "$LOGS/ncu-$name.csv" "$HERE/bin/$name" --steps 2 \
      --lr 0.01 >"$LOGS/ncu-$name.log" 2>&1
    grep summary "$LOGS/ncu-$name.log"
    python3 "$HERE/tools/kernel-profile.py" "$LOGS/ncu-$name.csv" --steps 2
  done 3<"$HERE/bench.txt"
  while IFS='|' read -r -u 3 name _ _ _ _; do
    echo "== $name: GPU time by kernel, product and collective over 3" \
      "steps after the first (ZEST_KERNEL_TIMES)"
    time_kernels "$name" "$LOGS/times-$name.log"
    grep 'summary\|zest: rank 0' "$LOGS/times-$name.log"
  done 3<"$HERE/hf.txt"
  exit 0
fi

RESULTS=()
# Each result is printed as it comes (a run stopped at a time limit still
# shows what finished) and again in the table at the end.
record() {
  RESULTS+=("$(printf '%-34s %-5s %s' "$1" "$2" "$3")")
  echo "run.sh: ${RESULTS[-1]}"
}

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
[ $MICRO = 1 ] && check backend-nccl-1 " 0 failed" env ZEST_BACKEND=nccl $MPIRUN 1 \
  "$HERE/bin/zest-cuda-backend-test$SUFFIX"
[ $MICRO = 1 ] && check backend-staged-2 " 0 failed" env ZEST_BACKEND=staged $MPIRUN 2 \
  "$HERE/bin/zest-cuda-backend-test$SUFFIX"
if [ $MICRO = 1 ] && { [ $EMULATED = 1 ] || [ "$GPUS" -ge 2 ]; }; then
  check backend-nccl-2 " 0 failed" env ZEST_BACKEND=nccl $MPIRUN 2 \
    "$HERE/bin/zest-cuda-backend-test$SUFFIX"
fi
[ $MICRO = 1 ] && check linear "0 failures" env ZEST_BACKEND=nccl $MPIRUN 1 \
  "$HERE/bin/zest-cuda-linear-test$SUFFIX"
# Attention: the default kernels (the flash kernels for 16-bit storage,
# else the tiles), the WMMA ones, the tiles alone and the reference ones;
# the cross-entropy.
[ $MICRO = 1 ] && check attention " 0 failures" env ZEST_BACKEND=nccl \
  $MPIRUN 1 "$HERE/bin/zest-cuda-attention-test$SUFFIX"
[ $MICRO = 1 ] && [ $EMULATED = 0 ] && check attention-reference \
  " 0 failures" env ZEST_BACKEND=nccl ZEST_CUDA_ATTENTION=reference \
  $MPIRUN 1 "$HERE/bin/zest-cuda-attention-test"
[ $MICRO = 1 ] && [ $EMULATED = 0 ] && check attention-tensor-cores \
  " 0 failures" env ZEST_BACKEND=nccl ZEST_CUDA_ATTENTION=tensor-cores \
  $MPIRUN 1 "$HERE/bin/zest-cuda-attention-test"
[ $MICRO = 1 ] && [ $EMULATED = 0 ] && check attention-tiled \
  " 0 failures" env ZEST_BACKEND=nccl ZEST_CUDA_ATTENTION=tiled \
  $MPIRUN 1 "$HERE/bin/zest-cuda-attention-test"
[ $MICRO = 1 ] && check cross-entropy " 0 failures" env ZEST_BACKEND=nccl \
  $MPIRUN 1 "$HERE/bin/zest-cuda-cross-entropy-test$SUFFIX"
[ $MICRO = 1 ] && check grouped-matmul " 0 failures" env ZEST_BACKEND=nccl \
  $MPIRUN 1 "$HERE/bin/zest-cuda-grouped-matmul-test$SUFFIX"
# CUDA graphs: a capture over two streams replayed, and entry points
# captured with their collectives.
[ $MICRO = 1 ] && check graphs-replay "launch 3: ok" env ZEST_BACKEND=nccl \
  $MPIRUN 1 "$HERE/bin/zest-cuda-graphs-test$SUFFIX" replay
[ $MICRO = 1 ] && check graphs-entries "sum call 4: sum ok, page-locked copy ok" \
  env ZEST_BACKEND=nccl $MPIRUN 1 "$HERE/bin/zest-cuda-graphs-test$SUFFIX" entries

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
done 3< <([ $MODELS = 1 ] && cat "$HERE/models.txt")

# The step time of a run's summary line, and its first and last losses.
step_ms() { sed -nE 's/.*step time ([0-9.]+).*/\1/p' "$1" | tail -1; }
first_last_losses() { grep '^step ' "$1" | sed -n '1p;$p' | awk '{printf "%s ", $4}'; }

# seeded_weights DIR NAME: DIR/weights.safetensors, executable NAME's seeded
# initial weights, for eager PyTorch to start from.
seeded_weights() {
  $MPIRUN 1 "$HERE/bin/$2" --steps 0 --save "$1/ck0" &&
    "$HERE/bin/zest-ckpt" consolidate "$1/ck0" "$1/weights.safetensors"
}

# prepare_eager DIR NAME L D T: DIR/data.bin and DIR/weights.safetensors
# for eager PyTorch's side of a benchmark stack; fails where python3 has no
# torch.
prepare_eager() {
  python3 -c 'import torch, safetensors' 2>/dev/null &&
    python3 "$HERE/tools/model.py" data --out "$1/data.bin" --samples 64 \
      --seq "$5" --dim "$4" &&
    seeded_weights "$1" "$2"
}

# bench_stack NAME L D B T STEPS: Zest's training step on the GPU, its plan
# against the measured peak, and eager PyTorch's step on the same GPU from
# the same weights and data where python3 has torch.
bench_stack() {
  local name=$1 L=$2 D=$3 B=$4 T=$5 S=$6 dir=$LOGS/bench-$1 data=()
  mkdir -p "$dir"
  prepare_eager "$dir" "$name" "$L" "$D" "$T" >"$dir/prepare.log" 2>&1 &&
    data=(--data "$dir/data.bin")
  if ! env ZEST_BACKEND=nccl $MPIRUN 1 "$HERE/bin/$name" --steps "$S" \
    --lr 0.01 "${data[@]}" >"$dir/zest.log" 2>&1; then
    record "bench-$name" FAIL "see $dir/zest.log"
    return
  fi
  check "plan-$name" "== measured" python3 "$HERE/tools/checkplan.py" \
    "$HERE/ref/$name.json" "$dir/zest.log" 1
  local zest eager=
  zest=$(step_ms "$dir/zest.log")
  FIGURES+=("$name zest: $(grep summary "$dir/zest.log")")
  if [ ${#data[@]} -gt 0 ] && timeout "${ZEST_GPU_TIMEOUT:-600}" \
    python3 "$HERE/tools/model.py" eager \
    --device cuda --weights "$dir/weights.safetensors" --data "$dir/data.bin" \
    --layers "$L" --dim "$D" --batch "$B" --seq "$T" --steps "$S" \
    >"$dir/eager.log" 2>&1; then
    eager=$(step_ms "$dir/eager.log")
    FIGURES+=("$name eager: $(grep summary "$dir/eager.log")")
    FIGURES+=("$name zest/eager step: $(awk -v z="$zest" -v e="$eager" \
      'BEGIN {printf "%.3f", z / e}'), losses (first, last): zest \
$(first_last_losses "$dir/zest.log")| eager $(first_last_losses "$dir/eager.log")")
  else
    FIGURES+=("$name eager: not run (see $dir/prepare.log, $dir/eager.log)")
  fi
}

# bench_hf NAME FACTORY BATCH SEQ RTOL: a Hugging Face model (gpu-bundle.sh
# --hf) trained on the GPU, its plan against the measured peak, and eager
# PyTorch on the same GPU from the same weights (the executable's seeded
# ones) and tokens, where python3 has torch and transformers: losses equal
# within RTOL.
bench_hf() {
  local name=$1 factory=$2 dir=$LOGS/bench-$1 steps=6
  local tokens=$HERE/ref/$name-tokens.bin
  mkdir -p "$dir"
  if ! env ZEST_BACKEND=nccl $MPIRUN 1 "$HERE/bin/$name" --steps $steps \
    --lr 0.01 --data "$tokens" >"$dir/zest.log" 2>&1; then
    record "bench-$name" FAIL "see $dir/zest.log"
    return
  fi
  check "plan-$name" "== measured" python3 "$HERE/tools/checkplan.py" \
    "$HERE/ref/$name.json" "$dir/zest.log" 1
  FIGURES+=("$name zest: $(grep summary "$dir/zest.log")")
  # What CUDA graphs save: the same executable without them.
  if env ZEST_BACKEND=nccl ZEST_CUDA_GRAPHS=0 $MPIRUN 1 "$HERE/bin/$name" \
    --steps $steps --lr 0.01 --data "$tokens" >"$dir/nographs.log" 2>&1; then
    check "train-$name-graphs" "match" python3 "$HERE/tools/compare.py" \
      losses "$dir/nographs.log" "$dir/zest.log" --rtol 0
    FIGURES+=("$name zest graphs/no graphs step: $(awk \
      -v g="$(step_ms "$dir/zest.log")" -v n="$(step_ms "$dir/nographs.log")" \
      'BEGIN {printf "%.3f (%.3f / %.3f ms)", (n > 0 ? g / n : 0), g, n}'); $(grep \
      'CUDA graphs' "$dir/zest.log" | tail -1)")
  else
    record "train-$name-graphs" FAIL "see $dir/nographs.log"
  fi
  # Where the GPU time goes: the 12 largest (all in times.log).
  time_kernels "$name" "$dir/times.log" &&
    FIGURES+=("$(grep 'zest: rank 0' "$dir/times.log" | head -14)")
  if ! python3 -c 'import torch, transformers, safetensors' 2>/dev/null ||
    ! seeded_weights "$dir" "$name" >"$dir/prepare.log" 2>&1; then
    FIGURES+=("$name eager: not run (see $dir/prepare.log)")
    return
  fi
  if ! env ZEST_BENCH_BATCH="$3" ZEST_BENCH_SEQ="$4" PYTHONPATH="$HERE/tools" \
    timeout "${ZEST_GPU_TIMEOUT:-600}" python3 "$HERE/tools/hf_torch.py" \
    eager "$HERE/tools/hf_models.py:$factory" --device cuda \
    --weights "$dir/weights.safetensors" --data "$tokens" --steps $steps \
    --lr 0.01 >"$dir/eager.log" 2>&1; then
    record "train-$name-vs-eager" FAIL "see $dir/eager.log"
    return
  fi
  check "train-$name-vs-eager" "match" python3 "$HERE/tools/compare.py" \
    losses "$dir/eager.log" "$dir/zest.log" --rtol "$5"
  FIGURES+=("$name eager: $(grep summary "$dir/eager.log"); $(grep 'device memory' "$dir/eager.log")")
  FIGURES+=("$name zest/eager step: $(awk -v z="$(step_ms "$dir/zest.log")" \
    -v e="$(step_ms "$dir/eager.log")" 'BEGIN {printf "%.3f", z / e}'), \
losses (first, last): zest $(first_last_losses "$dir/zest.log")| eager \
$(first_last_losses "$dir/eager.log")")
  # torch.compile's step, and under autocast (bf16) each side's model
  # FLOPs utilization against the H100's dense bf16 peak.
  local flops
  flops=$(sed -nE 's/^model flops per step ([0-9]+).*/\1/p' "$dir/eager.log")
  if env ZEST_BENCH_BATCH="$3" ZEST_BENCH_SEQ="$4" PYTHONPATH="$HERE/tools" \
    timeout "${ZEST_GPU_TIMEOUT:-600}" python3 "$HERE/tools/hf_torch.py" \
    eager "$HERE/tools/hf_models.py:$factory" --device cuda --compile \
    --weights "$dir/weights.safetensors" --data "$tokens" --steps $steps \
    --lr 0.01 >"$dir/compile.log" 2>&1; then
    check "train-$name-vs-compile" "match" python3 "$HERE/tools/compare.py" \
      losses "$dir/eager.log" "$dir/compile.log" --rtol "$5"
    FIGURES+=("$name zest/compile step: $(awk -v z="$(step_ms "$dir/zest.log")" \
      -v c="$(step_ms "$dir/compile.log")" 'BEGIN {printf "%.3f", z / c}')")
  else
    record "train-$name-vs-compile" FAIL "see $dir/compile.log"
  fi
  [[ $name == *_bf16 ]] || return 0
  local side
  for side in zest eager compile; do
    [ -f "$dir/$side.log" ] && FIGURES+=("$name $side MFU: $(awk \
      -v f="$flops" -v ms="$(step_ms "$dir/$side.log")" \
      'BEGIN {if (ms > 0) printf "%.1f%%", 100 * f / (ms / 1000) / 989.4e12}')")
  done
}

# check_hf_sharded NAME: Hugging Face model NAME sharded over two ranks
# (NAME-w2, if the bundle has it; NCCL with two GPUs, else the staged
# transport on one), 3 steps of a micro-batch per rank, against one rank
# accumulating the same two micro-batches a step: equal losses, the plan
# exact.
check_hf_sharded() {
  local name=$1 dir=$LOGS/bench-$1 backend=nccl
  [ -x "$HERE/bin/$name-w2" ] || return 0
  [ "$GPUS" -lt 2 ] && backend=staged
  local run=(--steps 3 --lr 0.01 --data "$HERE/ref/$name-tokens.bin")
  if ! env ZEST_BACKEND=nccl $MPIRUN 1 "$HERE/bin/$name" "${run[@]}" \
    --accum 2 >"$dir/accum2.log" 2>&1 ||
    ! env ZEST_BACKEND=$backend $MPIRUN 2 "$HERE/bin/$name-w2" "${run[@]}" \
      >"$dir/w2.log" 2>&1; then
    record "train-$name-w2-$backend" FAIL "see $dir/accum2.log, $dir/w2.log"
    return
  fi
  check "train-$name-w2-$backend" "match" python3 "$HERE/tools/compare.py" \
    losses "$dir/accum2.log" "$dir/w2.log" --rtol 1e-5
  check "plan-$name-w2" "== measured" python3 "$HERE/tools/checkplan.py" \
    "$HERE/ref/$name-w2.json" "$dir/w2.log" 1
}

# Figures (a GPU only).
FIGURES=()
if [ $EMULATED = 0 ]; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
fi
if [ $EMULATED = 0 ] && [ $MICRO = 1 ]; then
  check bench-linear "bare fwd" env ZEST_BACKEND=nccl $MPIRUN 1 \
    "$HERE/bin/zest-bench-cuda-linear"
  check bench-collectives-nccl "algbw" env ZEST_BACKEND=nccl $MPIRUN 1 \
    "$HERE/bin/zest-bench-cuda-collectives"
  check bench-collectives-staged-2 "algbw" env ZEST_BACKEND=staged $MPIRUN 2 \
    "$HERE/bin/zest-bench-cuda-collectives"
  # Attention kernels (tiled and reference) next to PyTorch's SDPA.
  check bench-attention "2x2048" env ZEST_BACKEND=nccl $MPIRUN 1 \
    "$HERE/bin/zest-bench-cuda-attention" --reference 5
  python3 -c 'import torch' 2>/dev/null &&
    check bench-attention-sdpa "2x2048" python3 "$HERE/tools/sdpa_torch.py"
fi
if [ $EMULATED = 0 ]; then
  while IFS='|' read -r -u 3 name L D B T S; do
    bench_stack "$name" "$L" "$D" "$B" "$T" "$S"
  done 3< <([ $MODELS = 1 ] && cat "$HERE/bench.txt")
  while IFS='|' read -r -u 3 name factory batch seq rtol; do
    bench_hf "$name" "$factory" "$batch" "$seq" "$rtol"
    check_hf_sharded "$name"
  done 3< <([ $HF = 1 ] && grep -E "^hf-(${ZEST_GPU_HF:-[^|]*})\|" "$HERE/hf.txt")
fi

# The micro-benchmarks' tables first: the results and figures end the
# output, where a truncated log keeps them.
for file in "$LOGS"/bench-linear.log "$LOGS"/bench-collectives-*.log \
  "$LOGS"/bench-attention*.log; do
  [ -f "$file" ] && cat "$file"
done
echo
printf '%-34s %-5s %s\n' test result detail
printf '%s\n' "${RESULTS[@]}"
for figure in "${FIGURES[@]}"; do
  echo "$figure"
done
if printf '%s\n' "${RESULTS[@]}" | grep -q ' FAIL '; then
  exit 1
fi
