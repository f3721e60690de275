"""zest.train: the launcher from a Python script."""

import argparse

from .tools import LaunchError


def train(
    model,
    loss_fn=None,
    example_batch=None,
    *,
    nproc=1,
    steps=10,
    data=None,
    samples=64,
    save=None,
    save_every=None,
    export=None,
    plot=None,
    png=None,
    hostfile=None,
    cache_dir=None,
    zestc_args=(),
    **driver_options,
):
    """Trains `model` on `nproc` ranks and returns (state_dict, losses):
    the trained `model.state_dict()` (parameters from the newest
    checkpoint, buffers as the model holds them) and rank 0's loss by step.

    `model` is a torch.nn.Module with `loss_fn(model, *batch)` and an
    `example_batch` tuple, as a zest-import factory returns them, or a
    "FILE.py:FACTORY" string. `zestc_args` are zestc options
    (["--strategy=shard-grad-op", "--memory-budget=2GiB"]); the keyword
    options of the executable pass through with underscores (lr=0.1,
    lr_schedule="cosine", accum=2); `plot` (and `png`) draw the last
    step as `zest plot` does. Raises zest.tools.LaunchError where
    `zest train` would stop with an error."""
    from . import __main__ as cli
    from . import launcher

    args = argparse.Namespace(
        factory=model if isinstance(model, str) else "<model>",
        objects=None if isinstance(model, str) else (model, loss_fn, example_batch),
        nproc=nproc,
        steps=steps,
        data=data,
        samples=samples,
        save=save,
        save_every=save_every,
        export=None,
        plot=plot,
        png=png,
        hostfile=hostfile,
        cache_dir=cache_dir,
        shapes_only=False,
        import_args=[],
        zestc_args=list(zestc_args),
        run_args=[],
    )
    if args.objects and (loss_fn is None or example_batch is None):
        raise LaunchError("zest.train(model, loss_fn, example_batch): give all three")
    for name, value in driver_options.items():
        flag = "--" + name.replace("_", "-")
        if flag not in cli.DRIVER_OPTIONS:
            raise LaunchError(f"zest.train: unknown option '{name}'")
        args.run_args += [flag, str(value)]
    trained = {}

    def finish(save):
        trained.update(launcher.trained_state_dict(args, save))

    losses = launcher.train(args, finish)
    state = trained
    if export:
        from zest_import.weights import save_state_dict

        save_state_dict(state, export)
    return state, losses
