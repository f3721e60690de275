"""zest-weights: PyTorch state dicts in and out of Zest checkpoints.

  zest-weights split STATE MANIFEST OUT [--world-size N]
      STATE: a PyTorch state dict, `.pt` (torch.save; a dict of tensors, or
      one under "state_dict" / "model") or `.safetensors`. Writes the Zest
      checkpoint OUT for the layout MANIFEST (zestc --manifest) at its
      world size or N. Entries that are no parameter of the layout (buffers,
      the second name of a tied weight) are left out; a missing parameter
      is an error.
  zest-weights export CHECKPOINT OUT [--like FILE.py:FACTORY]
      Writes a Zest checkpoint (a folder, or a folder of periodic ones) as a
      state dict: OUT.pt (torch.save) or OUT.safetensors. With --like, the
      factory's model completes it: tied weights under all their names and
      the model's buffers, so that `load_state_dict(strict=True)` takes it.

Both call the `zest-ckpt` tool (on PATH, in $ZEST_CKPT or in build/bin).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from . import load_factory, run_command
from .errors import ZestImportError


def _zest_ckpt():
    candidates = [
        os.environ.get("ZEST_CKPT"),
        os.path.join(os.environ.get("ZEST_BUILD_DIR", ""), "bin", "zest-ckpt"),
        shutil.which("zest-ckpt"),
        os.path.join(
            os.path.dirname(__file__), "..", "..", "build", "bin", "zest-ckpt"
        ),
    ]
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    raise ZestImportError("cannot find zest-ckpt: build the project or set ZEST_CKPT")


def _run_zest_ckpt(*args):
    done = subprocess.run([_zest_ckpt(), *args], capture_output=True, text=True)
    if done.returncode != 0:
        message = done.stderr.strip().removeprefix("zest-ckpt: error: ")
        raise ZestImportError(
            message or f"zest-ckpt {args[0]} failed with status {done.returncode}"
        )
    return done.stdout


def load_state_dict(path):
    """{name: tensor} from a .pt or .safetensors state dict."""
    import torch

    if path.endswith(".safetensors"):
        from safetensors.torch import load_file

        return load_file(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise ZestImportError(f"no file '{path}'")
    except Exception as error:
        raise ZestImportError(
            f"'{path}' is not a PyTorch state dict that "
            f"torch.load(weights_only=True) reads: {error}"
        )
    for key in ("state_dict", "model"):
        if isinstance(state, dict) and isinstance(state.get(key), dict):
            state = state[key]
    if not isinstance(state, dict) or not all(
        isinstance(v, torch.Tensor) for v in state.values()
    ):
        raise ZestImportError(
            f"'{path}' holds no dict of tensors (save model.state_dict())"
        )
    return state


def _manifest_params(path):
    import json

    try:
        with open(path) as file:
            manifest = json.load(file)
    except (OSError, ValueError) as error:
        raise ZestImportError(f"cannot read manifest '{path}': {error}")
    return [
        param["fqn"]
        for unit in manifest.get("units", [])
        for param in unit.get("params", [])
    ]


def split(args):
    from safetensors.torch import save_file
    import torch

    state = load_state_dict(args.state)
    wanted = _manifest_params(args.manifest)
    missing = [name for name in wanted if name not in state]
    if missing:
        raise ZestImportError(
            f"'{args.state}' lacks parameter(s) "
            f"{', '.join(missing[:5])}"
            f"{' ...' if len(missing) > 5 else ''} of the "
            f"manifest '{args.manifest}'"
        )
    with tempfile.TemporaryDirectory() as scratch:
        full = os.path.join(scratch, "full.safetensors")
        save_file(
            {
                name: state[name].detach().to(torch.float32).contiguous()
                for name in wanted
            },
            full,
        )
        extra = ["--world-size", str(args.world_size)] if args.world_size else []
        sys.stdout.write(_run_zest_ckpt("split", full, args.manifest, args.out, *extra))


def read_checkpoint(checkpoint):
    """A sharded checkpoint's full tensors, by FQN."""
    from safetensors.torch import load_file

    with tempfile.TemporaryDirectory() as scratch:
        full = os.path.join(scratch, "full.safetensors")
        _run_zest_ckpt("consolidate", checkpoint, full)
        return dict(load_file(full))


def complete_state_dict(model, state, checkpoint):
    """`model.state_dict()` with its parameters from `state` (tied names
    share their owner's tensor, in the model's dtypes) and its buffers as
    the model holds them."""
    params = dict(model.named_parameters(remove_duplicate=False))
    by_tensor = {id(param): name for name, param in model.named_parameters()}
    complete = {}
    for name, value in model.state_dict().items():
        owner = by_tensor.get(id(params[name])) if name in params else None
        if owner is not None and owner in state:
            if tuple(state[owner].shape) != tuple(value.shape):
                raise ZestImportError(
                    f"checkpoint '{checkpoint}' holds '{owner}' as "
                    f"{tuple(state[owner].shape)}, but the model's "
                    f"'{name}' is {tuple(value.shape)}"
                )
            complete[name] = state[owner].to(value.dtype)
        elif name in params:
            raise ZestImportError(f"checkpoint '{checkpoint}' lacks parameter '{name}'")
        else:  # a buffer: the model's own value
            complete[name] = value.detach().clone()
    return complete


def save_state_dict(state, out):
    """A .pt (torch.save) or .safetensors file of `state`."""
    import torch

    if out.endswith(".safetensors"):
        from safetensors.torch import save_file

        # safetensors refuses shared storage: one copy per name.
        save_file({k: v.contiguous().clone() for k, v in state.items()}, out)
    else:
        torch.save(state, out)
    print(f"wrote {len(state)} tensors to '{out}'")


def export(args):
    state = read_checkpoint(args.checkpoint)
    if args.like:
        model, _, _ = load_factory(args.like)
        state = complete_state_dict(model, state, args.checkpoint)
    save_state_dict(state, args.out)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="zest-weights",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    to_zest = commands.add_parser("split")
    to_zest.add_argument("state")
    to_zest.add_argument("manifest")
    to_zest.add_argument("out")
    to_zest.add_argument("--world-size", type=int, default=0)
    to_torch = commands.add_parser("export")
    to_torch.add_argument("checkpoint")
    to_torch.add_argument("out")
    to_torch.add_argument(
        "--like", help="FILE.py:FACTORY whose model the state dict is for"
    )
    return run_command(
        "zest-weights", {"split": split, "export": export}, parser.parse_args(argv)
    )


if __name__ == "__main__":
    sys.exit(main())
