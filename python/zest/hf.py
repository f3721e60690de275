"""Weights in and out of `zest train` the way transformers users keep them:
`--init-from PATH` (a save_pretrained folder, a .pt or a .safetensors state
dict) starts training from those weights, loaded strictly by name, instead
of the factory's; `--export-hf DIR` writes the trained model with
save_pretrained (config and safetensors, tied weights as transformers
expects), which from_pretrained loads."""

import glob
import os
import tempfile

from .tools import LaunchError, python_tool, run


def read_weights(path):
    """{name: tensor} of a save_pretrained folder (its safetensors files, or
    pytorch_model*.bin) or of a .pt / .safetensors state dict."""
    from zest_import.errors import ZestImportError
    from zest_import.weights import load_state_dict

    if os.path.isdir(path):
        files = sorted(glob.glob(os.path.join(path, "*.safetensors")))
        files = files or sorted(glob.glob(os.path.join(path, "pytorch_model*.bin")))
        if not files:
            raise LaunchError(
                f"--init-from: '{path}' holds no *.safetensors or "
                "pytorch_model*.bin (a save_pretrained folder has them)"
            )
    elif os.path.isfile(path):
        files = [path]
    else:
        raise LaunchError(f"--init-from: '{path}' does not exist")
    state = {}
    try:
        for file in files:
            state.update(load_state_dict(file))
    except ZestImportError as error:
        raise LaunchError(f"--init-from: {error}") from None
    return state


def owned_parameters(model, state, path):
    """`state`'s values of `model`'s parameters under their owners' names
    (a tied weight may come under any of its names), checked strictly:
    every name known to the model, every parameter there, each shape
    right."""
    known = set(model.state_dict())
    unexpected = sorted(set(state) - known)
    if unexpected:
        raise LaunchError(
            f"--init-from: '{path}' holds {', '.join(unexpected[:5])}"
            f"{' ...' if len(unexpected) > 5 else ''}, which the model does "
            "not have"
        )
    aliases = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        aliases.setdefault(id(param), []).append(name)
    owned = {}
    for owner, param in model.named_parameters():
        found = [name for name in aliases[id(param)] if name in state]
        if not found:
            raise LaunchError(f"--init-from: '{path}' lacks parameter '{owner}'")
        value = state[found[0]]
        if tuple(value.shape) != tuple(param.shape):
            raise LaunchError(
                f"--init-from: '{path}' holds '{found[0]}' as "
                f"{list(value.shape)}, but the model's is {list(param.shape)}"
            )
        owned[owner] = value
    return owned


def init_checkpoint(args, model, step, folder):
    """A sharded initial checkpoint in `folder` from --init-from's weights
    for the compiled `step` (its manifest)."""
    from safetensors.torch import save_file

    owned = owned_parameters(model, read_weights(args.init_from), args.init_from)
    print(f"zest: initial weights from '{args.init_from}' ({len(owned)} parameters)")
    with tempfile.TemporaryDirectory() as scratch:
        full = os.path.join(scratch, "init.safetensors")
        save_file({k: v.float().contiguous() for k, v in owned.items()}, full)
        run(
            python_tool(
                "zest_import.weights",
                "split",
                full,
                step.file("manifest.json"),
                folder,
            ),
            "splitting the --init-from weights",
        )
    return folder


def export_pretrained(model, state, folder):
    """`model` with the trained `state` written by save_pretrained."""
    if not callable(getattr(model, "save_pretrained", None)):
        raise LaunchError(
            f"--export-hf needs a transformers model; the factory returns a "
            f"{type(model).__name__} (use --export OUT.pt)"
        )
    model.load_state_dict(state, strict=True)
    model.save_pretrained(folder)
    print(f"zest: wrote '{folder}' (save_pretrained)")
