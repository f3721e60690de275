#!/usr/bin/env bash
# Mixed precision on the wire (zestc --param-dtype, --reduce-dtype): a
# 4-layer D=256 transformer stack at W=2 with prefetch 1, compiled with f32
# collectives, bf16 gathers, and bf16 gathers and reductions; run over Open
# MPI's shared memory and under a modeled link (ZEST_LINK, 10 GB/s and 20 us
# by default: bandwidth-bound transfers). Prints bytes sent per step per
# rank and medians over alternating runs of the step time and of rank 0's
# time blocked in waits, with the last step's loss.
#   bench/mixed-precision/run.sh [build-dir] [link GB/s,latency us] [runs]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${1:-build}
LINK=${2:-10,20}
RUNS=${3:-5}
OUT="$BUILD_DIR/bench/mixed-precision"
mkdir -p "$OUT"
source bench/common.sh

stack_model "$OUT" 4 256 4 32
CONFIGS=(f32 bf16-gather bf16-both)
options() {
  case $1 in
  f32) ;;
  bf16-gather) echo --param-dtype=bf16 ;;
  bf16-both) echo --param-dtype=bf16 --reduce-dtype=bf16 ;;
  esac
}
for c in "${CONFIGS[@]}"; do
  # shellcheck disable=SC2046
  "$BUILD_DIR/bin/zestc" "$OUT/model.mlir" -o "$OUT/$c" --world-size=2 \
    --leaf-classes=Block --prefetch=1 --optimizer=adamw $(options "$c")
done
printf "%-10s %-12s %14s %9s %9s %12s\n" link config "bytes sent" "step ms" \
  "wait ms" "last loss"
for link in none "$LINK"; do
  for c in "${CONFIGS[@]}"; do : >"$OUT/$c.$link.txt"; done
  for _ in $(seq "$RUNS"); do
    for c in "${CONFIGS[@]}"; do
      env=()
      [ "$link" != none ] && env=(-x "ZEST_LINK=$link")
      mpirun --oversubscribe "${env[@]}" -np 2 "$OUT/$c" --steps 10 \
        --lr 0.001 >"$OUT/$c.log"
      grep '^summary:' "$OUT/$c.log" >>"$OUT/$c.$link.txt"
    done
  done
  for c in "${CONFIGS[@]}"; do
    f="$OUT/$c.$link.txt"
    step=$(sed -E 's/.*step time ([0-9.]+) ms.*/\1/' "$f" | median)
    wait=$(sed -E 's/.*communication wait ms per step ([0-9.]+).*/\1/' "$f" |
      median)
    bytes=$(sed -E 's/.*bytes sent per step per rank ([0-9]+).*/\1/' "$f" |
      head -1)
    loss=$(sed -nE 's/^step 10 loss ([0-9.e+-]+)/\1/p' "$OUT/$c.log")
    printf "%-10s %-12s %14s %9.2f %9.2f %12s\n" "$link" "$c" "$bytes" \
      "$step" "$wait" "$loss"
  done
done
