"""PyTorch eager reference runs for imported models.

  python -m zest_import.reference data FILE.py:FACTORY -o OUT
        [--samples N] [--seed S] [--int-bound K]
      random samples shaped like the factory's example batch, in a format
      the executable's --data reads: OUT = A.npy[,B.npy...] (one NumPy file
      per batch argument), X.safetensors (tensors "0", "1", ...) or any
      other name for raw samples (per sample, each batch argument's slice,
      row-major, little-endian).
  python -m zest_import.reference train FILE.py:FACTORY --weights W
        --data data.bin --steps N --lr LR [--global-batch G]
      trains the factory's model in eager PyTorch with plain SGD from the
      weights W (safetensors keyed by FQN, e.g. a consolidated Zest
      checkpoint) on the samples the executable reads: step k takes samples
      [k G, (k + 1) G) (mod their count) in micro-batches of the example
      batch size, averaging their losses and gradients; prints "step k loss
      X" as the executable does; --save writes the trained parameters.
      Dropout draws from the executable's random streams under --seed S
      (zest_import.rng), so both drop the same elements.
  python -m zest_import.reference eval FILE.py:FACTORY --weights W
        --data D --steps N --global-batch G
      the checksum a forward-only run of zest-import --forward's entry
      prints: the sum of the eval-mode losses of all micro-batches
      (--start-step S: from step S on, as a run that loaded a checkpoint
      of step S reads the data).
  python -m zest_import.reference check-state-dict FILE.py:FACTORY W
      loads W (.safetensors or .pt) into the factory's model with load_state_dict(strict=True).
"""

import argparse
import sys

from . import load_factory, rng, run_command
from .errors import ZestImportError


def per_sample(batch):
    """(shape without the batch dimension, dtype) of each batch argument."""
    return [(tuple(t.shape[1:]), t.dtype) for t in batch]


def _columns(batch, samples, seed, int_bound):
    """Random samples shaped like `batch`: one [samples, ...] array per
    batch argument."""
    import numpy as np
    import torch

    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(samples):
        row = []
        for shape, dtype in per_sample(batch):
            if dtype.is_floating_point:
                values = rng.uniform(-1, 1, size=shape)
            else:
                values = rng.integers(0, int_bound, size=shape)
            row.append(torch.from_numpy(np.asarray(values)).to(dtype))
        rows.append(row)
    return [
        torch.stack([row[i] for row in rows]).contiguous() for i in range(len(batch))
    ]


def _paths(spec, count):
    paths = spec.split(",")
    if len(paths) != count:
        raise ZestImportError(
            f"'{spec}' names {len(paths)} .npy file(s) for "
            f"{count} batch argument(s)"
        )
    return paths


def write_data(args):
    """Writes in the format the output's name says: A.npy[,B.npy] (one per
    batch argument), X.safetensors (tensors "0", "1", ...) or raw."""
    _, _, batch = load_factory(args.factory)
    write_samples(batch, args.output, args.samples, args.seed, args.int_bound)


def write_samples(batch, output, samples, seed, int_bound):
    """Random samples shaped like `batch` into `output` (its name says the
    format, as for the data command)."""
    columns = _columns(batch, samples, seed, int_bound)
    if output.endswith(".npy"):
        import numpy as np

        for path, column in zip(_paths(output, len(columns)), columns):
            np.save(path, column.numpy())
    elif output.endswith(".safetensors"):
        from safetensors.torch import save_file

        save_file({str(i): c for i, c in enumerate(columns)}, output)
    else:
        with open(output, "wb") as out:
            for s in range(samples):
                for column in columns:
                    out.write(column[s].numpy().tobytes())


def read_samples(path, batch):
    """[[tensor per batch argument] per sample] from a data file in any of
    write_data's formats."""
    import numpy as np
    import torch

    if path.endswith(".npy"):
        columns = [torch.from_numpy(np.load(p)) for p in _paths(path, len(batch))]
        return [list(parts) for parts in zip(*columns)]
    if path.endswith(".safetensors"):
        from safetensors.torch import load_file

        tensors = load_file(path)
        columns = [tensors[str(i)] for i in range(len(batch))]
        return [list(parts) for parts in zip(*columns)]
    layout = per_sample(batch)
    sizes = [
        int(np.prod(shape, dtype=np.int64))
        * torch.empty((), dtype=dtype).element_size()
        for shape, dtype in layout
    ]
    raw = open(path, "rb").read()
    sample_bytes = sum(sizes)
    if sample_bytes == 0 or len(raw) % sample_bytes:
        raise ZestImportError(
            f"'{path}' does not hold whole samples of {sample_bytes} bytes"
        )
    samples = []
    for start in range(0, len(raw), sample_bytes):
        parts, offset = [], start
        for (shape, dtype), size in zip(layout, sizes):
            chunk = bytearray(raw[offset : offset + size])
            parts.append(torch.frombuffer(chunk, dtype=dtype).reshape(shape))
            offset += size
        samples.append(parts)
    return samples


