#!/usr/bin/env bash
# Fused attention (zest-import's default, --attention=fused: zest.attention,
# the CPU FlashAttention kernels) against PyTorch's math path
# (--attention=math, every score of a head kept for the backward) and eager
# PyTorch (its fused CPU kernel), on a Hugging Face
# model of bench/vs-pytorch/hf_models.py at longer sequences, W=1, one
# thread, the same weights and tokens: step time (median of STEPS-1 steps,
# REPS interleaved repetitions), the plan's peak pool, peak RSS above base,
# and the first losses.
#   bench/attention/run.sh [build-dir] [model] [seq ...]   (REPS=2 STEPS=3)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${1:-build}
MODEL=${2:-gpt2}
shift 2 || shift $#
SEQS=("$@")
[ ${#SEQS[@]} -eq 0 ] && SEQS=(512 1024)
REPS=${REPS:-2}
STEPS=${STEPS:-3}
OUT="$BUILD_DIR/bench/attention"
mkdir -p "$OUT"
scripts/setup-venv.sh >/dev/null
PY=.venv/bin/python
source bench/common.sh
export PYTHONPATH=python
FACTORY="bench/vs-pytorch/hf_models.py:$MODEL"

for seq in "${SEQS[@]}"; do
  dir="$OUT/$MODEL-$seq"
  mkdir -p "$dir"
  export ZEST_BENCH_SEQ=$seq
  echo "== $MODEL, 1 x $seq tokens"
  for mode in fused math; do
    scripts/zest-import "$FACTORY" --attention="$mode" \
      -o "$dir/model-$mode.mlir"
    "$BUILD_DIR/bin/zestc" "$dir/model-$mode.mlir" -o "$dir/w-$mode" \
      --world-size=1 --report >"$dir/report-$mode.txt"
  done
  "$PY" -m zest_import.reference data "$FACTORY" -o "$dir/tokens.bin" \
    --samples 16 --int-bound "${HF_VOCAB[$MODEL]}"
  rm -rf "$dir/ck0"
  mpirun --oversubscribe -np 1 "$dir/w-fused" --steps 0 --save "$dir/ck0" >/dev/null
  "$BUILD_DIR/bin/zest-ckpt" consolidate "$dir/ck0" "$dir/weights.safetensors" >/dev/null
  for r in $(seq "$REPS"); do
    for mode in fused math; do
      mpirun --oversubscribe -np 1 "$dir/w-$mode" --steps "$STEPS" \
        --data "$dir/tokens.bin" --lr 0.01 --load "$dir/ck0" >"$dir/zest-$mode.$r.log"
    done
    "$PY" bench/vs-pytorch/hf_torch.py eager "$FACTORY" --weights \
      "$dir/weights.safetensors" --data "$dir/tokens.bin" --steps "$STEPS" \
      --lr 0.01 >"$dir/eager.$r.log"
  done
  med() { median_of_runs "$dir" "$@"; }
  mib() { bc -l <<<"$1 / 1048576"; }
  pool() { sed -nE 's/.*peak pool bytes per rank ([0-9]+).*/\1/p' "$dir/report-$1.txt"; }
  rss="peak RSS above base bytes per rank"
  printf "%-22s %9s %14s %13s  %s\n" "" "step ms" "plan pool MiB" "peak RSS MiB" \
    "losses (first, last)"
  for run in zest-fused zest-math eager; do
    case $run in
      zest-fused) name="Zest, fused" plan=$(mib "$(pool fused)") ;;
      zest-math) name="Zest, math path" plan=$(mib "$(pool math)") ;;
      eager) name="eager PyTorch" plan="" ;;
    esac
    printf "%-22s %9.1f %14s %13.0f  %s\n" "$name" "$(med "$run" "step time")" \
      "$([ -n "$plan" ] && printf %.0f "$plan" || echo -)" \
      "$(mib "$(med "$run" "$rss")")" "$(losses "$dir/$run.1.log")"
  done
done
