#!/usr/bin/env bash
# Zest vs PyTorch on Hugging Face causal LMs at their published sizes
# (bench/vs-pytorch/hf_models.py: GPT-2 124M, a Llama of 160M, Pythia-160M),
# random weights, dropout off, one thread per rank, 1 x 128 tokens per
# micro-batch, the same weights (Zest's seeded ones) and tokens on both
# sides: Zest W=1 vs eager, Zest W=2 vs FSDP2 (gloo, fully_shard per decoder
# layer and the root). Zest compiles with its defaults: units by decoder
# layer (block-units), and --prefetch=1 at W=2 as FSDP2 prefetches.
# Prints, per model: import and compile time and peak memory, medians over
# REPS interleaved repetitions of step time, peak RSS above base, the
# ratios, each Zest run's page faults in its last step, and the first and
# last losses.
#   bench/vs-pytorch/hf.sh [build-dir] [model ...]     (REPS=3 STEPS=6)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${1:-build}
shift || true
MODELS=("$@")
[ ${#MODELS[@]} -eq 0 ] && MODELS=(gpt2 llama160m pythia160m)
REPS=${REPS:-3}
STEPS=${STEPS:-6}
OUT="$BUILD_DIR/bench/vs-pytorch-hf"
mkdir -p "$OUT"
scripts/setup-venv.sh >/dev/null
PY=.venv/bin/python
source bench/common.sh
export PYTHONPATH=python
ZESTC="$BUILD_DIR/bin/zestc"
CKPT="$BUILD_DIR/bin/zest-ckpt"
FACTORIES=bench/vs-pytorch/hf_models.py

# "<seconds> s, <peak MB> MB" of a command, from GNU time; its output goes
# to $1.out.
timed() {
  /usr/bin/time -f "%e %M" -o "$1" "${@:2}" >"$1.out"
  awk '{printf "%.1f s, %.0f MB", $1, $2 / 1024}' "$1"
}

for m in "${MODELS[@]}"; do
  dir="$OUT/$m"
  mkdir -p "$dir"
  echo "== $m"
  echo "import:   $(timed "$dir/import.time" scripts/zest-import \
    "$FACTORIES:$m" -o "$dir/model.mlir")"
  echo "zestc W=1: $(timed "$dir/zestc1.time" "$ZESTC" "$dir/model.mlir" \
    -o "$dir/w1" --world-size=1)"
  echo "zestc W=2: $(timed "$dir/zestc2.time" "$ZESTC" "$dir/model.mlir" \
    -o "$dir/w2" --world-size=2 --prefetch=1 --report)"
  grep '^units:' "$dir/zestc2.time.out"
  # ZEST_BENCH_EP=N: also Zest W=N with expert parallelism (each rank
  # whole experts; its seeded initial weights are the checkpoint's).
  if [[ -n "${ZEST_BENCH_EP:-}" ]]; then
    echo "zestc W=$ZEST_BENCH_EP --expert-parallel: $(timed "$dir/zestcep.time" \
      "$ZESTC" "$dir/model.mlir" -o "$dir/wep" --world-size="$ZEST_BENCH_EP" \
      --expert-parallel="$ZEST_BENCH_EP" --prefetch=1)"
  fi
  "$PY" -m zest_import.reference data "$FACTORIES:$m" -o "$dir/tokens.bin" \
    --samples 64 --int-bound "${HF_VOCAB[$m]}"
  rm -rf "$dir/ck0" "$dir/ck0-2"
  mpirun --oversubscribe -np 1 "$dir/w1" --steps 0 --save "$dir/ck0" >/dev/null
  "$CKPT" consolidate "$dir/ck0" "$dir/weights.safetensors" >/dev/null
  "$CKPT" reshard "$dir/ck0" "$dir/ck0-2" --world-size 2 >/dev/null
  zest=(--steps "$STEPS" --data "$dir/tokens.bin" --lr 0.01)
  torch=("$FACTORIES:$m" --weights "$dir/weights.safetensors"
    --data "$dir/tokens.bin" --steps "$STEPS" --lr 0.01)
  for r in $(seq "$REPS"); do
    mpirun --oversubscribe -np 1 "$dir/w1" "${zest[@]}" --load "$dir/ck0" \
      >"$dir/zest1.$r.log"
    "$PY" bench/vs-pytorch/hf_torch.py eager "${torch[@]}" >"$dir/eager.$r.log"
    mpirun --oversubscribe -np 2 "$dir/w2" "${zest[@]}" --load "$dir/ck0-2" \
      >"$dir/zest2.$r.log"
    "$PY" bench/vs-pytorch/hf_torch.py fsdp2 "${torch[@]}" --world-size 2 \
      >"$dir/fsdp2.$r.log" 2>"$dir/fsdp2.$r.err" ||
      true # gloo may abort while tearing down after the summary
    grep -q summary "$dir/fsdp2.$r.log" || { cat "$dir/fsdp2.$r.err"; exit 1; }
    if [[ -n "${ZEST_BENCH_EP:-}" ]]; then
      mpirun --oversubscribe -np "$ZEST_BENCH_EP" "$dir/wep" "${zest[@]}" \
        >"$dir/zestep.$r.log"
    fi
  done
  med() { median_of_runs "$dir" "$@"; }
  z1=$(med zest1 "step time"); e1=$(med eager "step time")
  z2=$(med zest2 "step time"); f2=$(med fsdp2 "step time")
  rss="peak RSS above base bytes per rank"
  z1mb=$(med zest1 "$rss"); e1mb=$(med eager "$rss")
  z2mb=$(med zest2 "$rss"); f2mb=$(med fsdp2 "$rss")
  mb() { bc -l <<<"$1 / 1048576"; }
  printf "%-8s %10s %10s %7s %10s %10s %7s\n" "" "zest ms" "torch ms" ratio \
    "zest MB" "torch MB" ratio
  printf "%-8s %10.1f %10.1f %7.2f %10.0f %10.0f %7.2f\n" "W=1/eager" \
    "$z1" "$e1" "$(bc -l <<<"$z1 / $e1")" "$(mb "$z1mb")" "$(mb "$e1mb")" \
    "$(bc -l <<<"$z1mb / $e1mb")"
  printf "%-8s %10.1f %10.1f %7.2f %10.0f %10.0f %7.2f\n" "W=2/FSDP2" \
    "$z2" "$f2" "$(bc -l <<<"$z2 / $f2")" "$(mb "$z2mb")" "$(mb "$f2mb")" \
    "$(bc -l <<<"$z2mb / $f2mb")"
  if [[ -n "${ZEST_BENCH_EP:-}" ]]; then
    zep=$(med zestep "step time"); zepmb=$(med zestep "$rss")
    printf "%-8s %10.1f %10.1f %7.2f %10.0f %10.0f %7.2f\n" "W=2 EP/FSDP2" \
      "$zep" "$f2" "$(bc -l <<<"$zep / $f2")" "$(mb "$zepmb")" \
      "$(mb "$f2mb")" "$(bc -l <<<"$zepmb / $f2mb")"
    echo "  expert parallelism: losses $(losses "$dir/zestep.1.log");" \
      "$(grep 'all-to-all' "$dir/zestep.1.log")"
  fi
  # Every run's page faults, not their median: a rare late fault is what
  # the zero-fault target is about.
  faults() {
    for r in $(seq "$REPS"); do
      field "in the last step" "$(grep summary "$dir/$1.$r.log")"
    done | paste -sd, -
  }
  echo "  page faults in the last step, each run: W=1 $(faults zest1)," \
    "W=2 $(faults zest2); communication wait W=2:" \
    "$(med zest2 "communication wait ms per step") ms per step"
  echo "  losses (first, last): zest1 $(losses "$dir/zest1.1.log")| eager" \
    "$(losses "$dir/eager.1.log")| zest2 $(losses "$dir/zest2.1.log")| fsdp2" \
    "$(losses "$dir/fsdp2.1.log")"
done
