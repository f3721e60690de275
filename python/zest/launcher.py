"""`zest train` and `zest plan`: the six steps of training a PyTorch model
with Zest (import, compile, split the initial weights, make data, run the
ranks under mpirun, export) as one command, with the imported model and the
compiled step cached."""

import json
import os
import re
import shutil
import subprocess
import tempfile

from .cache import Entry, cache_root, key_of, tools_version, write_sources
from .progress import Display
from .tools import LaunchError, binary, mpirun, python_tool, run


def factory_file(spec):
    path, sep, name = spec.rpartition(":")
    if not sep or not path.endswith(".py") or not name:
        raise LaunchError(f"'{spec}' is not FILE.py:FACTORY")
    if not os.path.isfile(path):
        raise LaunchError(f"'{path}' does not exist (from '{spec}')")
    return path, name


def lookup(cache, kind, what, **fields):
    """The cache entry of `kind` made from `fields` and the tools; says so
    when it is there."""
    fields["tools"] = tools_version()
    entry = Entry(cache, kind, key_of(**fields), fields)
    if entry.exists():
        print(f"zest: {what} from the cache ({entry.path})")
    elif changed := entry.changed_sources():
        print(f"zest: {', '.join(changed)} changed since the {what} was made")
    return entry


def imported_objects(args, cache):
    """The IR and initial weights of a model given as Python objects
    (zest.train), imported in this process; cached by the IR's text."""
    from zest_import.__main__ import import_model

    model, loss_fn, batch = args.objects
    print("zest: tracing the model")
    text, weights = import_model(model, loss_fn, batch, None, False)
    entry = lookup(cache, "import", "imported model", ir=key_of(text=text))
    if not entry.exists():

        def make(folder):
            from safetensors.torch import save_file

            with open(os.path.join(folder, "model.mlir"), "w") as out:
                out.write(text)
            save_file(weights, os.path.join(folder, "init.safetensors"))

        entry.build(make)
    return entry


def imported(args, cache):
    """The model's IR and initial weights, imported once per model file,
    factory and import options."""
    if getattr(args, "objects", None):
        return imported_objects(args, cache)
    path, name = factory_file(args.factory)
    entry = lookup(
        cache,
        "import",
        "imported model",
        file_model=path,
        factory=name,
        import_args=args.import_args,
        shapes_only=args.shapes_only,
    )
    if entry.exists():
        return entry

    def make(folder):
        sources = os.path.join(folder, "sources.txt")
        command = python_tool(
            "zest_import",
            args.factory,
            "-o",
            os.path.join(folder, "model.mlir"),
            "--sources",
            sources,
        )
        if args.shapes_only:
            command.append("--shapes-only")
        else:
            command += ["--weights", os.path.join(folder, "init.safetensors")]
        run(command + list(args.import_args), "zest-import")
        with open(sources) as f:
            write_sources(folder, f.read().splitlines())

    print(f"zest: importing {args.factory}")
    entry.build(make)
    return entry


def compiled(args, model, cache):
    """The step compiled for `args.nproc` ranks with the zestc options, and
    the initial weights split into its shards."""
    entry = lookup(
        cache,
        "step",
        "compiled step",
        model=model.build_id(),
        world_size=args.nproc,
        zestc_args=args.zestc_args,
    )
    if entry.exists():
        return entry

    def make(folder):
        manifest = os.path.join(folder, "manifest.json")
        run(
            [
                binary("zestc"),
                model.file("model.mlir"),
                "-o",
                os.path.join(folder, "step"),
                f"--world-size={args.nproc}",
                f"--manifest={manifest}",
                f"--report-json={os.path.join(folder, 'report.json')}",
                *args.zestc_args,
            ],
            "zestc",
        )
        run(
            python_tool(
                "zest_import.weights",
                "split",
                model.file("init.safetensors"),
                manifest,
                os.path.join(folder, "init-ckpt"),
            ),
            "splitting the initial weights",
        )

    print(f"zest: compiling for {args.nproc} rank(s)")
    entry.build(make)
    return entry


