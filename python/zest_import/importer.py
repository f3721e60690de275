"""Loading a model factory, checking what it returns and importing it (the
package's API, re-exported by __init__ when first used: importing the
package itself does not load PyTorch)."""

import importlib.util
import os
import site
import sys
import sysconfig

from . import attention, experts
from .annotate import annotate, entry_name, merge_forward
from .errors import ZestImportError, located, run_command
from .trace import trace_forward, trace_step


def load_factory_shapes(spec):
    """load_factory under a fake tensor mode: the model's parameters have
    shapes and types but no storage, so a model larger than this machine's
    memory can be imported (zest-import --shapes-only). Buffers (rotary
    tables) and the example batch become real zeros of their shapes: they
    are constants and inputs of the step, whose values only a run would
    need. A model whose step branches on the batch's values is traced on
    zeros."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True):
        model, loss_fn, batch = load_factory(spec)
        # A model built under torch.device("meta") (as torchtitan and
        # FSDP2's docs build large ones): its parameters become fake CPU
        # tensors of the same shapes, no storage either way.
        if on_meta(model):
            _meta_to_fake_cpu(model)

    def zeros(value):
        if isinstance(value, torch.Tensor):
            return torch.zeros(value.shape, dtype=value.dtype)
        return value

    for module in model.modules():
        for name, buffer in list(module._buffers.items()):
            module._buffers[name] = zeros(buffer)
    return model, loss_fn, tuple(zeros(value) for value in batch)


def load_factory(spec):
    """Calls FACTORY from "FILE.py:FACTORY"; returns (module, loss_fn,
    example_batch)."""
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise ZestImportError(f"'{spec}' is not FILE.py:FACTORY")
    module_spec = importlib.util.spec_from_file_location("zest_model", path)
    if module_spec is None:
        raise ZestImportError(f"cannot load '{path}'")
    source = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(source)
    except FileNotFoundError:
        raise ZestImportError(f"no file '{path}'")
    except Exception as error:
        raise ZestImportError(f"loading '{path}' failed: {located(error)}")
    factory = getattr(source, name, None)
    if not callable(factory):
        raise ZestImportError(f"'{path}' defines no function '{name}'")
    try:
        made = factory()
    except Exception as error:
        raise ZestImportError(f"{name}() raised {located(error)}")
    if not isinstance(made, tuple) or len(made) != 3:
        raise ZestImportError(
            f"{name}() must return (module, loss_fn, "
            f"example_batch), got {type(made).__name__}"
        )
    model, loss_fn, batch = made
    if not isinstance(batch, (tuple, list)):
        batch = (batch,)
    check_factory(name, model, loss_fn, tuple(batch))
    return model, loss_fn, tuple(batch)


def _fake(model):
    """Whether a fake tensor mode is active (load_factory_shapes)."""
    import torch

    return torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is not None


def _meta_to_fake_cpu(model):
    """Each parameter and buffer on the meta device replaced by a tensor of
    its shape on the CPU (fake under load_factory_shapes' mode: no storage),
    tied parameters kept tied."""
    import torch

    done = {}

    def moved(tensor):
        if tensor is None or tensor.device.type != "meta":
            return tensor
        if id(tensor) not in done:
            empty = torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu")
            if isinstance(tensor, torch.nn.Parameter):
                empty = torch.nn.Parameter(empty, requires_grad=tensor.requires_grad)
            done[id(tensor)] = empty
        return done[id(tensor)]

    for module in model.modules():
        for table in (module._parameters, module._buffers):
            for name, tensor in list(table.items()):
                table[name] = moved(tensor)


def on_meta(model):
    """Whether any parameter or buffer of `model` is on the meta device."""
    tensors = list(model.parameters()) + list(model.buffers())
    return any(t.device.type == "meta" for t in tensors)


def check_factory(name, model, loss_fn, batch):
    """What the factory returned: a module with parameters, a callable loss
    and tensors sharing their first (micro-batch) dimension."""
    import torch

    if not isinstance(model, torch.nn.Module):
        raise ZestImportError(
            f"{name}() must return a torch.nn.Module first, "
            f"got {type(model).__name__}"
        )
    if not callable(loss_fn):
        raise ZestImportError(f"{name}()'s loss_fn is not callable")
    if not any(True for _ in model.parameters()):
        raise ZestImportError(
            f"the model ({type(model).__name__}) has no "
            f"parameters: there is nothing to shard or train"
        )
    if on_meta(model) and not _fake(model):
        raise ZestImportError(
            f"{name}() built the model on the meta device: its weights have "
            f"no values to train or write. Import it with --shapes-only "
            f"(the step's IR for zestc --plan-only), or build it on the CPU "
            f"(or call model.to_empty(device='cpu') and initialize it) for "
            f"a model to run"
        )
    if not batch:
        raise ZestImportError(f"{name}()'s example batch is empty")
    for i, tensor in enumerate(batch):
        if not isinstance(tensor, torch.Tensor):
            raise ZestImportError(
                f"batch argument #{i} is a {type(tensor).__name__}, not a tensor"
            )
        if tensor.dim() == 0:
            raise ZestImportError(
                f"batch argument #{i} is a scalar; every batch "
                f"argument needs the micro-batch as its first "
                f"dimension"
            )
        if tensor.shape[0] != batch[0].shape[0]:
            raise ZestImportError(
                f"batch argument #{i} has {tensor.shape[0]} "
                f"samples but #0 has {batch[0].shape[0]}: "
                f"every batch argument's first dimension is "
                f"the micro-batch"
            )


def check_supported(model):
    """Refuses what the traced step would get wrong silently, and parameter
    types the compiled optimizer does not update."""
    import torch

    if not any(p.requires_grad for p in model.parameters()):
        raise ZestImportError(
            f"every parameter of the model "
            f"({type(model).__name__}) has requires_grad=False:"
            f" there is nothing to train"
        )
    for name, param in model.named_parameters():
        if param.requires_grad and param.dtype != torch.float32:
            module, _, _ = name.rpartition(".")
            owner = model.get_submodule(module) if module else model
            raise ZestImportError(
                f"parameter '{name}' of module '{module or '<root>'}' "
                f"({type(owner).__name__}) is {str(param.dtype)[6:]}; the "
                f"compiled optimizer updates float32 parameters: keep "
                f"trainable parameters in float32 (or freeze this one)"
            )
    for path, module in model.named_modules():
        if (
            isinstance(module, torch.nn.modules.batchnorm._BatchNorm)
            and module.track_running_stats
        ):
            raise ZestImportError(
                f"module '{path}' ({type(module).__name__}) updates its "
                f"running statistics in training, which the traced step "
                f"would drop; use track_running_stats=False or GroupNorm/"
                f"LayerNorm"
            )


def import_model(model, loss_fn, batch, name=None, forward=False):
    """(contract IR text, {fqn: initial tensor}) for the training step of
    `model` under `loss_fn(model, *batch)`, named `name` (default: after
    the model's class); with `forward`, also `<name>_forward`, the loss in
    eval mode without gradients."""
    name = name or entry_name(model)
    if name == "main":
        raise ZestImportError("the entry point cannot be named 'main'")
    model.train()
    check_supported(model)
    with attention.SdpaInsteadOfEager(model), experts.ExpertsAsGroupedProducts(model):
        mlir, names, trained, random, bounds = trace_step(model, loss_fn, batch, name)
        text = annotate(mlir, model, names, trained, bounds, name, random)
        if forward:
            forward_name = name + "_forward"
            merge_forward(
                mlir,
                trace_forward(model, loss_fn, batch, forward_name),
                model,
                names,
                bounds,
                forward_name,
            )
            text = str(mlir)
    weights = {n: p.detach().contiguous() for n, p in model.named_parameters()}
    return text, weights


def user_sources(factory_spec):
    """The Python files the factory's model came from: its file and every
    module loaded so far that neither the interpreter, an installed package
    nor the project's own tools provide (the user's modules it imports)."""
    provided = [
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sysconfig.get_paths()["stdlib"],
        *site.getsitepackages(),
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    ]
    provided = [os.path.join(os.path.realpath(p), "") for p in provided]
    factory = os.path.realpath(factory_spec.rpartition(":")[0])
    sources = {factory}
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        # The interpreter's own configuration, and modules whose file is a
        # name rather than a path (torch._ops), are not the model's.
        if (
            name in ("sitecustomize", "usercustomize")
            or not isinstance(path, str)
            or not path.endswith(".py")
            or not os.path.isabs(path)
        ):
            continue
        path = os.path.realpath(path)
        if not any(path.startswith(prefix) for prefix in provided):
            sources.add(path)
    return sorted(sources)
