#!/usr/bin/env bash
# What fusing the LM head into its loss saves in the memory plan: a model of
# bench/vs-pytorch/hf_models.py imported with zest-import --shapes-only at
# BATCH x SEQ tokens (ZEST_BENCH_BATCH, ZEST_BENCH_SEQ), then planned with
# zestc --plan-only with the head fused into the loss in chunks of rows
# (zest.linear_cross_entropy, the default) and kept apart
# (--fuse-loss=false): the predicted peak pool per rank, the pool bytes
# while the loss runs (the largest allocation's moment there is not the
# step's peak), and the buffers of [tokens, vocabulary] or one chunk's size
# the plan allocates.
#   bench/plan/loss.sh [build-dir] [model] [batch] [seq] [world] [target]
#   (defaults: build gpt2 8 512 1 cuda)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${1:-build}
MODEL=${2:-gpt2}
BATCH=${3:-8}
SEQ=${4:-512}
WORLD=${5:-1}
TARGET=${6:-cuda}
dir="$BUILD_DIR/bench/plan/loss-$MODEL-${BATCH}x$SEQ"
mkdir -p "$dir"
scripts/setup-venv.sh >/dev/null
ZEST_BENCH_BATCH=$BATCH ZEST_BENCH_SEQ=$SEQ scripts/zest-import \
  "bench/vs-pytorch/hf_models.py:$MODEL" --shapes-only -o "$dir/model.mlir"
gib() { awk -v b="$1" 'BEGIN {printf "%.2f", b / 2^30}'; }
echo "== $MODEL, $BATCH x $SEQ tokens per rank, W=$WORLD, --target=$TARGET"
printf "%-22s %14s %16s\n" "loss" "peak pool GiB" "largest buffer GiB"
for fuse in true false; do
  json="$dir/plan-$fuse.json"
  "$BUILD_DIR/bin/zestc" "$dir/model.mlir" --world-size="$WORLD" \
    --target="$TARGET" --plan-only --fuse-loss=$fuse --report-json="$json"
  read -r peak largest < <(python3 - "$json" <<'PY'
import json, sys
fn = json.load(open(sys.argv[1]))["functions"][0]
others = fn["peak_breakdown"]["others"]
print(fn["predicted_peak_pool_bytes"], max((o["bytes"] for o in others), default=0))
PY
)
  label=$([ $fuse = true ] && echo "fused (default)" || echo "--fuse-loss=false")
  printf "%-22s %14s %16s\n" "$label" "$(gib "$peak")" "$(gib "$largest")"
done
