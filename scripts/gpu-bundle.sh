#!/usr/bin/env bash
# Packs the GPU tests and benchmarks into one tarball for a GPU host that
# has only a GPU driver, the CUDA and NCCL libraries and python3 (no LLVM,
# no compiler, maybe no MPI): compile here, run there, as users do on a
# login node and GPU nodes.
#
#   scripts/gpu-bundle.sh BUILD OUT.tar.gz [--hf]
#   tar xzf OUT.tar.gz && zest-gpu-bundle/run.sh [--emulated]
#
# With --hf the bundle also holds the Hugging Face models of
# bench/vs-pytorch/hf_models.py at their published sizes (GPT-2 124M,
# Llama 160M, Pythia-160M, GPT-2 and that Llama computing in bf16 under
# autocast, and a Llama of 1.2B), 8 x 512 tokens a step, imported here with
# the project's virtualenv (about 20 s and 1.5 GB each, the 1.2B 40 s and
# 7 GB); run.sh trains them on the GPU against eager PyTorch (and the bf16
# ones against torch.compile) where the host's python3 has torch and
# transformers.
#
# The tarball holds the executables zestc makes for the GPU
# (--target=cuda) and for the emulated device (--target=cuda-emulated), the
# runtime's device tests and GPU benchmarks, the CPU twins' reference
# outputs, the libraries they need besides CUDA, cuBLASLt and NCCL (which
# run.sh finds on the host), a relocatable Open MPI, and run.sh
# (scripts/gpu-bundle-run.sh). It must stay under 64 MiB.
set -euo pipefail
if [ $# -lt 2 ] || [ $# -gt 3 ] || { [ $# -eq 3 ] && [ "$3" != --hf ]; }; then
  echo "usage: $0 BUILD OUT.tar.gz [--hf]" >&2
  exit 2
fi
BUILD=$(cd "$1" && pwd)
OUT=$2
HF=${3:-}
SRC=$(cd "$(dirname "$0")/.." && pwd)
ZESTC=$BUILD/bin/zestc
for program in zest-cuda-backend-test zest-cuda-linear-test \
  zest-cuda-attention-test zest-cuda-cross-entropy-test \
  zest-cuda-grouped-matmul-test zest-cuda-graphs-test \
  zest-cuda-backend-test-emulated zest-cuda-linear-test-emulated \
  zest-cuda-attention-test-emulated zest-cuda-cross-entropy-test-emulated \
  zest-cuda-grouped-matmul-test-emulated zest-cuda-graphs-test-emulated; do
  if [ ! -x "$BUILD/bin/$program" ]; then
    echo "error: $BUILD/bin/$program is missing: the bundle needs a build" \
      "with the CUDA runtime (ZEST_ENABLE_CUDA=ON, the CUDA toolkit)" >&2
    exit 1
  fi
done
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
B=$STAGE/zest-gpu-bundle
mkdir -p "$B"/{bin,lib,ref,tools}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN="mpirun --oversubscribe -np"

# name | example | zestc options | ranks | loss tolerance | run options |
# zestc options of the GPU builds only (offload has no CPU form). The CPU
# twin's output is the reference run.sh compares each GPU run with.
MODELS=(
  "mlp1|mlp_train|--world-size=1 --momentum|1|1e-5|--steps 6 --lr 0.05 --momentum 0.9 --dataset-size 16"
  "mlp2|mlp_train|--world-size=2 --momentum|2|1e-5|--steps 6 --lr 0.05 --momentum 0.9 --dataset-size 16"
  "tb1|transformer_block_train|--world-size=1 --optimizer=adamw --clip-grad-norm=0.5|1|1e-4|--steps 6 --lr 0.003 --dataset-size 16"
  "mp2|transformer_block_train|--world-size=2 --leaf-classes=Attention,MLP --optimizer=adamw --param-dtype=bf16 --reduce-dtype=bf16|2|1e-3|--steps 6 --lr 0.003 --dataset-size 16"
  "off2|transformer_block_train|--world-size=2 --leaf-classes=Attention,MLP --optimizer=adamw|2|1e-5|--steps 6 --lr 0.003 --dataset-size 16|--offload=optimizer"
)
echo "gpu-bundle: compiling the models (CPU reference, cuda, cuda-emulated)"
: >"$B/models.txt"
for model in "${MODELS[@]}"; do
  IFS='|' read -r name example options ranks rtol run device <<<"$model"
  # shellcheck disable=SC2086
  "$ZESTC" "$SRC/examples/$example.mlir" -o "$STAGE/$name-cpu" $options
  # shellcheck disable=SC2086
  $MPIRUN "$ranks" "$STAGE/$name-cpu" $run >"$B/ref/$name.log"
  for target in cuda cuda-emulated; do
    suffix=${target#cuda}
    # shellcheck disable=SC2086
    "$ZESTC" "$SRC/examples/$example.mlir" -o "$B/bin/$name$suffix" \
      $options $device --target=$target \
      --report-json="$B/ref/$name$suffix.json"
  done
  echo "$name|$ranks|$rtol|$run" >>"$B/models.txt"
done

# The GPU benchmark's transformer stacks. run.sh compares them with eager
# PyTorch on the same GPU (same initial weights, through zest-ckpt, and the
# same data) where the host's python3 has torch.
echo "gpu-bundle: compiling the benchmark stacks"
: >"$B/bench.txt"
for config in "4 1024 8 512 10" "8 2048 4 1024 6"; do
  read -r L D Bt T S <<<"$config"
  name="stack-L$L-D$D-B${Bt}xT$T"
  python3 "$SRC/examples/gen/transformer_block.py" --layers "$L" --dim "$D" \
    --hidden $((D * 4)) --batch "$Bt" --seq "$T" >"$STAGE/$name.mlir"
  "$ZESTC" "$STAGE/$name.mlir" -o "$B/bin/$name" --world-size=1 \
    --target=cuda --leaf-classes=Block --report-json="$B/ref/$name.json"
  echo "$name|$L|$D|$Bt|$T|$S" >>"$B/bench.txt"
done

# The Hugging Face models (--hf): their imported steps for the GPU, the
# tokens both sides train on, and PyTorch's side (bench/vs-pytorch).
: >"$B/hf.txt"
if [ "$HF" = --hf ]; then
  echo "gpu-bundle: importing the Hugging Face models (8 x 512 tokens)"
  "$SRC/scripts/setup-venv.sh" >/dev/null
  # shellcheck source=bench/common.sh
  source "$SRC/bench/common.sh"
  export ZEST_BENCH_BATCH=8 ZEST_BENCH_SEQ=512 PYTHONPATH=$SRC/python
  # model | zestc options | loss tolerance against eager (bf16: autocast's
  # products round differently from cuBLASLt's)
  for row in "gpt2||1e-4" "llama160m||1e-4" "pythia160m||1e-4" \
    "gpt2_bf16|--param-dtype=bf16|1e-2" \
    "llama160m_bf16|--param-dtype=bf16|1e-2" \
    "pythia160m_bf16|--param-dtype=bf16|1e-2" "llama1b||1e-4" \
    "llama1b_bf16|--param-dtype=bf16|1e-2"; do
    IFS='|' read -r model options rtol <<<"$row"
    factory=$SRC/bench/vs-pytorch/hf_models.py:$model
    "$SRC/scripts/zest-import" "$factory" -o "$STAGE/$model.mlir"
    "$SRC/.venv/bin/python" -m zest_import.reference data "$factory" \
      -o "$B/ref/hf-$model-tokens.bin" --samples 64 \
      --int-bound "${HF_VOCAB[$model]}"
    # shellcheck disable=SC2086
    "$ZESTC" "$STAGE/$model.mlir" -o "$B/bin/hf-$model" --world-size=1 \
      --target=cuda --report-json="$B/ref/hf-$model.json" $options
    echo "hf-$model|$model|$ZEST_BENCH_BATCH|$ZEST_BENCH_SEQ|$rtol" \
      >>"$B/hf.txt"
    # GPT-2 sharded over two ranks too (one GPU each, or both on one
    # through the staged transport), against its one-rank run.
    if [ "$model" = gpt2 ]; then
      "$ZESTC" "$STAGE/$model.mlir" -o "$B/bin/hf-$model-w2" --world-size=2 \
        --prefetch=1 --target=cuda --report-json="$B/ref/hf-$model-w2.json"
    fi
  done
  cp -r "$SRC/python/zest_import" "$B/tools/"
  rm -rf "$B/tools/zest_import/__pycache__"
  cp "$SRC"/bench/vs-pytorch/{hf_models.py,hf_torch.py} "$B/tools/"
fi

cp "$BUILD"/bin/zest-cuda-{backend,linear,attention,cross-entropy,grouped-matmul,graphs}-test{,-emulated} \
  "$BUILD"/bin/zest-bench-cuda-{linear,collectives,attention} \
  "$BUILD/bin/zest-ckpt" "$B/bin/"
cp "$SRC"/test/lib/{compare.py,checkplan.py} "$SRC/bench/vs-pytorch/model.py" \
  "$SRC/scripts/kernel-profile.py" "$SRC/bench/gpu/sdpa_torch.py" \
  "$B/tools/"
cp "$SRC/scripts/gpu-bundle-run.sh" "$B/run.sh"
chmod +x "$B/run.sh"

# Open MPI, relocated under openmpi/ (OPAL_PREFIX): its launcher, its
# components and help texts at the same places relative to its prefix.
info() { ompi_info --path all | sed -n "s/^ *$1: //p" | head -1; }
PREFIX=$(info Prefix)
PKGLIB=$(info Pkglibdir)
PKGDATA=$(info Pkgdatadir)
mkdir -p "$B/openmpi/bin" "$B/openmpi/${PKGLIB#"$PREFIX"/}" \
  "$B/openmpi/${PKGDATA#"$PREFIX"/}"
cp "$(command -v orterun)" "$B/openmpi/bin/mpirun"
cp -r "$PKGLIB"/. "$B/openmpi/${PKGLIB#"$PREFIX"/}/"
cp -r "$PKGDATA"/. "$B/openmpi/${PKGDATA#"$PREFIX"/}/"

# Every shared library the programs and MPI's components load, except the C
# library's own and the GPU's (CUDA, cuBLASLt, NCCL: run.sh finds those).
SYSTEM='^(linux-vdso|ld-linux|libc\.|libm\.|libpthread|libdl\.|librt\.|libcuda|libcudart|libcublas|libnccl)'
find "$B/bin" "$B/openmpi" -type f \( -perm -u+x -o -name '*.so' \) |
  while read -r file; do
    ldd "$file" 2>/dev/null | awk '$3 ~ /^\// {print $1, $3}' || true
  done | sort -u | while read -r soname path; do
  if ! [[ $soname =~ $SYSTEM ]]; then
    cp -L "$path" "$B/lib/$soname"
  fi
done

case "$OUT" in
*.gz) tar -czf "$OUT" -C "$STAGE" zest-gpu-bundle ;;
*) tar -cf "$OUT" -C "$STAGE" zest-gpu-bundle ;;
esac
BYTES=$(stat -c %s "$OUT")
echo "gpu-bundle: $OUT: $BYTES bytes ($((BYTES / 1048576)) MiB)"
if [ "$BYTES" -gt $((64 << 20)) ]; then
  echo "error: the bundle is over 64 MiB" >&2
  exit 1
fi
