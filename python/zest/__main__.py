"""zest train FILE.py:FACTORY --nproc N [options] [zestc options]
zest plan FILE.py:FACTORY --nproc N [zestc options]

`train` imports the model the factory returns (zest-import), compiles its
training step for N ranks (zestc; options zest does not know, such as
--strategy=..., --memory-budget=... or --leaf-classes=..., pass through to
zestc), splits the initial weights into shards, runs the ranks under
mpirun (with --oversubscribe when they outnumber the cores, unless a
--hostfile is given, and --allow-run-as-root as root), resumes from the
newest checkpoint in --save when there is one, and exports a PyTorch state
dict (--export). The imported model and the compiled step are cached (by a
hash of the model file, the options and the tools), so a second run starts
at once. `plan` prints zestc's report (memory plan, cost model, the
schedule chosen under --memory-budget) without running anything.
"""

import argparse
import sys

from zest_import.errors import ZestImportError

from .tools import LaunchError

# Options of the executable (runtime/trainer), forwarded as given.
DRIVER_OPTIONS = {
    "--lr": "peak learning rate",
    "--lr-schedule": "constant or cosine",
    "--warmup-steps": "linear warm-up steps",
    "--schedule-steps": "steps the schedule spans",
    "--min-lr": "cosine floor",
    "--weight-decay": "SGD L2 or AdamW decoupled decay",
    "--momentum": "SGD momentum",
    "--beta1": "AdamW beta1",
    "--beta2": "AdamW beta2",
    "--eps": "AdamW epsilon",
    "--accum": "micro-batches per rank and step",
    "--seed": "parameter and random-stream seed",
    "--keep": "checkpoints kept with --save-every",
    "--trace": "Chrome trace FILE (FILE.rankR.json per rank)",
    "--timeout": "seconds a collective may wait before all ranks stop",
}