def factory_objects(args):
    """(model, loss_fn, example_batch) of the factory (built again when the
    import came from the cache)."""
    if getattr(args, "objects", None):
        return args.objects
    if getattr(args, "factory_built", None) is None:
        from zest_import import load_factory

        args.factory_built = load_factory(args.factory)
    return args.factory_built


def example_batch(args):
    return factory_objects(args)[2]


def data_options(args, model, cache):
    """The executable's data options: --tokens (checked against the
    model's vocabulary first), --data, or cached random samples."""
    from .tokens import check_tokens

    streams = [getattr(args, "eval_tokens", None), getattr(args, "tokens", None)]
    vocab = model_vocabulary(args, model, cache) if any(streams) else None
    options = []
    if streams[0]:
        check_tokens(streams[0], vocab)
        options += ["--eval-tokens", streams[0]]
        for flag in ("eval_every", "eval_batches"):
            if getattr(args, flag, None):
                options += ["--" + flag.replace("_", "-"), getattr(args, flag)]
    if streams[1]:
        check_tokens(streams[1], vocab)
        options += ["--tokens", streams[1]]
    else:
        options += ["--data", args.data or synthetic_data(args, model, cache)]
    return options + (["--token-bound", str(vocab[1])] if vocab else [])


def model_vocabulary(args, model, cache):
    """tokens.vocabulary() of the factory's model, cached with the imported
    model: a second run on the same model need not build it (nor load
    PyTorch) to check its token streams."""
    fields = dict(model=model.build_id())
    entry = Entry(cache, "vocabulary", key_of(**fields), fields)
    if not entry.exists():

        def make(folder):
            from .tokens import vocabulary

            with open(os.path.join(folder, "vocabulary.json"), "w") as f:
                json.dump(vocabulary(factory_objects(args)[0]), f)

        entry.build(make)
    with open(entry.file("vocabulary.json")) as f:
        vocab = json.load(f)
    return tuple(vocab) if vocab else None


def synthetic_data(args, model, cache):
    """Random samples shaped like the example batch (integers below the
    largest in it plus one), cached with the imported model: for trying a
    model out."""
    fields = dict(model=model.build_id(), samples=args.samples)
    entry = Entry(cache, "data", key_of(**fields), fields)
    if not entry.exists():

        def make(folder):
            from zest_import.reference import write_samples

            batch = example_batch(args)
            bound = max(
                [int(t.max()) + 1 for t in batch if not t.dtype.is_floating_point] + [2]
            )
            print(
                f"zest: no --data: {args.samples} random samples shaped like the "
                f"example batch (integers below {bound})"
            )
            write_samples(
                batch, os.path.join(folder, "data.bin"), args.samples, 0, bound
            )

        entry.build(make)
    return entry.file("data.bin")


def steps_done(save):
    """Steps of the newest checkpoint in `save` (DIR/latest), or None."""
    latest = os.path.join(save, "latest")
    if not os.path.isfile(latest):
        return None
    with open(latest) as f:
        name = f.read().strip()
    match = re.fullmatch(r"step-(\d+)", name)
    if not match:
        raise LaunchError(f"'{latest}' names '{name}', not a step-N checkpoint")
    return int(match.group(1))


def mpirun_command(args):
    command = [mpirun(), "-np", str(args.nproc)]
    if args.hostfile:
        command += ["--hostfile", args.hostfile]
    elif args.nproc > (os.cpu_count() or 1):
        command.append("--oversubscribe")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-run-as-root")
    return command


