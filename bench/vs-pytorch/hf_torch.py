#!/usr/bin/env python3
"""PyTorch's side of bench/vs-pytorch/hf.sh: a zest-import factory's model
(FILE.py:FACTORY) trained with SGD from the same weights on the same samples
as the Zest executable, in eager PyTorch on one rank or under FSDP2 (gloo,
`fully_shard` per decoder layer and the root) on several.

  hf_torch.py eager FACTORY --weights W --data D --steps S [--lr LR]
      [--device cuda]   (on a GPU, f32 without TF32; the GPU bundle's side)
      [--compile]       (the model under torch.compile, inductor)
  hf_torch.py fsdp2 FACTORY --weights W --data D --steps S --world-size N
  ... --checkpoint: each decoder layer's forward recomputed in the backward

Step k on rank r reads the micro-batch at sample (k N + r) B, as the
executable does with --accum 1. Prints `step N loss L` lines and the summary
line of bench/vs-pytorch/model.py (median step time, the first step
excluded; peak RSS above the base after `import torch` and a warm-up) and
the step's model FLOPs (6 N per token for N parameters, plus attention's
12 L D S per token: PaLM's count, which llm.c's MFU uses).
Run with PYTHONPATH=python (the zest_import package) in the project venv.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import resident_bytes, start_rank, summary, warm_up  # noqa: E402


def load(args):
    """The factory's model with the weights W, its loss and samples."""
    import torch
    from safetensors.torch import load_file

    from zest_import import load_factory
    from zest_import.reference import read_samples

    model, loss_fn, batch = load_factory(args.factory)
    weights = load_file(args.weights)
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.copy_(weights[name])
    model.train()
    return model, loss_fn, read_samples(args.data, batch), batch[0].shape[0]


def model_flops(model, tokens, seq):
    """A training step's model FLOPs: 6 N + 12 L D S per token (N
    parameters, L layers, D the model width, S the sequence)."""
    config = model.config
    layers = getattr(config, "num_hidden_layers", None) or config.n_layer
    width = getattr(config, "hidden_size", None) or config.n_embd
    params = sum(p.numel() for p in model.parameters())
    return tokens * (6 * params + 12 * layers * width * seq)


def block_classes(model):
    """The decoder layer classes FSDP users wrap (transformers' own list)."""
    return set(getattr(model, "_no_split_modules", None) or [])


def train(args, model, loss_fn, samples, micro, rank=0, world=1, barrier=lambda: None):
    import torch

    from zest_import.reference import micro_batch

    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    times = []
    cuda = args.device == "cuda"
    for step in range(args.steps):
        inputs = micro_batch(samples, (step * world + rank) * micro, micro)
        barrier()
        start = time.perf_counter()
        # On a GPU the batch's upload counts, as Zest's step uploads it.
        inputs = [tensor.to(args.device) for tensor in inputs]
        loss = loss_fn(model, *inputs)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if cuda:
            torch.cuda.synchronize()
        barrier()
        times.append(time.perf_counter() - start)
        if world > 1:
            loss = loss.detach().clone()
            torch.distributed.all_reduce(loss)
            loss /= world
        if rank == 0:
            print(f"step {step + 1} loss {loss.item():.9g}", flush=True)
    return times


def checkpoint_blocks(model, args):
    """With --checkpoint, every decoder layer recomputes its forward in the
    backward (transformers' gradient checkpointing, non-reentrant
    torch.utils.checkpoint per layer, as torchtitan's full AC)."""
    if args.checkpoint:
        model.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": False}
        )


def eager(args):
    import torch

    torch.set_num_threads(1)
    warm_up()
    base = resident_bytes()
    model, loss_fn, samples, micro = load(args)
    checkpoint_blocks(model, args)
    if args.device == "cuda":
        # f32 products without TF32, as Zest's cuBLASLt products.
        torch.backends.cuda.matmul.allow_tf32 = False
        model = model.to("cuda")
    seq = samples[0][0].shape[-1]
    print(f"model flops per step {model_flops(model, micro * seq, seq)}")
    if args.compile:
        model = torch.compile(model)
    summary(train(args, model, loss_fn, samples, micro), base)
    if args.device == "cuda":
        print(
            "device memory: peak allocated bytes "
            f"{torch.cuda.max_memory_allocated()}",
            flush=True,
        )


def fsdp2_worker(rank, args):
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    base = start_rank(rank, args)
    model, loss_fn, samples, micro = load(args)
    checkpoint_blocks(model, args)
    classes = block_classes(model)
    blocks = [m for m in model.modules() if type(m).__name__ in classes]
    if not blocks:
        raise SystemExit(f"{args.factory}: no decoder layer class to wrap")
    for block in blocks:
        fully_shard(block)
    fully_shard(model)
    times = train(
        args, model, loss_fn, samples, micro, rank, args.world_size, dist.barrier
    )
    if rank == 0:
        summary(times, base)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["eager", "fsdp2"])
    parser.add_argument("factory")
    parser.add_argument("--weights", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--port", type=int, default=29519)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument(
        "--compile", action="store_true", help="torch.compile the model (eager)"
    )
    parser.add_argument(
        "--checkpoint",
        action="store_true",
        help="recompute each decoder layer's forward in the backward",
    )
    args = parser.parse_args()
    if args.mode == "eager":
        eager(args)
    else:
        import torch.multiprocessing as mp

        mp.spawn(fsdp2_worker, args=(args,), nprocs=args.world_size)


if __name__ == "__main__":
    main()