def parser():
    top = argparse.ArgumentParser(
        prog="zest",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = top.add_subparsers(dest="command", required=True)
    for name, summary in (
        ("train", "import, compile, run on N ranks, export"),
        ("plan", "print the memory plan and predicted step time"),
    ):
        sub = commands.add_parser(
            name,
            help=summary,
            description=summary,
            epilog="Any other option goes to zestc (build/bin/zestc --help "
            "lists them), e.g. --strategy=shard-grad-op, --prefetch=1, "
            "--memory-budget=2GiB, --leaf-classes=LlamaDecoderLayer, "
            "--optimizer=adamw, --machine=h100-nvlink.",
        )
        sub.add_argument(
            "factory",
            metavar="FILE.py:FACTORY",
            help="a function returning (model, loss_fn, "
            "example_batch), as for zest-import",
        )
        sub.add_argument(
            "--nproc",
            type=int,
            default=1,
            metavar="N",
            help="ranks (the world size; 1)",
        )
        sub.add_argument(
            "--cache-dir",
            metavar="DIR",
            help="compile cache (ZEST_CACHE_DIR, else " "~/.cache/zest)",
        )
        sub.add_argument(
            "--shapes-only",
            action="store_true",
            help="import without materializing weights "
            "(zest plan of a model larger than this machine)",
        )
        sub.add_argument(
            "--import-arg",
            dest="import_args",
            action="append",
            default=[],
            metavar="ARG",
            help="passed to zest-import (e.g. " "--import-arg=--attention=math)",
        )
        if name == "train":
            add_train_options(sub)
    drawing = commands.add_parser(
        "plot",
        help="draw a step's memory and timeline (HTML, PNG)",
        description="One step's memory (measured, and the plan's "
        "prediction) and its compute, waits and transfers, from rank 0's "
        "trace (--trace) and zestc's --report-json, as a self-contained "
        "HTML page and, through headless Chromium, a PNG.",
    )
    drawing.add_argument(
        "trace", metavar="TRACE.json", help="rank 0's trace (FILE.rank0.json)"
    )
    drawing.add_argument(
        "--report", metavar="REPORT.json", help="zestc --report-json of the step"
    )
    drawing.add_argument("-o", "--output", required=True, metavar="OUT.html")
    drawing.add_argument("--png", metavar="OUT.png")
    return top


def add_train_options(sub):
    sub.add_argument(
        "--steps",
        type=int,
        default=10,
        help="train until this step (10), counting the steps "
        "of a checkpoint resumed from",
    )
    sub.add_argument(
        "--data",
        metavar="FILE",
        help="samples as the executable reads them (raw, "
        "A.npy[,B.npy] or X.safetensors); default: random "
        "samples shaped like the example batch",
    )
    sub.add_argument(
        "--tokens",
        metavar="FILE",
        help="a token stream (raw uint16 .bin as nanoGPT writes it, or a 1-D "
        ".npy of uint16/uint32/int32/int64): each sample a window of the "
        "example batch's length (ids, and the targets one token on), at "
        "seeded offsets, each rank's disjoint; ids are checked against the "
        "model's vocabulary before the run",
    )
    sub.add_argument(
        "--eval-tokens",
        metavar="FILE",
        help="a token stream to evaluate on: the model's loss in eval mode "
        "(no gradients) on --eval-batches fixed global batches of its "
        "windows, averaged over the ranks, printed as 'eval step N loss X'",
    )
    sub.add_argument(
        "--eval-every",
        metavar="N",
        help="with --eval-tokens: evaluate every N steps (default: after the " "last)",
    )
    sub.add_argument(
        "--eval-batches",
        metavar="K",
        help="with --eval-tokens: global batches evaluated (4)",
    )
    sub.add_argument(
        "--samples", type=int, default=64, help="random samples without --data (64)"
    )
    sub.add_argument(
        "--save",
        metavar="DIR",
        help="checkpoints (DIR/step-N, DIR/latest); a run " "resumes from DIR/latest",
    )
    sub.add_argument(
        "--save-every",
        type=int,
        metavar="N",
        help="checkpoint every N steps (default: at the end)",
    )
    sub.add_argument(
        "--export",
        metavar="OUT.pt",
        help="write the trained PyTorch state dict " "(.pt or .safetensors)",
    )
    sub.add_argument(
        "--log-dir",
        metavar="DIR",
        help="each step's loss, learning rate, tokens/s, step time, "
        "communication wait and pool peak in DIR/metrics.jsonl and as "
        "TensorBoard scalars (DIR's event files)",
    )
    sub.add_argument(
        "--export-hf",
        metavar="DIR",
        help="write the trained transformers model with save_pretrained "
        "(config and safetensors) for from_pretrained",
    )
    sub.add_argument(
        "--init-from",
        metavar="PATH",
        help="start from these weights (a save_pretrained folder, .pt or "
        ".safetensors state dict), loaded strictly by name, instead of the "
        "factory's",
    )
    sub.add_argument(
        "--hostfile", metavar="FILE", help="mpirun's hostfile (otherwise this machine)"
    )
    sub.add_argument(
        "--plot",
        metavar="OUT.html",
        help="draw the last step (memory, timeline, units; zest plot) from "
        "a trace of the run",
    )
    sub.add_argument(
        "--png", metavar="OUT.png", help="with --plot: a PNG too (headless Chromium)"
    )
    for flag, text in DRIVER_OPTIONS.items():
        sub.add_argument(flag, help=text)


def plot_command(args, rest):
    from .plot import plot

    if rest:
        print(f"zest: error: unexpected argument '{rest[0]}'", file=sys.stderr)
        return 2
    try:
        plot(args)
    except LaunchError as error:
        print(f"zest: error: {error}", file=sys.stderr)
        return 1
    return 0


def main(argv=None):
    # Our lines interleave with the tools' output in order, also in a pipe.
    sys.stdout.reconfigure(line_buffering=True)
    args, rest = parser().parse_known_args(argv)
    if args.command == "plot":
        return plot_command(args, rest)
    if getattr(args, "tokens", None) and args.data:
        print(
            "zest: error: --tokens and --data are two data sources; give one",
            file=sys.stderr,
        )
        return 2
    if args.nproc < 1:
        print("zest: error: --nproc must be at least 1", file=sys.stderr)
        return 2
    # What zest does not know goes to zestc: options, each maybe followed
    # by its value (`--prefetch 1`); a word after anything else is a slip.
    for before, arg in zip([None] + rest, rest):
        if not arg.startswith("-") and (
            before is None or not before.startswith("-") or "=" in before
        ):
            print(f"zest: error: unexpected argument '{arg}'", file=sys.stderr)
            return 2
    args.zestc_args = rest
    if getattr(args, "eval_tokens", None):
        # The evaluation runs the import's forward entry (NAME_forward).
        args.import_args = args.import_args + ["--forward"]
    elif getattr(args, "eval_every", None) or getattr(args, "eval_batches", None):
        print(
            "zest: error: --eval-every and --eval-batches need --eval-tokens FILE",
            file=sys.stderr,
        )
        return 2
    if args.command == "train":
        args.run_args = []
        for flag in DRIVER_OPTIONS:
            value = getattr(args, flag[2:].replace("-", "_"))
            if value is not None:
                args.run_args += [flag, value]
    from . import launcher

    try:
        if args.command == "train":
            launcher.train(args)
        else:
            launcher.plan(args)
    except (LaunchError, ZestImportError) as error:
        print(f"zest: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("zest: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
