#!/usr/bin/env python3
"""The PyTorch twin of examples/gen/transformer_block.py's stacks, for
bench/vs-pytorch/run.sh: the same parameters (by state_dict name), formulas
(pre-LayerNorm, single-head attention, tanh-GELU MLP, MSE loss), weights (a
consolidated Zest checkpoint) and data file (samples of x then y, f32).

  model.py data  --out FILE --samples N --seq T --dim D [--seed S]
  model.py eager --weights W --data FILE --layers L --dim D --batch B --seq T
                 --steps S [--optimizer sgd|adamw] [--lr F]
  model.py fsdp2 (same options) --world-size W

Prints `step N loss L` lines and one summary line with the median step time
and the peak resident memory above the process base (after `import torch`
and a warm-up of every op kind on tiny tensors, before the model exists),
like the Zest executable's summary.
"""
import argparse
import math
import os
import resource
import statistics
import time


def warm_up():
    """Runs each kind of op once on tiny tensors, so that the libraries and
    kernels PyTorch loads lazily count as the process base, not the model."""
    import torch
    from torch import nn

    layer = nn.Sequential(nn.LayerNorm(8), nn.Linear(8, 8), nn.GELU("tanh"))
    x = torch.randn(2, 8, 8)
    y = torch.softmax(layer(x) @ x.transpose(-1, -2), dim=-1)
    nn.functional.mse_loss(y, torch.zeros_like(y)).backward()
    for opt in (torch.optim.SGD, torch.optim.AdamW):
        opt(layer.parameters(), lr=0.1).step()


def resident_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_resident_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def write_data(args):
    import numpy as np

    rng = np.random.default_rng(args.seed)
    samples = rng.uniform(-1, 1, size=(args.samples, 2 * args.seq * args.dim))
    samples.astype("<f4").tofile(args.out)


def build(args):
    import torch
    from torch import nn

    class Attention(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)

        def forward(self, a):
            q, k, v = self.qkv(a).chunk(3, dim=-1)
            scores = q @ k.transpose(-1, -2) / math.sqrt(a.shape[-1])
            return self.proj(torch.softmax(scores, dim=-1) @ v)

    class MLP(nn.Module):
        def __init__(self, d, f):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(d, f), nn.Linear(f, d)

        def forward(self, a):
            return self.fc2(nn.functional.gelu(self.fc1(a), approximate="tanh"))

    class Block(nn.Module):
        def __init__(self, d, f):
            super().__init__()
            self.ln1, self.attn = nn.LayerNorm(d), Attention(d)
            self.ln2, self.mlp = nn.LayerNorm(d), MLP(d, f)

        def forward(self, x):
            h = x + self.attn(self.ln1(x))
            return h + self.mlp(self.ln2(h))

    class Stack(nn.Module):
        def __init__(self, layers, d, f):
            super().__init__()
            self.layers = nn.ModuleList(Block(d, f) for _ in range(layers))

        def forward(self, x):
            for block in self.layers:
                x = block(x)
            return x

    model = Stack(args.layers, args.dim, 4 * args.dim)
    if args.weights:
        from safetensors.torch import load_file

        state = load_file(args.weights)
        if args.layers == 1:
            state = {k.replace("block.", "layers.0.", 1): v for k, v in state.items()}
        model.load_state_dict(state)
    return model


def batches(args, rank=0, world=1):
    import numpy as np
    import torch

    data = np.fromfile(args.data, dtype="<f4").reshape(-1, 2, args.seq, args.dim)
    step = 0
    while True:
        first = (step * world + rank) * args.batch
        index = [(first + s) % len(data) for s in range(args.batch)]
        chunk = torch.from_numpy(data[index])
        yield chunk[:, 0].contiguous(), chunk[:, 1].contiguous()
        step += 1


def train(args, model, rank=0, world=1, barrier=lambda: None):
    import torch

    if args.optimizer == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    times = []
    data = batches(args, rank, world)
    cuda = args.device == "cuda"
    for step in range(args.steps):
        x, y = next(data)
        barrier()
        start = time.perf_counter()
        # On a GPU the batch's upload counts, as Zest's step uploads it.
        x, y = x.to(args.device), y.to(args.device)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
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


def summary(times, base):
    # The first step warms up allocators and caches, as in Zest's summary.
    median = statistics.median(times[1:] if len(times) > 1 else times)
    print(
        f"summary: step time {median * 1000:.3f} ms, peak RSS above base "
        f"bytes per rank {peak_resident_bytes() - base}",
        flush=True,
    )


def eager(args):
    import torch

    torch.set_num_threads(1)
    warm_up()
    base = resident_bytes()
    model = build(args)
    if args.device == "cuda":
        # f32 products without TF32, as Zest's cuBLASLt products.
        torch.backends.cuda.matmul.allow_tf32 = False
        model = model.to("cuda")
    summary(train(args, model), base)


def start_rank(rank, args):
    """One thread, the warm-up and the gloo group of an FSDP2 rank; returns
    the resident bytes before the model exists."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    warm_up()
    base = resident_bytes()
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{args.port}",
        rank=rank,
        world_size=args.world_size,
    )
    return base


def fsdp2_worker(rank, args):
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    base = start_rank(rank, args)
    model = build(args)
    for block in model.layers:
        fully_shard(block)
    fully_shard(model)
    times = train(args, model, rank, args.world_size, dist.barrier)
    if rank == 0:
        summary(times, base)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["data", "eager", "fsdp2"])
    parser.add_argument("--out")
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--weights")
    parser.add_argument("--data")
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=4)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--optimizer", default="sgd")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--port", type=int, default=29517)
    args = parser.parse_args()
    if args.mode == "data":
        write_data(args)
    elif args.mode == "eager":
        eager(args)
    else:
        import torch.multiprocessing as mp

        mp.spawn(fsdp2_worker, args=(args,), nprocs=args.world_size)


if __name__ == "__main__":
    main()
