#!/usr/bin/env bash
# Zest vs PyTorch on the same transformer stack, weights and data, one thread
# per rank: Zest W=1 vs eager, Zest W=2 vs FSDP2 (gloo). Prints step times
# (medians), peak RSS above the process base, the ratios, and the first and
# last losses of each run so the runs can be seen to agree.
#   bench/vs-pytorch/run.sh [build-dir] [--quick]
# Creates the project virtualenv (.venv, torch from the package index) once.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${1:-build}
QUICK=${2:-}
OUT="$BUILD_DIR/bench/vs-pytorch"
mkdir -p "$OUT"
scripts/setup-venv.sh >/dev/null
PY=.venv/bin/python
source bench/common.sh
ZESTC="$BUILD_DIR/bin/zestc"
CKPT="$BUILD_DIR/bin/zest-ckpt"

# layers dim batch seq steps
CONFIGS=("4 256 4 32 20" "8 512 8 32 8" "4 1024 1 16 8")
[ "$QUICK" = "--quick" ] && CONFIGS=("2 64 2 8 6")

printf "%-22s %10s %10s %7s %12s %12s %7s %10s %10s %7s\n" config \
  "zest1 ms" "eager ms" ratio "zest1 MB" "eager MB" ratio "zest2 ms" \
  "fsdp2 ms" ratio
for config in "${CONFIGS[@]}"; do
  read -r L D B T S <<<"$config"
  name="L${L}-D${D}-B${B}xT${T}"
  dir="$OUT/$name"
  mkdir -p "$dir"
  stack_model "$dir" "$L" "$D" "$B" "$T"
  "$ZESTC" "$dir/model.mlir" -o "$dir/w1" --world-size=1 --leaf-classes=Block
  # FSDP2 prefetches the next block's all-gather by default; so does Zest's
  # W=2 executable (--prefetch=1), like for like.
  "$ZESTC" "$dir/model.mlir" -o "$dir/w2" --world-size=2 --leaf-classes=Block \
    --prefetch=1
  stack_data_and_weights "$dir" "$dir/w1" "$T" "$D"
  common=(--steps "$S" --data "$dir/data.bin" --lr 0.01)
  mpirun --oversubscribe -np 1 "$dir/w1" "${common[@]}" >"$dir/zest1.log"
  "$PY" bench/vs-pytorch/model.py eager --weights "$dir/weights.safetensors" \
    --data "$dir/data.bin" --layers "$L" --dim "$D" --batch "$B" --seq "$T" \
    --steps "$S" >"$dir/eager.log"
  mpirun --oversubscribe -np 2 "$dir/w2" "${common[@]}" >"$dir/zest2.log"
  "$PY" bench/vs-pytorch/model.py fsdp2 --weights "$dir/weights.safetensors" \
    --data "$dir/data.bin" --layers "$L" --dim "$D" --batch "$B" --seq "$T" \
    --steps "$S" --world-size 2 >"$dir/fsdp2.log" 2>"$dir/fsdp2.err" ||
    true # gloo may abort while tearing down after the summary; checked below
  grep -q summary "$dir/fsdp2.log" || { cat "$dir/fsdp2.err"; exit 1; }
  z1=$(grep summary "$dir/zest1.log"); e1=$(grep summary "$dir/eager.log")
  z2=$(grep summary "$dir/zest2.log"); f2=$(grep summary "$dir/fsdp2.log")
  z1ms=$(field "step time" "$z1"); e1ms=$(field "step time" "$e1")
  z2ms=$(field "step time" "$z2"); f2ms=$(field "step time" "$f2")
  z1mb=$(field "peak RSS above base bytes per rank" "$z1")
  e1mb=$(field "peak RSS above base bytes per rank" "$e1")
  printf "%-22s %10.2f %10.2f %7.2f %12.1f %12.1f %7.2f %10.2f %10.2f %7.2f\n" \
    "$name" "$z1ms" "$e1ms" "$(bc -l <<<"$z1ms / $e1ms")" \
    "$(bc -l <<<"$z1mb / 1048576")" "$(bc -l <<<"$e1mb / 1048576")" \
    "$(bc -l <<<"$z1mb / $e1mb")" "$z2ms" "$f2ms" "$(bc -l <<<"$z2ms / $f2ms")"
  echo "  losses (first, last): zest1 $(losses "$dir/zest1.log")| eager" \
    "$(losses "$dir/eager.log")| zest2 $(losses "$dir/zest2.log")| fsdp2" \
    "$(losses "$dir/fsdp2.log")"
done
