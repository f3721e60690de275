#!/usr/bin/env bash
# The main job on the bundled examples: group and shard each model for a few
# world sizes and print the unit tables and the collective schedule.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
OPT="$BUILD_DIR/bin/zest-opt"

run() {
  local model=$1 options=$2
  echo
  echo "=== $model  --zest-shard-pipeline=\"$options\""
  "$OPT" "examples/$model" --zest-shard-pipeline="$options" --zest-print-units \
    -o "$BUILD_DIR/demo-${model%.mlir}.sharded.mlir"
  echo "collectives in schedule order:"
  grep -oE 'zest\.(all_gather|reduce_scatter|all_reduce)[^:]*' \
    "$BUILD_DIR/demo-${model%.mlir}.sharded.mlir" | sed 's/^/  /'
}

run mlp_train.mlir "world-size=4 leaf-modules=layers.*"
run mlp_train.mlir "world-size=3 ignore=layers.1.bias"
run transformer_block_train.mlir "world-size=4 leaf-classes=Attention,MLP"
run transformer_block_train.mlir "world-size=8 min-unit-numel=500"
run mlp_inference.mlir "world-size=2 leaf-classes=Linear"
echo
echo "sharded IR written to $BUILD_DIR/demo-*.sharded.mlir"
