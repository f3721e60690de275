#!/usr/bin/env python3
"""Replays a training run of a compiled executable with a plain reference
optimizer and compares the results (ctypes and the standard library only).

  optim_reference.py libgrad.so START_CKPT END_CKPT RUN_LOG DATA_FILE \
      --optimizer sgd|adamw [--momentum F] [--nesterov] [hyperparameters]

libgrad.so is the same model compiled with --optimizer=none --emit=shared at
world size 1: it returns the loss and the gradient of every unit. The run
(world size 1) started from START_CKPT (saved with --steps 0), trained on
DATA_FILE and saved END_CKPT; its log has `step N loss L` lines. The
reference recomputes every step in float64 with torch.optim's formulas
(SGD with L2 weight decay, momentum, Nesterov; AdamW with decoupled weight
decay and bias corrections) and the driver's learning-rate schedule
(linear warm-up, then constant or cosine), and checks parameters, optimizer
state and losses.
"""
import argparse
import ctypes
import json
import math
import re
import struct
import sys

from gradcheck import Buffer, parse_descriptor


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = data[8 + size + begin : 8 + size + end]
        tensors[name] = list(struct.unpack(f"<{len(raw) // 4}f", raw))
    return tensors


def rank_file(ckpt):
    return f"{ckpt}/rank-00000-of-00001.safetensors"


def learning_rate(args, step):
    t = step + 1
    if args.warmup_steps > 0 and t <= args.warmup_steps:
        return args.lr * t / args.warmup_steps
    if args.lr_schedule != "cosine":
        return args.lr
    span = max(1, args.schedule_steps - args.warmup_steps)
    progress = min(1.0, (t - args.warmup_steps) / span)
    return args.min_lr + (args.lr - args.min_lr) * 0.5 * (
        1 + math.cos(math.pi * progress)
    )