def launch(command, log_dir=None):
    """Runs the ranks, their output shown as it comes (rank 0's progress
    redrawn in place on a terminal) and, with `log_dir`, each step's
    figures logged (metrics.py); returns rank 0's losses by step."""
    display = Display()
    metrics = None
    if log_dir:
        from .metrics import MetricsLog

        metrics = MetricsLog(log_dir)
    with subprocess.Popen(
        command + ["--progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    ) as ranks:
        for line in ranks.stdout:
            text = line.rstrip("\n")
            display.line(text)
            if metrics:
                metrics.line(text, display.losses)
    display.end_line()
    if metrics:
        metrics.close()
    if ranks.returncode != 0:
        raise LaunchError(f"the training run failed (exit {ranks.returncode})")
    return display.losses


def train(args, finish=None):
    """Trains; `finish(save)` runs on the checkpoint folder before a
    scratch one (no --save) goes. Returns the losses by step."""
    cache = cache_root(args.cache_dir)
    if args.shapes_only:
        raise LaunchError("--shapes-only has no weights to train (use zest plan)")
    model = imported(args, cache)
    step = compiled(args, model, cache)
    data = data_options(args, model, cache)
    save = args.save or tempfile.mkdtemp(prefix="zest-run-")
    try:
        return run_and_export(args, step, data, save, finish)
    finally:
        if not args.save:
            shutil.rmtree(save, ignore_errors=True)


def run_and_export(args, step, data, save, finish):
    """The run (resumed from `save`'s newest checkpoint if it has one, to
    --steps in all) and the export."""
    done = steps_done(save) or 0
    if done >= args.steps:
        print(f"zest: '{save}' already holds step {done} of {args.steps}")
        losses = {}
    else:
        load = save if done else initial_checkpoint(args, step, save)
        if done:
            print(f"zest: resuming from step {done} in '{save}'")
        every = args.save_every or args.steps
        command = mpirun_command(args) + [
            step.file("step"),
            "--steps",
            str(args.steps - done),
            *data,
            "--load",
            load,
            "--save",
            save,
            "--save-every",
            str(every),
            *args.run_args,
        ]
        if args.plot:
            command += ["--trace", os.path.join(save, "trace.json")]
        losses = launch(command, getattr(args, "log_dir", None))
        if args.plot:
            draw(args, step, save)
    export_hf = getattr(args, "export_hf", None)
    if args.export or export_hf:
        state = trained_state_dict(args, save)
    if args.export:
        from zest_import.weights import save_state_dict

        save_state_dict(state, args.export)
    if export_hf:
        from .hf import export_pretrained

        export_pretrained(factory_objects(args)[0], state, export_hf)
    if finish:
        finish(save)
    return losses


def draw(args, step, save):
    """zest plot of the run's last step, with the compiled step's report."""
    from argparse import Namespace

    from .plot import plot

    trace = "trace.rank0.json" if args.nproc > 1 else "trace.json"
    report = step.file("report.json")
    plot(
        Namespace(
            trace=os.path.join(save, trace),
            report=report if os.path.isfile(report) else None,
            output=args.plot,
            png=args.png,
        )
    )


def initial_checkpoint(args, step, save):
    """The sharded weights a new run starts from: the factory's, or
    --init-from's split for this step (in `save`)."""
    if not getattr(args, "init_from", None):
        return step.file("init-ckpt")
    from .hf import init_checkpoint

    folder = os.path.join(save, "init-from")
    shutil.rmtree(folder, ignore_errors=True)
    return init_checkpoint(args, factory_objects(args)[0], step, folder)


def trained_state_dict(args, save):
    """The model's state dict from the newest checkpoint in `save`."""
    from zest_import.weights import complete_state_dict, read_checkpoint

    return complete_state_dict(factory_objects(args)[0], read_checkpoint(save), save)


def plan(args):
    """zestc --plan-only --report on the imported model."""
    cache = cache_root(args.cache_dir)
    model = imported(args, cache)
    run(
        [
            binary("zestc"),
            model.file("model.mlir"),
            f"--world-size={args.nproc}",
            "--plan-only",
            "--report",
            *args.zestc_args,
        ],
        "zestc --plan-only",
    )
