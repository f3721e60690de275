#!/usr/bin/env bash
# The main job on the bundled examples: shard them (unit tables and the
# collective schedule), then compile the MLP and the transformer block with
# zestc and train each on 2 MPI ranks, printing the loss as it falls; then
# train a small Hugging Face Llama from PyTorch with one command (zest train).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
OPT="$BUILD_DIR/bin/zest-opt"
ZESTC="$BUILD_DIR/bin/zestc"
OUT="$BUILD_DIR/demo"
mkdir -p "$OUT"
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN=(mpirun --oversubscribe -np 2)

shard() {
  local model=$1 options=$2
  echo
  echo "=== zest-opt examples/$model --zest-shard-pipeline=\"$options\""
  "$OPT" "examples/$model" --zest-shard-pipeline="$options" --zest-print-units \
    -o "$OUT/${model%.mlir}.sharded.mlir"
  echo "collectives in schedule order:"
  grep -oE 'zest\.(all_gather|reduce_scatter|all_reduce) [^:]*' \
    "$OUT/${model%.mlir}.sharded.mlir" | sed 's/ %[0-9a-z_]*//; s/^/  /'
}

shard mlp_train.mlir "world-size=4 leaf-modules=layers.*"
shard transformer_block_train.mlir "world-size=4 leaf-classes=Attention,MLP"
shard mlp_inference.mlir "world-size=2 leaf-classes=Linear"

echo
echo "=== zestc examples/mlp_train.mlir --world-size=2 --leaf-modules='layers.*' --optimizer=adamw"
"$ZESTC" examples/mlp_train.mlir -o "$OUT/mlp" --world-size=2 --leaf-modules='layers.*' \
  --optimizer=adamw
echo "=== mpirun -np 2 $OUT/mlp --steps 20 --lr 0.01 --dataset-size 64"
"${MPIRUN[@]}" "$OUT/mlp" --steps 20 --lr 0.01 --dataset-size 64

echo
echo "=== zestc examples/transformer_block_train.mlir --world-size=2 --leaf-classes=Attention,MLP --optimizer=adamw --clip-grad-norm=1"
"$ZESTC" examples/transformer_block_train.mlir -o "$OUT/block" --world-size=2 \
  --leaf-classes=Attention,MLP --optimizer=adamw --clip-grad-norm=1
echo "=== mpirun -np 2 $OUT/block --steps 20 --lr 0.003 --lr-schedule cosine --warmup-steps 4 --dataset-size 4 --save $OUT/block.ckpt"
"${MPIRUN[@]}" "$OUT/block" --steps 20 --lr 0.003 --lr-schedule cosine --warmup-steps 4 \
  --dataset-size 4 --save "$OUT/block.ckpt"
"$BUILD_DIR/bin/zest-ckpt" consolidate "$OUT/block.ckpt" "$OUT/block.safetensors"
echo "consolidated parameters (safetensors, keyed by FQN): $OUT/block.safetensors"

echo
echo "=== scripts/zest train test/Import/Inputs/hf.py:llama --nproc 2 --steps 20 --lr 0.1 --save $OUT/llama --export $OUT/llama.pt"
echo "    (a Hugging Face Llama from PyTorch: import, compile, run, export in one command)"
rm -rf "$OUT/llama"
ZEST_BUILD_DIR="$BUILD_DIR" ZEST_CACHE_DIR="$OUT/cache" scripts/zest train \
  test/Import/Inputs/hf.py:llama --nproc 2 --steps 20 --lr 0.1 \
  --save "$OUT/llama" --export "$OUT/llama.pt"
