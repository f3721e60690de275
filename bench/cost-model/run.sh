#!/usr/bin/env bash
# On paper beyond this machine: zestc's cost model (--machine=h100-nvlink,
# one GPU of an 8 x H100 SXM NVLink node) on Llama-sized stacks at W=8,
# AdamW, f32, one micro-batch of 2048 (or 256) tokens per rank. Schedules:
#   fsdp2-like     prefetch 1, every unit re-gathered, no budget
#   shard-grad-op  prefetch 1, every unit kept from forward to backward
#   zest           --memory-budget = 80 GiB - the rank's arguments (shard,
#                  AdamW state, accumulator, batch) - 2 GiB, prefetch up to 2
#   zest (half)    a budget halfway between the two schedules' peak pools
# Prints, per model and schedule, the prediction: peak pool and gathered
# bytes, the arguments, step time and exposed communication. Nothing runs:
# each line is a compilation up to the memory plan (a minute or two each
# for the 80-layer stack).
#   bench/cost-model/run.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${1:-build}
OUT="$BUILD_DIR/bench/cost-model"
mkdir -p "$OUT"
HBM=$((80 * 1024 * 1024 * 1024))
RESERVE=$((2 * 1024 * 1024 * 1024))

# name layers dim mlp-width tokens: blocks with Llama's width and depth; the
# GELU MLP's width is 1.5x the SwiGLU one so a block has Llama's parameters.
# With 256 tokens per rank communication outweighs compute.
MODELS=("llama-7b-sized 32 4096 16512 2048" "llama-7b-sized 32 4096 16512 256"
  "llama-70b-sized 80 8192 43008 2048")

report() { # model.mlir out.json options...
  local model=$1 json=$2
  shift 2
  "$BUILD_DIR/bin/zestc" "$model" -o "$OUT/out.mlir" --emit=mlir \
    --world-size=8 --leaf-classes=Block --optimizer=adamw \
    --machine=h100-nvlink --report-json="$json" "$@" >/dev/null
}

row() { # model schedule json
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
model, schedule, path = sys.argv[1:]
r = json.load(open(path))
(f,) = r["functions"]
kept = sum(u["decision"] == "keep" for u in r["units"])
depth = max((u["prefetch"] or 0) for u in r["units"])
gib = lambda b: b / 2**30
total = r["predicted_peak_pool_bytes"] + f["argument_bytes"]
print(f"| {model} | {schedule} | {depth} | {kept}/{len(r['units'])} | "
      f"{gib(r['predicted_peak_pool_bytes']):.1f} | "
      f"{gib(r['predicted_peak_gathered_bytes']):.1f} | "
      f"{gib(f['argument_bytes']):.1f} | {gib(total):.1f}"
      f"{' (over 80 GiB)' if total > 80 * 2**30 else ''} | "
      f"{f['cost']['step_us'] / 1e3:.0f} | "
      f"{f['cost']['exposed_communication_us'] / 1e3:.1f} | "
      f"{f['sent_bytes_per_rank'] / 2**30:.1f} |")
PY
}

echo "| model | schedule | prefetch | units kept | peak pool GiB | peak gathered GiB | arguments GiB | total GiB | predicted step ms | exposed ms | sent GiB/rank |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for m in "${MODELS[@]}"; do
  set -- $m
  name="$1, $5 tokens"
  python3 examples/gen/transformer_block.py --layers "$2" --dim "$3" \
    --hidden "$4" --batch 1 --seq "$5" >"$OUT/$name.mlir"
  report "$OUT/$name.mlir" "$OUT/$name.fsdp2.json" --prefetch=1
  row "$name" fsdp2-like "$OUT/$name.fsdp2.json"
  report "$OUT/$name.mlir" "$OUT/$name.sgo.json" --prefetch=1 \
    --strategy=shard-grad-op
  row "$name" shard-grad-op "$OUT/$name.sgo.json"
  args=$(python3 -c "import json; print(json.load(open('$OUT/$name.fsdp2.json'))['functions'][0]['argument_bytes'])")
  budget=$((HBM - args - RESERVE))
  if [ "$budget" -le 0 ]; then
    echo "| $name | zest | - | - | - | - | $(python3 -c "print(f'{$args / 2**30:.1f}')") | - (the arguments alone exceed 80 GiB: more ranks needed) | - | - | - |"
  elif report "$OUT/$name.mlir" "$OUT/$name.zest.json" \
      --memory-budget="$budget" 2>"$OUT/$name.zest.err"; then
    row "$name" "zest (budget $((budget / 1024 / 1024 / 1024)) GiB)" \
      "$OUT/$name.zest.json"
  else
    echo "| $name | zest | $(head -c 200 "$OUT/$name.zest.err") |"
  fi
  [ "$budget" -le 0 ] && continue
  half=$(python3 -c "import json; p = lambda s: json.load(open('$OUT/$name.' + s + '.json'))['predicted_peak_pool_bytes']; print((p('fsdp2') + p('sgo')) // 2)")
  report "$OUT/$name.mlir" "$OUT/$name.half.json" --memory-budget="$half"
  row "$name" "zest (budget $((half / 1024 / 1024 / 1024)) GiB)" \
    "$OUT/$name.half.json"
done
