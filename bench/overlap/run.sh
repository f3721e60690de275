#!/usr/bin/env bash
# Overlap of communication with computation (zest-schedule-collectives):
# the 4-layer D=256 transformer stack at W=2, compiled with --prefetch 0, 1
# and 2, run without and with a modeled link (ZEST_LINK, a bandwidth at
# which communication takes about as long as the step's computation).
# Prints medians over alternating runs of the step time and of the time
# rank 0 spends blocked in waits (exposed communication, plus waiting for
# the other rank: both ranks share this machine's two cores), next to what
# zestc's cost model predicts for the same schedule (--machine=cpu, with
# --link for the modeled link) and the ratio measured / predicted.
#   bench/overlap/run.sh [build-dir] [link GB/s,latency us] [runs]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${1:-build}
LINK=${2:-0.5,10}
RUNS=${3:-3}
OUT="$BUILD_DIR/bench/overlap"
mkdir -p "$OUT"
source bench/common.sh

stack_model "$OUT" 4 256 4 32
for p in 0 1 2; do
  "$BUILD_DIR/bin/zestc" "$OUT/model.mlir" -o "$OUT/p$p" --world-size=2 \
    --leaf-classes=Block --prefetch=$p
done

# The cost model's step and exposed time for prefetch $1 and link $2.
predict() {
  local linkopt=()
  [ "$2" != none ] && linkopt=(--link="$2")
  "$BUILD_DIR/bin/zestc" "$OUT/model.mlir" -o "$OUT/predict.mlir" --emit=mlir \
    --world-size=2 --leaf-classes=Block --prefetch="$1" --machine=cpu \
    "${linkopt[@]}" --report |
    sed -nE 's/.* ([0-9.]+) ms per call .*exposed ([0-9.]+) ms.*/\1 \2/p'
}
printf "%-16s %9s %12s %12s %14s %14s %16s %9s\n" link prefetch "step ms" \
  "wait ms" "peak pool MiB" "predicted ms" "pred. exposed ms" "measured/predicted"
for link in none "$LINK"; do
  for p in 0 1 2; do : >"$OUT/p$p.$link.txt"; done
  for _ in $(seq "$RUNS"); do
    for p in 0 1 2; do
      env=()
      [ "$link" != none ] && env=(-x "ZEST_LINK=$link")
      mpirun --oversubscribe "${env[@]}" -np 2 "$OUT/p$p" --steps 10 |
        grep '^summary:' >>"$OUT/p$p.$link.txt"
    done
  done
  for p in 0 1 2; do
    f="$OUT/p$p.$link.txt"
    step=$(sed -E 's/.*step time ([0-9.]+) ms.*/\1/' "$f" | median)
    wait=$(sed -E 's/.*communication wait ms per step ([0-9.]+).*/\1/' "$f" |
      median)
    pool=$(sed -E 's/.*peak pool bytes per rank ([0-9]+).*/\1/' "$f" | median)
    read -r pstep pexposed < <(predict "$p" "$link")
    printf "%-16s %9s %12.2f %12.2f %14.1f %14.2f %16.2f %9.2f\n" "$link" \
      "$p" "$step" "$wait" "$(bc -l <<<"$pool / 1048576")" "$pstep" \
      "$pexposed" "$(bc -l <<<"$step / $pstep")"
  done
done
