#!/usr/bin/env bash
# Issue 44's mixture-of-experts benchmark: a Mixtral of 364M parameters
# (bench/vs-pytorch/hf_models.py:mixtral350m: 8 layers, D=768, 8 experts of
# SwiGLU 2048, top-2, vocab 32000) at 1 x 256 tokens per micro-batch, on
# hf.sh's protocol: Zest W=1 against eager PyTorch, Zest W=2 against FSDP2
# (fully_shard per decoder layer), the same weights and tokens, medians of
# REPS interleaved repetitions of step time and peak RSS, and the losses;
# and Zest W=2 with expert parallelism (--expert-parallel=2) beside them.
#   bench/vs-pytorch/moe.sh [build-dir]     (REPS=3 STEPS=6)
set -euo pipefail
cd "$(dirname "$0")/../.."
ZEST_BENCH_SEQ=${ZEST_BENCH_SEQ:-256} ZEST_BENCH_EP=${ZEST_BENCH_EP:-2} exec bench/vs-pytorch/hf.sh \
  "${1:-build}" mixtral350m
