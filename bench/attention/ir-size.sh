#!/usr/bin/env bash
# The imported step's size against its sequence length: a model of
# bench/vs-pytorch/hf_models.py (default llama8b, Llama 3 8B's shape in
# bfloat16 autocast) imported with zest-import --shapes-only at each length
# (default 1024 4096 16384 tokens, one sequence per rank): the IR's bytes
# and ops (lines of the printed module holding an op), their ratio to the
# first length's, and the import's wall time and peak memory. With
# attention one op (zest.attention), the IR does not grow with the length.
#   bench/attention/ir-size.sh [build-dir] [model] [seq ...]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${1:-build}
MODEL=${2:-llama8b}
shift 2 || shift $#
SEQS=("$@")
[ ${#SEQS[@]} -eq 0 ] && SEQS=(1024 4096 16384)
OUT="$BUILD_DIR/bench/attention/ir-size"
mkdir -p "$OUT"
scripts/setup-venv.sh >/dev/null

printf "%-8s %12s %9s %8s %8s %12s %10s\n" tokens "IR bytes" ops "bytes x" "ops x" \
  "import s" "import MB"
first_bytes="" first_ops=""
for seq in "${SEQS[@]}"; do
  file="$OUT/$MODEL-$seq.mlir"
  ZEST_BENCH_SEQ=$seq /usr/bin/time -f "%e %M" -o "$OUT/$seq.time" \
    scripts/zest-import "bench/vs-pytorch/hf_models.py:$MODEL" --shapes-only \
    -o "$file"
  bytes=$(stat -c %s "$file")
  ops=$(grep -cE '^ *(%[^ ]+ = )?"?[a-z_]+\.[a-z_.]+' "$file")
  first_bytes=${first_bytes:-$bytes} first_ops=${first_ops:-$ops}
  read -r secs kb <"$OUT/$seq.time"
  printf "%-8s %12d %9d %8.2f %8.2f %12.1f %10.0f\n" "$seq" "$bytes" "$ops" \
    "$(bc -l <<<"$bytes / $first_bytes")" "$(bc -l <<<"$ops / $first_ops")" \
    "$secs" "$(bc -l <<<"$kb / 1024")"
done
