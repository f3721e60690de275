#!/usr/bin/env bash
# Bucketing (zestc --bucket-bytes): an 8-layer D=128 transformer stack
# wrapped per LayerNorm and Linear (6 small units per layer, 48 in all, as
# FSDP users wrap when they want fine-grained memory) at W=2 with prefetch
# 1, compiled with no buckets and with buckets of 256 KiB and 4 MiB, run
# without and with a modeled link whose latency dominates (ZEST_LINK, 10
# GB/s and 200 us per collective by default, a cross-node TCP-like link).
# Prints, per bucket size, the collectives per call and the predicted peak
# pool (from --report), and medians over alternating runs of the step time
# and of rank 0's time blocked in waits, next to the cost model's
# prediction and the ratio measured / predicted.
#   bench/bucketing/run.sh [build-dir] [link GB/s,latency us] [runs]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${1:-build}
LINK=${2:-10,200}
RUNS=${3:-3}
OUT="$BUILD_DIR/bench/bucketing"
mkdir -p "$OUT"
source bench/common.sh

BUCKETS=(0 256KiB 4MiB)
stack_model "$OUT" 8 128 4 32
compile() { # bucket, output, extra options...
  local bucket=$1 out=$2
  shift 2
  "$BUILD_DIR/bin/zestc" "$OUT/model.mlir" -o "$out" --world-size=2 \
    --leaf-classes=LayerNorm,Linear --prefetch=1 --bucket-bytes="$bucket" "$@"
}
for b in "${BUCKETS[@]}"; do
  compile "$b" "$OUT/b$b"
done

# Collectives per call, peak pool bytes and predicted ms for bucket $1 and
# link $2.
predict() {
  local linkopt=()
  [ "$2" != none ] && linkopt=(--link="$2")
  compile "$1" "$OUT/predict.mlir" --emit=mlir --machine=cpu \
    "${linkopt[@]}" --report >"$OUT/report.txt"
  sed -nE 's/^collectives: .*: ([0-9]+) per call.*/\1/p' "$OUT/report.txt"
  sed -nE 's/.*peak pool bytes per rank ([0-9]+).*/\1/p' "$OUT/report.txt"
  sed -nE 's/.* ([0-9.]+) ms per call .*/\1/p' "$OUT/report.txt"
}
printf "%-10s %8s %12s %14s %9s %9s %13s %9s\n" link bucket "collectives" \
  "peak pool MiB" "step ms" "wait ms" "predicted ms" "meas/pred"
for link in none "$LINK"; do
  for b in "${BUCKETS[@]}"; do : >"$OUT/b$b.$link.txt"; done
  for _ in $(seq "$RUNS"); do
    for b in "${BUCKETS[@]}"; do
      env=()
      [ "$link" != none ] && env=(-x "ZEST_LINK=$link")
      mpirun --oversubscribe "${env[@]}" -np 2 "$OUT/b$b" --steps 10 |
        grep '^summary:' >>"$OUT/b$b.$link.txt"
    done
  done
  for b in "${BUCKETS[@]}"; do
    f="$OUT/b$b.$link.txt"
    step=$(sed -E 's/.*step time ([0-9.]+) ms.*/\1/' "$f" | median)
    wait=$(sed -E 's/.*communication wait ms per step ([0-9.]+).*/\1/' "$f" |
      median)
    { read -r calls; read -r pool; read -r pstep; } < <(predict "$b" "$link")
    printf "%-10s %8s %12s %14.1f %9.2f %9.2f %13.2f %9.2f\n" "$link" "$b" \
      "$calls" "$(bc -l <<<"$pool / 1048576")" "$step" "$wait" "$pstep" \
      "$(bc -l <<<"$step / $pstep")"
  done
done
