#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: Zest's GPU path against eager PyTorch on
# the same GPU, cuBLASLt fused linear TFLOP/s, and the CUDA backends'
# transport bandwidth. Prints figures; needs a build with the CUDA runtime
# (ZEST_ENABLE_CUDA) and the project virtualenv's torch (a CUDA wheel).
#   bench/gpu/run.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${1:-build}
OUT="$BUILD_DIR/bench/gpu"
mkdir -p "$OUT"
scripts/setup-venv.sh >/dev/null
PY=.venv/bin/python
source bench/common.sh
ZESTC="$BUILD_DIR/bin/zestc"
CKPT="$BUILD_DIR/bin/zest-ckpt"
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "bench/gpu: no GPU visible (nvidia-smi -L fails)" >&2
  exit 2
fi
nvidia-smi -L

echo "== fused linear layers on cuBLASLt (bf16, TFLOP/s)"
ZEST_BACKEND=nccl mpirun --oversubscribe -np 1 -x ZEST_BACKEND \
  "$BUILD_DIR/bin/zest-bench-cuda-linear"

echo "== transport bandwidth, 1 rank (NCCL) and 2 ranks sharing the GPU (staged)"
ZEST_BACKEND=nccl mpirun --oversubscribe -np 1 -x ZEST_BACKEND \
  "$BUILD_DIR/bin/zest-bench-cuda-collectives"
ZEST_BACKEND=staged mpirun --oversubscribe -np 2 -x ZEST_BACKEND \
  "$BUILD_DIR/bin/zest-bench-cuda-collectives"

echo "== training step vs eager PyTorch on the GPU (f32, TF32 off)"
printf "%-22s %10s %10s %7s %12s %12s\n" config "zest ms" "eager ms" ratio \
  "zest tok/s" "eager tok/s"
# layers dim batch seq steps
for config in "4 1024 8 512 10" "8 2048 4 1024 6"; do
  read -r L D B T S <<<"$config"
  name="L${L}-D${D}-B${B}xT${T}"
  dir="$OUT/$name"
  mkdir -p "$dir"
  stack_model "$dir" "$L" "$D" "$B" "$T"
  "$ZESTC" "$dir/model.mlir" -o "$dir/gpu" --world-size=1 --target=cuda \
    --leaf-classes=Block
  stack_data_and_weights "$dir" "$dir/gpu" "$T" "$D"
  mpirun --oversubscribe -np 1 "$dir/gpu" --steps "$S" --data "$dir/data.bin" \
    --lr 0.01 >"$dir/zest.log"
  "$PY" bench/vs-pytorch/model.py eager --device cuda \
    --weights "$dir/weights.safetensors" --data "$dir/data.bin" \
    --layers "$L" --dim "$D" --batch "$B" --seq "$T" --steps "$S" \
    >"$dir/eager.log"
  z=$(field "step time" "$(grep summary "$dir/zest.log")")
  e=$(field "step time" "$(grep summary "$dir/eager.log")")
  printf "%-22s %10.2f %10.2f %7.2f %12.0f %12.0f\n" "$name" "$z" "$e" \
    "$(bc -l <<<"$z / $e")" "$(bc -l <<<"$B * $T / ($z / 1000)")" \
    "$(bc -l <<<"$B * $T / ($e / 1000)")"
  echo "  losses (first, last): zest $(losses "$dir/zest.log")| eager" \
    "$(losses "$dir/eager.log")"
done
