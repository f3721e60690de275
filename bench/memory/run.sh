#!/usr/bin/env bash
# Memory against FSDP2 at W=2: a Hugging Face model of
# bench/vs-pytorch/hf_models.py at a longer sequence, trained by Zest with
# and without activation checkpointing (--activation-checkpointing=full,
# units by decoder layer) and by FSDP2 (fully_shard per decoder layer and
# the root) with and without transformers' gradient checkpointing
# (torch.utils.checkpoint per decoder layer), the same weights and tokens,
# one thread per rank: step time (median of STEPS-1 steps over REPS
# interleaved repetitions), peak RSS above base per rank, Zest's planned
# pool footprint (the arena it holds), and the first and last losses. Zest
# also runs under --memory-budget from loose to tight (BUDGETS: fractions of
# the way from the footprint without checkpointing to the one with full
# checkpointing; 0 is the former, 1 the latter), each with the schedule
# zestc chose.
#   bench/memory/run.sh [build-dir] [model] [seq]   (REPS=2 STEPS=3)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${1:-build}
MODEL=${2:-gpt2}
SEQ=${3:-512}
REPS=${REPS:-2}
STEPS=${STEPS:-3}
dir="$BUILD_DIR/bench/memory/$MODEL-$SEQ"
mkdir -p "$dir"
scripts/setup-venv.sh >/dev/null
PY=.venv/bin/python
source bench/common.sh
export PYTHONPATH=python ZEST_BENCH_SEQ=$SEQ
FACTORY="bench/vs-pytorch/hf_models.py:$MODEL"

scripts/zest-import "$FACTORY" -o "$dir/model.mlir"
for ac in none full; do
  "$BUILD_DIR/bin/zestc" "$dir/model.mlir" -o "$dir/zest-$ac" --world-size=2 \
    --prefetch=1 --activation-checkpointing=$ac --report >"$dir/report-$ac.txt"
done
pool() { sed -nE 's/.*pool footprint bytes per rank ([0-9]+).*/\1/p' "$dir/report-$1.txt"; }
# The budgets, each compiled to the schedule zestc chooses for it.
BUDGETS=${BUDGETS:-0 0.5 1}
budgets=()
for f in $BUDGETS; do
  b=$(bc <<<"$(pool none) - ($(pool none) - $(pool full)) * $f / 1")
  budgets+=("$b")
  "$BUILD_DIR/bin/zestc" "$dir/model.mlir" -o "$dir/zest-b$b" --world-size=2 \
    --prefetch=1 --memory-budget="$b" --report >"$dir/report-b$b.txt"
done
"$PY" -m zest_import.reference data "$FACTORY" -o "$dir/tokens.bin" \
  --samples 16 --int-bound "${HF_VOCAB[$MODEL]}"
rm -rf "$dir/ck0" "$dir/ck0-2"
mpirun --oversubscribe -np 2 "$dir/zest-none" --steps 0 --save "$dir/ck0" >/dev/null
"$BUILD_DIR/bin/zest-ckpt" consolidate "$dir/ck0" "$dir/weights.safetensors" >/dev/null
torch=("$FACTORY" --weights "$dir/weights.safetensors" --data "$dir/tokens.bin"
  --steps "$STEPS" --lr 0.01 --world-size 2)
fsdp2() { # log name, extra options
  "$PY" bench/vs-pytorch/hf_torch.py fsdp2 "${torch[@]}" "${@:2}" \
    >"$dir/$1.log" 2>"$dir/$1.err" || true # gloo may abort at teardown
  grep -q summary "$dir/$1.log" || { cat "$dir/$1.err"; exit 1; }
}
for r in $(seq "$REPS"); do
  for run in none full "${budgets[@]/#/b}"; do
    mpirun --oversubscribe -np 2 "$dir/zest-$run" --steps "$STEPS" \
      --data "$dir/tokens.bin" --lr 0.01 --load "$dir/ck0" >"$dir/zest-$run.$r.log"
  done
  fsdp2 "fsdp2.$r"
  fsdp2 "fsdp2-ckpt.$r" --checkpoint
done
med() { median_of_runs "$dir" "$@"; }
mib() { bc -l <<<"$1 / 1048576"; }
rss="peak RSS above base bytes per rank"
echo "== $MODEL, 1 x $SEQ tokens per rank, W=2"
printf "%-26s %9s %13s %14s  %s\n" "" "step ms" "peak RSS MiB" "plan pool MiB" \
  "losses (first, last)"
for run in zest-none zest-full "${budgets[@]/#/zest-b}" fsdp2 fsdp2-ckpt; do
  case $run in
    zest-none) name="Zest" plan=$(printf %.0f "$(mib "$(pool none)")") ;;
    zest-full) name="Zest, full checkpointing" plan=$(printf %.0f "$(mib "$(pool full)")") ;;
    zest-b*)
      name="Zest, budget $(printf %.0f "$(mib "${run#zest-b}")") MiB"
      plan=$(printf %.0f "$(mib "$(pool "${run#zest-}")")") ;;
    fsdp2) name="FSDP2" plan=- ;;
    fsdp2-ckpt) name="FSDP2 + checkpoint" plan=- ;;
  esac
  printf "%-26s %9.1f %13.0f %14s  %s\n" "$name" "$(med "$run" "step time")" \
    "$(mib "$(med "$run" "$rss")")" "$plan" "$(losses "$dir/$run.1.log")"
done
echo "The budgets' schedules:"
for b in "${budgets[@]}"; do
  sed -n 's/^schedule under /  /p' "$dir/report-b$b.txt"
done
