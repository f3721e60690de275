# Sourced by the benchmark scripts: the environment every run shares.
# MPI as root where needed, the shared-memory transport, one thread per rank.
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OMPI_MCA_btl=self,vader
# Large messages are copied once, directly between the ranks (CMA), where
# the kernel allows it (Open MPI's default, what a user's mpirun gets);
# where a container forbids it, twice through a shared buffer.
if ! python3 "$(dirname "${BASH_SOURCE[0]}")/cma_probe.py"; then
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
fi
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

# The vocabulary of each model of bench/vs-pytorch/hf_models.py: the bound
# of the token ids its data is drawn from.
declare -A HF_VOCAB=([gpt2]=50257 [gpt2_bf16]=50257 [llama160m]=32000 [llama160m_bf16]=32000 [pythia160m]=50304
  [pythia160m_bf16]=50304 [llama1b]=128256 [llama1b_bf16]=128256
  [llama8b]=128256 [mixtral350m]=32000)

# The median of the numbers on standard input, one per line.
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

# The figure after "<label> " on a summary line: field "step time" "$line".
field() { sed -nE "s/.*$1 ([0-9.]+).*/\1/p" <<<"$2" | tail -1; }
# The median of a summary field over the REPS repetitions DIR/RUN.<r>.log:
# median_of_runs DIR RUN "step time".
median_of_runs() {
  for r in $(seq "$REPS"); do field "$3" "$(grep summary "$1/$2.$r.log")"; done |
    median
}
# The first and last losses of a run's log.
losses() { grep '^step ' "$1" | sed -n '1p;$p' | awk '{printf "%s ", $4}'; }

# The generated transformer stack DIR/model.mlir: layers, dim (hidden 4x),
# batch, sequence length.
stack_model() {
  python3 examples/gen/transformer_block.py --layers "$2" --dim "$3" \
    --hidden $(($3 * 4)) --batch "$4" --seq "$5" >"$1/model.mlir"
}

# For PyTorch's side of a comparison: DIR/data.bin (64 samples of sequence
# length $3, dim $4) and DIR/weights.safetensors, the seeded initial
# weights of Zest executable $2, consolidated by FQN. Needs $PY and $CKPT.
stack_data_and_weights() {
  "$PY" bench/vs-pytorch/model.py data --out "$1/data.bin" --samples 64 \
    --seq "$3" --dim "$4"
  rm -rf "$1/ck0"
  mpirun --oversubscribe -np 1 "$2" --steps 0 --save "$1/ck0" >/dev/null
  "$CKPT" consolidate "$1/ck0" "$1/weights.safetensors" >/dev/null
}
