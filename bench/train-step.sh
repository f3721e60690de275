#!/usr/bin/env bash
# Step time, throughput, gathered-parameter peak and traffic of the bundled
# training examples at several world sizes (same global batch each time).
#   bench/train-step.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
OUT="$BUILD_DIR/bench"
mkdir -p "$OUT"
source bench/common.sh

run() {
  local model=$1 policy=$2 global=$3
  echo "== $model ($policy), global batch $global micro-batches"
  printf "%6s %12s %12s %22s %16s %16s\n" ranks "step ms" "samples/s" \
    "peak gathered B/rank" "sent B/step/rank" "peak pool B/rank"
  for w in 1 2 4; do
    "$BUILD_DIR/bin/zestc" "examples/$model" -o "$OUT/${model%.mlir}.w$w" \
      --world-size=$w $policy
    line=$(mpirun --oversubscribe -np $w "$OUT/${model%.mlir}.w$w" --steps 30 \
      --accum $((global / w)) --dataset-size 64 | grep '^summary:')
    printf "%6s %12s %12s %22s %16s %16s\n" $w \
      "$(sed -E 's/.*step time ([0-9.]+) ms.*/\1/' <<<"$line")" \
      "$(sed -E 's/.*samples\/s ([0-9.]+).*/\1/' <<<"$line")" \
      "$(sed -E 's/.*peak gathered parameter bytes per rank ([0-9]+).*/\1/' <<<"$line")" \
      "$(sed -E 's/.*bytes sent per step per rank ([0-9]+).*/\1/' <<<"$line")" \
      "$(sed -E 's/.*peak pool bytes per rank ([0-9]+).*/\1/' <<<"$line")"
  done
}

run mlp_train.mlir "--leaf-modules=layers.*" 4
run transformer_block_train.mlir "--leaf-classes=Attention,MLP" 4
