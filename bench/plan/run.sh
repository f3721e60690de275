#!/usr/bin/env bash
# Plans at production size without the machine: a model of
# bench/vs-pytorch/hf_models.py (default llama8b, Llama 3 8B's shape
# computing in bfloat16) imported with zest-import --shapes-only (no weight
# is materialized) and planned with zestc --plan-only for W ranks of an
# H100 node (--machine=h100-nvlink), bf16 gathers and reductions of f32
# shards (--param-dtype=bf16 --reduce-dtype=bf16), AdamW, units by decoder
# layer, under several memory budgets (none, then each of BUDGETS): the
# predicted peak pool, pool footprint (the arena) and gathered bytes per
# rank, the bytes the host
# allocates per rank (shards, optimizer state), the predicted step time and
# the schedule chosen, with the wall time and peak memory of each tool.
# For the GPU target (TARGET=cuda, the default) a budget holds the pool and
# the arguments on the device, and the schedule may offload the optimizer
# or the parameters to pinned host memory.
#   bench/plan/run.sh [build-dir] [model] [seq] [world]
#   (defaults: build llama8b 4096 8; BUDGETS="40GiB 20GiB" TARGET=cuda)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${1:-build}
MODEL=${2:-llama8b}
SEQ=${3:-4096}
WORLD=${4:-8}
BUDGETS=${BUDGETS:-40GiB 20GiB}
TARGET=${TARGET:-cuda}
dir="$BUILD_DIR/bench/plan/$MODEL-$SEQ"
mkdir -p "$dir"
scripts/setup-venv.sh >/dev/null

# "<seconds> s, <peak MB> MB" of a command (GNU time); its output to $1.out.
# Fails, printing the command's output, where the command fails.
timed() {
  /usr/bin/time -f "%e %M" -o "$1" "${@:2}" >"$1.out" 2>&1 ||
    { cat "$1.out" >&2; return 1; }
  awk '{printf "%.1f s, %.0f MB", $1, $2 / 1024}' "$1"
}

echo "== $MODEL, 1 x $SEQ tokens per rank, W=$WORLD, --target=$TARGET"
took=$(ZEST_BENCH_SEQ=$SEQ timed "$dir/import.time" scripts/zest-import \
  "bench/vs-pytorch/hf_models.py:$MODEL" --shapes-only -o "$dir/model.mlir")
echo "zest-import --shapes-only: $took"
gib() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 2^30}'; }
for budget in none $BUDGETS; do
  flags=(--world-size="$WORLD" --param-dtype=bf16 --reduce-dtype=bf16
    --optimizer=adamw --prefetch=1 --machine=h100-nvlink --plan-only
    --target="$TARGET" --report-json="$dir/plan-$budget.json")
  [ "$budget" != none ] && flags+=(--memory-budget="$budget")
  took=$(timed "$dir/plan-$budget.time" "$BUILD_DIR/bin/zestc" "$dir/model.mlir" \
    "${flags[@]}" --report) || continue
  report="$dir/plan-$budget.time.out"
  peak=$(sed -nE 's/.*peak pool bytes per rank ([0-9]+).*/\1/p' "$report" | head -1)
  footprint=$(sed -nE 's/.*pool footprint bytes per rank ([0-9]+).*/\1/p' "$report" | head -1)
  gathered=$(sed -nE 's/.*peak gathered parameter bytes per rank ([0-9]+).*/\1/p' "$report" | head -1)
  args=$(sed -nE 's/.*argument bytes per rank ([0-9]+).*/\1/p' "$report" | head -1)
  host=$(sed -nE 's/.*argument bytes per rank [0-9]+ \([0-9]+ on the device, ([0-9]+) in pinned host memory.*/\1/p' "$report" | head -1)
  host=${host:-0}
  step=$(sed -nE 's/.*: ([0-9.]+) ms per call.*/\1/p' "$report" | head -1)
  echo "budget $budget: peak pool $(gib "$peak") GiB (footprint $(gib "$footprint") GiB, gathered $(gib "$gathered") GiB)" \
    "+ arguments $(gib "$((args - host))") GiB on the device, $(gib "$host") GiB in pinned" \
    "host memory per rank; predicted step $step ms; zestc $took"
  grep -E '^(schedule under|  offload and recomputation)' "$report" || true
done