def main():
    parser = argparse.ArgumentParser()
    for name in ("library", "start", "end", "log", "data"):
        parser.add_argument(name)
    parser.add_argument("--optimizer", required=True)
    parser.add_argument("--momentum", type=float, default=0.0)
    parser.add_argument("--nesterov", action="store_true")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--beta1", type=float, default=0.9)
    parser.add_argument("--beta2", type=float, default=0.999)
    parser.add_argument("--eps", type=float, default=1e-8)
    parser.add_argument("--lr-schedule", default="constant")
    parser.add_argument("--warmup-steps", type=int, default=0)
    parser.add_argument("--schedule-steps", type=int, default=0)
    parser.add_argument("--min-lr", type=float, default=0.0)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--accum", type=int, default=1)
    parser.add_argument("--clip-grad-norm", type=float, default=0.0)
    parser.add_argument("--tolerance", type=float, default=2e-5)
    args = parser.parse_args()
    if args.schedule_steps == 0:
        args.schedule_steps = args.steps

    lib = ctypes.CDLL(args.library, mode=ctypes.RTLD_GLOBAL)
    text = ctypes.cast(
        ctypes.addressof(ctypes.c_char.in_dll(lib, "zest_model_descriptor")),
        ctypes.c_char_p,
    ).value.decode()
    _, functions = parse_descriptor(text)
    fn = next(
        i for i, f in enumerate(functions) if any(r[0] == "loss" for r in f["results"])
    )
    function = functions[fn]
    entries = (ctypes.c_void_p * len(functions)).in_dll(lib, "zest_model_entries")
    step_fn = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p))(entries[fn])
    lib.zest_init(None, None)

    arg_buffers = [Buffer(spec) for _, _, spec in function["args"]]
    result_buffers = [Buffer(spec) for _, _, spec in function["results"]]
    pointers = (ctypes.c_void_p * (len(arg_buffers) + len(result_buffers)))(
        *[ctypes.addressof(b.descriptor) for b in arg_buffers + result_buffers]
    )

    # Parameters (float64 master copy) and optimizer state, per unit.
    start = read_safetensors(rank_file(args.start))
    units = [unit for kind, unit, _ in function["args"] if kind == "unit"]
    params = {u: list(start[u]) for u in units}
    states = {
        u: {
            name: [0.0] * len(params[u])
            for name in (
                ["exp_avg", "exp_avg_sq"]
                if args.optimizer == "adamw"
                else ["momentum_buffer"]
                if args.momentum
                else []
            )
        }
        for u in units
    }

    # Data: samples back to back, the data arguments' slices in order.
    data_args = [
        (i, spec)
        for i, (kind, _, spec) in enumerate(function["args"])
        if kind == "data"
    ]
    batch = data_args[0][1].shape[0]
    per_sample = [spec.numel // batch for _, spec in data_args]
    with open(args.data, "rb") as f:
        raw = f.read()
    floats = struct.unpack(f"<{len(raw) // 4}f", raw)
    sample_floats = sum(per_sample)
    count = len(floats) // sample_floats

    losses = []
    clipped = []  # whether each step's coefficient was below 1
    norms = []  # each step's global norm before clipping
    for step in range(args.steps):
        grad_sum = {u: [0.0] * len(params[u]) for u in units}
        loss = 0.0
        for a in range(args.accum):
            first = (step * args.accum + a) * batch
            for (index, spec), n in zip(data_args, per_sample):
                offset = sum(per_sample[: data_args.index((index, spec))])
                for s in range(batch):
                    base = ((first + s) % count) * sample_floats + offset
                    for j in range(n):
                        arg_buffers[index].values[s * n + j] = floats[base + j]
            for (kind, unit, _), buffer in zip(function["args"], arg_buffers):
                if kind == "unit":
                    for i, v in enumerate(params[unit]):
                        buffer.values[i] = v
            step_fn(pointers)
            for (kind, unit, _), buffer in zip(function["results"], result_buffers):
                if kind == "loss":
                    loss += buffer.values[0]
                elif kind == "grad":
                    g = grad_sum[unit]
                    for i in range(len(g)):
                        g[i] += buffer.values[i]
        losses.append(loss / args.accum)
        lr = learning_rate(args, step)
        t = step + 1
        # torch.nn.utils.clip_grad_norm_: one coefficient for all gradients.
        coef = 1.0
        if args.clip_grad_norm > 0:
            total = math.sqrt(
                sum((g / args.accum) ** 2 for u in units for g in grad_sum[u])
            )
            coef = min(1.0, args.clip_grad_norm / (total + 1e-6))
            clipped.append(coef < 1.0)
            norms.append(total)
        for u in units:
            p, st = params[u], states[u]
            for i in range(len(p)):
                g = grad_sum[u][i] / args.accum * coef
                if args.optimizer == "sgd":
                    d = g + args.weight_decay * p[i]
                    if args.momentum:
                        buf = st["momentum_buffer"]
                        buf[i] = args.momentum * buf[i] + d
                        d = d + args.momentum * buf[i] if args.nesterov else buf[i]
                    p[i] -= lr * d
                else:
                    m, v = st["exp_avg"], st["exp_avg_sq"]
                    p[i] *= 1 - lr * args.weight_decay
                    m[i] = args.beta1 * m[i] + (1 - args.beta1) * g
                    v[i] = args.beta2 * v[i] + (1 - args.beta2) * g * g
                    step_size = lr / (1 - args.beta1**t)
                    denom = math.sqrt(v[i]) / math.sqrt(1 - args.beta2**t) + args.eps
                    p[i] -= step_size * m[i] / denom
    lib.zest_finalize()

    end = read_safetensors(rank_file(args.end))
    worst, failures = 0.0, 0
    for u in units:
        checks = [(u, params[u])] + [
            (f"{u}.{name}", values) for name, values in states[u].items()
        ]
        for name, reference in checks:
            if name not in end:
                print(f"MISSING {name} in {args.end}")
                failures += 1
                continue
            for i, (want, got) in enumerate(zip(reference, end[name])):
                error = abs(want - got) / max(1.0, abs(want))
                worst = max(worst, error)
                if error > args.tolerance:
                    failures += 1
                    if failures <= 10:
                        print(
                            f"MISMATCH {name}[{i}]: reference {want:.9g}, "
                            f"compiled {got:.9g}"
                        )
    logged = [
        float(x)
        for x in re.findall(r"^step \d+ loss (\S+)$", open(args.log).read(), re.M)
    ]
    if len(logged) != len(losses):
        print(f"MISMATCH: {len(logged)} logged losses, {len(losses)} expected")
        failures += 1
    for i, (want, got) in enumerate(zip(losses, logged)):
        if abs(want - got) > args.tolerance * max(1.0, abs(want)):
            failures += 1
            print(
                f"MISMATCH loss of step {i + 1}: reference {want:.9g}, "
                f"compiled {got:.9g}"
            )
    if args.clip_grad_norm > 0:
        # The step returns its norm (the progress line's `grad norm G`).
        reported = [
            float(x)
            for x in re.findall(
                r"^progress: .* grad norm (\S+) lr", open(args.log).read(), re.M
            )
        ]
        if len(reported) != len(norms):
            print(f"MISMATCH: {len(reported)} gradient norms, {len(norms)} expected")
            failures += 1
        for i, (want, got) in enumerate(zip(norms, reported)):
            # The line prints 6 significant digits.
            if abs(want - got) > max(args.tolerance, 1e-5) * max(1.0, abs(want)):
                failures += 1
                print(
                    f"MISMATCH norm of step {i + 1}: reference {want:.9g}, "
                    f"compiled {got:.9g}"
                )
        print(
            f"optim-reference: clipped {sum(clipped)} of {len(clipped)} steps, "
            f"{len(reported)} gradient norms"
        )
    print(
        f"optim-reference: {args.optimizer}, {args.steps} steps, "
        f"{failures} mismatches, worst relative error {worst:.2e}"
    )
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
