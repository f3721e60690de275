#!/usr/bin/env bash
# Compile time of generated transformer stacks (D=256) at zestc's default
# optimization level, next to `mlir-opt --canonicalize --cse` on the same
# file: medians of 3 runs, the ratio to mlir-opt, and how compile time grows
# with the number of blocks (96/48 is 2.0 for a linear compiler).
#   bench/compile-time/run.sh [build-dir] [blocks...]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${1:-build}
shift || true
BLOCKS=("$@")
[ ${#BLOCKS[@]} -eq 0 ] && BLOCKS=(12 24 48 96)
OUT="$BUILD_DIR/bench/compile-time"
mkdir -p "$OUT"
ZESTC="$BUILD_DIR/bin/zestc"
MLIR_OPT=$(command -v mlir-opt || echo /usr/lib/llvm-22/bin/mlir-opt)

# Median wall time of a command over 3 runs, in seconds.
median_time() {
  for _ in 1 2 3; do
    local start end
    start=$(date +%s.%N)
    "$@" >/dev/null
    end=$(date +%s.%N)
    echo "$end - $start" | bc -l
  done | sort -n | sed -n 2p
}

printf "%-8s %10s %12s %8s %10s %12s\n" blocks "zestc s" "mlir-opt s" ratio \
  "peak MiB" "x prev"
prev=""
for n in "${BLOCKS[@]}"; do
  model="$OUT/stack$n.mlir"
  python3 examples/gen/transformer_block.py --layers "$n" >"$model"
  z=$(median_time "$ZESTC" "$model" -o "$OUT/stack$n" --leaf-classes=Block)
  m=$(median_time "$MLIR_OPT" --canonicalize --cse "$model")
  kib=$( { /usr/bin/time -f "%M" "$ZESTC" "$model" -o "$OUT/stack$n" \
           --leaf-classes=Block; } 2>&1 | tail -1)
  growth=$([ -n "$prev" ] && printf "%.2f" "$(bc -l <<<"$z / $prev")" || echo -)
  printf "%-8s %10.2f %12.3f %8.1f %10.0f %12s\n" "$n" "$z" "$m" \
    "$(bc -l <<<"$z / $m")" "$(bc -l <<<"$kib / 1024")" "$growth"
  prev=$z
done