def micro_batch(samples, first, micro):
    """The batch arguments of samples [first, first + micro) (mod their
    count), as the executable reads them."""
    import torch

    chosen = [samples[(first + s) % len(samples)] for s in range(micro)]
    return [
        torch.stack([sample[i] for sample in chosen]) for i in range(len(chosen[0]))
    ]


def train(args):
    import torch
    from safetensors.torch import load_file

    torch.manual_seed(0)
    model, loss_fn, batch = load_factory(args.factory)
    weights = load_file(args.weights)
    params = dict(model.named_parameters())
    missing = sorted(set(params) - set(weights))
    if missing:
        raise ZestImportError(f"'{args.weights}' lacks {', '.join(missing)}")
    with torch.no_grad():
        for name, param in params.items():
            param.copy_(weights[name])
    samples = read_samples(args.data, batch)
    micro = batch[0].shape[0]
    global_batch = args.global_batch or micro
    if global_batch % micro:
        raise ZestImportError(
            f"--global-batch {global_batch} is not a multiple "
            f"of the example batch ({micro})"
        )
    accum = global_batch // micro
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    model.train()
    for step in range(args.steps):
        total = 0.0
        for a in range(accum):
            first = step * global_batch + a * micro
            inputs = micro_batch(samples, first, micro)
            streams = torch.tensor(
                [rng.signed(rng.step_key(args.seed, step)), a * micro],
                dtype=torch.int64,
            )
            with rng.EagerStreams(streams, micro):
                loss = loss_fn(model, *inputs)
            (loss / accum).backward()
            total += loss.item()
        optimizer.step()
        optimizer.zero_grad()
        print(f"step {step + 1} loss {total / accum:.9g}", flush=True)
    if args.save:
        from safetensors.torch import save_file

        save_file(
            {
                name: param.detach().contiguous()
                for name, param in model.named_parameters()
            },
            args.save,
        )


def evaluate(args):
    """The checksum a forward-only run of the `--forward` entry prints: the
    sum of the eval-mode losses of every micro-batch of every step."""
    import torch
    from safetensors.torch import load_file

    model, loss_fn, batch = load_factory(args.factory)
    model.load_state_dict(load_file(args.weights), strict=False)
    samples = read_samples(args.data, batch)
    micro = batch[0].shape[0]
    model.eval()
    total = 0.0
    with torch.no_grad():
        per_step = args.global_batch // micro
        for m in range(
            args.start_step * per_step, (args.start_step + args.steps) * per_step
        ):
            inputs = micro_batch(samples, m * micro, micro)
            total += loss_fn(model, *inputs).item()
    print(f"checksum {total:.9g}")


def check_state_dict(args):
    from .weights import load_state_dict

    model, _, _ = load_factory(args.factory)
    try:
        model.load_state_dict(load_state_dict(args.weights), strict=True)
    except RuntimeError as error:
        raise ZestImportError(str(error).strip())
    print(
        f"{args.weights}: load_state_dict(strict=True) took "
        f"{len(model.state_dict())} tensors"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="zest_import.reference",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    data = commands.add_parser("data")
    data.add_argument("factory")
    data.add_argument("-o", "--output", required=True)
    data.add_argument("--samples", type=int, default=64)
    data.add_argument("--seed", type=int, default=0)
    data.add_argument("--int-bound", type=int, default=16)
    run, evaluation = commands.add_parser("train"), commands.add_parser("eval")
    for runner in (run, evaluation):  # a model, weights and samples to run
        runner.add_argument("factory")
        runner.add_argument("--weights", required=True)
        runner.add_argument("--data", required=True)
        runner.add_argument("--steps", type=int, required=True)
        runner.add_argument(
            "--global-batch", type=int, required=runner is evaluation, default=0
        )
    run.add_argument("--lr", type=float, required=True)
    run.add_argument(
        "--seed", type=int, default=0, help="the executable's --seed (random streams)"
    )
    run.add_argument("--save", help="write the trained parameters here")
    evaluation.add_argument(
        "--start-step",
        type=int,
        default=0,
        help="the step the run starts at (a loaded checkpoint's)",
    )
    check = commands.add_parser("check-state-dict")
    check.add_argument("factory")
    check.add_argument("weights")
    return run_command(
        "zest_import.reference",
        {
            "data": write_data,
            "train": train,
            "eval": evaluate,
            "check-state-dict": check_state_dict,
        },
        parser.parse_args(argv),
    )


if __name__ == "__main__":
    sys.exit(main())
