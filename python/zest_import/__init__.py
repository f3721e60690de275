"""zest-import: a PyTorch model's training step as Zest contract IR.

The step is traced as PyTorch computes it: ``grad_and_value`` of the loss
over the trainable parameters, through ``functional_call``, functionalized
(in-place ops removed) and decomposed with torch-mlir's table, then imported
by torch-mlir to linalg on tensors. The result is annotated with the model
contract (docs/Contract.md): ``zest.param`` on every parameter argument
(``named_parameters()`` names, tied weights once), ``zest.grad`` on the
gradient of each trainable one, ``zest.loss`` on the loss, and the module
attribute ``zest.module_classes`` from ``named_modules()`` so that
``zestc --leaf-classes=<Class>`` works on the imported model.
"""

import importlib.util
import sys


class ImportError_(Exception):
    """A model zest-import cannot turn into contract IR; the message says
    what and where."""


def run_command(prog, commands, args):
    """Runs subcommand `args.command` of `commands`; an ImportError_ becomes
    "prog: error: ..." and exit status 1."""
    try:
        commands[args.command](args)
    except ImportError_ as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 1
    return 0


def load_factory(spec):
    """Calls FACTORY from "FILE.py:FACTORY"; returns (module, loss_fn,
    example_batch)."""
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise ImportError_(f"'{spec}' is not FILE.py:FACTORY")
    module_spec = importlib.util.spec_from_file_location("zest_model", path)
    if module_spec is None:
        raise ImportError_(f"cannot load '{path}'")
    source = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(source)
    except FileNotFoundError:
        raise ImportError_(f"no file '{path}'")
    except Exception as error:
        raise ImportError_(f"loading '{path}' failed: {_located(error)}")
    factory = getattr(source, name, None)
    if not callable(factory):
        raise ImportError_(f"'{path}' defines no function '{name}'")
    try:
        made = factory()
    except Exception as error:
        raise ImportError_(f"{name}() raised {_located(error)}")
    if not isinstance(made, tuple) or len(made) != 3:
        raise ImportError_(f"{name}() must return (module, loss_fn, "
                           f"example_batch), got {type(made).__name__}")
    model, loss_fn, batch = made
    if not isinstance(batch, (tuple, list)):
        batch = (batch,)
    check_factory(name, model, loss_fn, tuple(batch))
    return model, loss_fn, tuple(batch)


def _located(error):
    """'Type: message (at FILE:LINE)' for an exception from user code."""
    import traceback
    frames = traceback.extract_tb(error.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames \
        else ""
    return f"{type(error).__name__}: {error}{where}"


def check_factory(name, model, loss_fn, batch):
    """What the factory returned: a module with parameters, a callable loss
    and tensors sharing their first (micro-batch) dimension."""
    import torch
    if not isinstance(model, torch.nn.Module):
        raise ImportError_(f"{name}() must return a torch.nn.Module first, "
                           f"got {type(model).__name__}")
    if not callable(loss_fn):
        raise ImportError_(f"{name}()'s loss_fn is not callable")
    if not any(True for _ in model.parameters()):
        raise ImportError_(f"the model ({type(model).__name__}) has no "
                           f"parameters: there is nothing to shard or train")
    if not batch:
        raise ImportError_(f"{name}()'s example batch is empty")
    for i, tensor in enumerate(batch):
        if not isinstance(tensor, torch.Tensor):
            raise ImportError_(f"batch argument #{i} is a "
                               f"{type(tensor).__name__}, not a tensor")
        if tensor.dim() == 0:
            raise ImportError_(f"batch argument #{i} is a scalar; every batch "
                               f"argument needs the micro-batch as its first "
                               f"dimension")
        if tensor.shape[0] != batch[0].shape[0]:
            raise ImportError_(f"batch argument #{i} has {tensor.shape[0]} "
                               f"samples but #0 has {batch[0].shape[0]}: "
                               f"every batch argument's first dimension is "
                               f"the micro-batch")


def check_supported(model):
    """Refuses what the traced step would get wrong silently, and parameter
    types the compiled optimizer does not update."""
    import torch
    if not any(p.requires_grad for p in model.parameters()):
        raise ImportError_(f"every parameter of the model "
                           f"({type(model).__name__}) has requires_grad=False:"
                           f" there is nothing to train")
    for name, param in model.named_parameters():
        if param.requires_grad and param.dtype != torch.float32:
            module, _, _ = name.rpartition(".")
            owner = model.get_submodule(module) if module else model
            raise ImportError_(
                f"parameter '{name}' of module '{module or '<root>'}' "
                f"({type(owner).__name__}) is {str(param.dtype)[6:]}; the "
                f"compiled optimizer updates float32 parameters: keep "
                f"trainable parameters in float32 (or freeze this one)")
    for path, module in model.named_modules():
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm) and \
                module.track_running_stats:
            raise ImportError_(
                f"module '{path}' ({type(module).__name__}) updates its "
                f"running statistics in training, which the traced step "
                f"would drop; use track_running_stats=False or GroupNorm/"
                f"LayerNorm")



def _exported(model, loss_fn, batch):
    """The loss as a torch.export'ed module and the prefix its parameter
    names carry. torch.export traces code that make_fx cannot: Hugging Face
    masking utilities branch on tensor values unless they see an export."""
    import torch

    class LossModule(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *data):
            return loss_fn(self.model, *data)

    try:
        with _quiet():
            program = torch.export.export(LossModule(), tuple(batch),
                                          strict=False)
    except Exception as error:
        raise ImportError_(f"tracing the training step failed"
                           f"{_where(model, _traceback_frames(error))} (with "
                           f"make_fx and with torch.export): "
                           f"{_first_line(error)}")
    return program.module(), "model."


class _quiet:
    """Holds back what torch writes to standard error while tracing (a
    failing trace prints its partial graph); the importer's own error says
    what failed and where. Shown again if tracing succeeds."""

    text = ""

    def __enter__(self):
        import os
        import sys
        import tempfile
        sys.stderr.flush()
        self.saved = os.dup(2)
        self.log = tempfile.TemporaryFile()
        os.dup2(self.log.fileno(), 2)

    def __exit__(self, kind, value, traceback):
        import os
        import sys
        sys.stderr.flush()
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.log.seek(0)
        self.text = self.log.read().decode(errors="replace")
        if kind is None:
            sys.stderr.write(self.text)
        self.log.close()
        return False


def _first_line(error):
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _is_data_dependent(error):
    """make_fx failed on a branch on a tensor's value (masking code that
    checks whether a mask is all ones, say)."""
    text = f"{type(error).__name__}: {error}"
    return "_local_scalar_dense" in text or "DataDependent" in text or \
        "data-dependent" in text


class _NeedsRandomStreams(Exception):
    """The step draws random numbers: trace it again with {zest.rng}."""


def module_path(model, frames):
    """'path' (Class) of the innermost module of `model` whose forward is
    among `frames` (innermost last), or None."""
    paths = {id(module): path for path, module in model.named_modules()}
    for frame in reversed(frames):
        owner = frame.f_locals.get("self")
        if owner is not None and id(owner) in paths:
            path = paths[id(owner)] or "<root>"
            return f"'{path}' ({type(owner).__name__})"
    return None


def _stack_frames():
    import inspect
    return [info.frame for info in reversed(inspect.stack())]


def _traceback_frames(error):
    frames, tb = [], error.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    return frames


def _where(model, frames):
    path = module_path(model, frames)
    return f" in module {path}" if path else ""


def _random_op_table(model, streams):
    """Decompositions for ATen's random ops: Bernoulli draws (dropout) from
    the counter-based streams, the rest refused with where they came from."""
    import torch
    from . import rng
    table = {}
    if streams is None:
        def needs_streams(*args, **kwargs):
            raise _NeedsRandomStreams()
        for op in rng.replacements(None):
            table[op] = needs_streams
    else:
        table.update(rng.replacements(streams))
    for name in rng.UNSUPPORTED:
        packet = getattr(torch.ops.aten, name, None)
        if packet is None:
            continue
        for overload in packet.overloads():
            op = getattr(packet, overload)

            def refuse(*args, _op=op, **kwargs):
                raise ImportError_(
                    f"the step draws random numbers with {_op}"
                    f"{_where(model, _stack_frames())}; only Bernoulli "
                    f"draws (dropout) have per-rank random streams in Zest")
            table[op] = refuse
    return table


def _model_loss(model, loss_fn, values, data):
    """loss_fn(model, *data) with the model holding `values` (tied weights
    re-tied, as functional_call does); loss_fn gets the module itself, its
    submodules and attributes."""
    from torch.nn.utils.stateless import _reparametrize_module
    with _reparametrize_module(model, values, tie_weights=True):
        return loss_fn(model, *data)


def _make_fx(fn, args, model, streams):
    """make_fx of `fn` on `args` with the importer's decompositions (torch-
    mlir's, ours, the random ops'), scaled_dot_product_attention traced as
    its math (matmul, softmax, matmul: the fused CPU kernels' backward has
    no lowering to linalg), source lines recorded for errors."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch_mlir import fx as tmfx
    from . import decompositions
    table = {**tmfx.get_decomposition_table(), **decompositions.table(),
             **_random_op_table(model, streams)}
    with sdpa_kernel(SDPBackend.MATH), _quiet():
        return make_fx(fn, decomposition_table=table,
                       record_stack_traces=True)(*args)


def trace_step(model, loss_fn, batch, name):
    """The training step as a torch-mlir module (linalg on tensors), the
    parameter names, which of them are trained and whether the step takes
    random streams (a last {zest.rng} argument)."""
    import torch
    from torch.func import functional_call, functionalize, grad_and_value
    from . import rng

    params = dict(model.named_parameters())
    names = list(params)
    trained = [n for n in names if params[n].requires_grad]
    micro = batch[0].shape[0] if batch and batch[0].dim() else 1

    def make_step(loss_of_values, streams):
        def step(*args):
            values = dict(zip(names, args[:len(names)]))
            data = args[len(names):len(names) + len(batch)]
            if streams is not None:
                # The draws run as decompositions, under functionalization:
                # they need the tensor functionalize wraps.
                rng_arg = args[-1]
                if torch._is_functional_tensor(rng_arg):
                    rng_arg = torch._from_functional_tensor(rng_arg)
                streams.rng, streams.draws = rng_arg, 0

            def loss_of(trainable):
                return loss_of_values({**values, **trainable}, data)

            grads, loss = grad_and_value(loss_of)(
                {n: values[n] for n in trained})
            if not loss.dtype.is_floating_point:
                raise ImportError_(f"loss_fn must return a floating-point "
                                   f"scalar, got {loss.dtype}")
            return (loss, *[grads[n] for n in trained])
        return step

    def eager_loss(values, data):
        return _model_loss(model, loss_fn, values, data)

    def traced(loss_of_values, streams):
        args = [p.detach() for p in params.values()] + list(batch)
        if streams is not None:
            args.append(torch.zeros(2, dtype=torch.int64))
        return _make_fx(functionalize(make_step(loss_of_values, streams),
                                      remove="mutations"), args, model,
                        streams)

    def traced_with_streams(loss_of_values):
        try:
            return traced(loss_of_values, None), False
        except _NeedsRandomStreams:
            return traced(loss_of_values, rng.Streams(None, micro)), True

    try:
        graph, random = traced_with_streams(eager_loss)
    except ImportError_:
        raise
    except Exception as error:
        if not _is_data_dependent(error):
            raise ImportError_(f"tracing the training step failed"
                               f"{_where(model, _traceback_frames(error))}: "
                               f"{_first_line(error)}")
        # Export the loss first, then trace the gradient of the export.
        from torch.nn.attention import SDPBackend, sdpa_kernel
        with sdpa_kernel(SDPBackend.MATH):
            exported, prefix = _exported(model, loss_fn, batch)

        def exported_loss(values, data):
            return functional_call(
                exported, {prefix + n: v for n, v in values.items()}, data)
        try:
            graph, random = traced_with_streams(exported_loss)
        except ImportError_:
            raise
        except Exception as error:
            raise ImportError_(f"tracing the exported training step failed: "
                               f"{_first_line(error)}")
    return _lower(graph, name, model), names, trained, random


def _lower(graph, name, model):
    """torch-mlir's linalg-on-tensors module for the traced `graph`, its
    scatters as loops, checked for ops outside upstream MLIR."""
    from torch_mlir import fx as tmfx
    quiet = _quiet()
    try:
        with quiet:
            mlir = tmfx.stateless_fx_import(
                graph, output_type="linalg-on-tensors", model_name=name)
    except Exception as error:
        why = _unlowered_op(quiet.text + str(error), graph, model)
        raise ImportError_(f"torch-mlir cannot lower the step to linalg: "
                           f"{why}")
    from .scatter import ScatterError, lower_scatters
    try:
        lower_scatters(mlir)
    except ScatterError as error:
        raise ImportError_(f"cannot import {error}")
    check_dialects(mlir)
    return mlir


def trace_forward(model, loss_fn, batch, name):
    """The loss alone, in eval mode (dropout off), as a torch-mlir module
    whose function `name` takes the parameters and the batch."""
    import torch
    params = dict(model.named_parameters())
    names = list(params)

    def forward(*args):
        values = dict(zip(names, args[:len(names)]))
        return _model_loss(model, loss_fn, values, args[len(names):])

    model.eval()
    try:
        with torch.no_grad():
            graph = _make_fx(forward, [p.detach() for p in params.values()] +
                             list(batch), model, None)
    except Exception as error:
        raise ImportError_(f"tracing the forward entry failed"
                           f"{_where(model, _traceback_frames(error))}: "
                           f"{_first_line(error)}")
    finally:
        model.train()
    return _lower(graph, name, model)


def merge_forward(mlir, forward, model, names, num_data, name):
    """Moves the forward entry `name` of module `forward` into `mlir`,
    annotated: parameters by FQN, the loss as a plain output (an entry
    without `zest.loss` runs forward only)."""
    from torch_mlir import ir
    with mlir.context:
        parsed = ir.Module.parse(str(forward))
        for op in list(parsed.body.operations):
            if op.operation.name != "func.func":
                continue
            if ir.StringAttr(op.attributes["sym_name"]).value == name:
                args = [ir.DictAttr.get({"zest.param": ir.StringAttr.get(n)})
                        for n in names]
                args += [ir.DictAttr.get({}) for _ in range(num_data)]
                op.attributes["arg_attrs"] = ir.ArrayAttr.get(args)
            mlir.body.append(op.operation)


def check_dialects(mlir):
    """Refuses ops outside the upstream dialects Zest compiles (torch-mlir's
    tm_tensor.scan for cumsum, say), naming the first one and where."""
    from torch_mlir import ir
    # cf.assert: torch-mlir's bounds checks (embedding ids).
    allowed = ("func.", "linalg.", "tensor.", "arith.", "math.", "scf.",
               "cf.assert")
    found = []

    def visit(op):
        name = op.operation.name
        if not found and name != "builtin.module" and \
                not name.startswith(allowed):
            found.append((name, str(op.operation.location)))
        return ir.WalkResult.ADVANCE

    with mlir.context:
        mlir.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    if found:
        name, location = found[0]
        where = "" if location == "loc(unknown)" else f" at {location}"
        hint = {"tm_tensor.scan": " (torch.cumsum)",
                "tm_tensor.sort": " (torch.sort, topk)"}.get(name, "")
        raise ImportError_(f"the step contains '{name}'{hint}{where}, which "
                           f"Zest does not compile yet")


def _unlowered_op(diagnostics, graph, model):
    """The op torch-mlir could not lower, named from its diagnostics, with
    the module and source line of the first node of `graph` calling it."""
    import re
    match = re.search(r'name = "torch\.(aten\.[\w.]+)"', diagnostics) or \
        re.search(r"'torch\.(aten\.[\w.]+)'", diagnostics)
    if not match:
        lines = diagnostics.strip().splitlines()
        return lines[0] if lines else "unknown failure"
    op = match.group(1)
    return f"no lowering for {op}{_origin(graph, op, model)}"


def _module_at(model, path, line):
    """'path' (Class) of the innermost module of `model` whose class's
    forward spans FILE:LINE, or None."""
    import inspect
    best = None
    for name, module in model.named_modules():
        forward = getattr(type(module), "forward", None)
        code = getattr(forward, "__code__", None)
        if code is None or code.co_filename != path:
            continue
        try:
            lines, first = inspect.getsourcelines(forward)
        except (OSError, TypeError):
            continue
        if first <= line < first + len(lines) and (
                best is None or len(name) > len(best[0])):
            best = (name, module)
    if best is None:
        return None
    return f"'{best[0] or '<root>'}' ({type(best[1]).__name__})"


def _origin(graph, op, model):
    """' in module 'path' (Class) at FILE:LINE' for the first node of `graph`
    calling `op` (aten.name or aten.name.overload), from the stack trace
    make_fx recorded and the model's forward methods; '' if unknown."""
    import re
    for node in graph.graph.nodes:
        target = str(node.target)
        if node.op != "call_function" or not (
                target == op or target.startswith(op + ".")):
            continue
        frames = re.findall(r'File "([^"]+)", line (\d+)',
                            node.meta.get("stack_trace") or "")
        user = [f for f in frames if "/site-packages/" not in f[0] and
                "/zest_import/" not in f[0]]
        if not user:
            return ""
        path, line = user[-1][0], int(user[-1][1])
        module = _module_at(model, path, line)
        return (f" in module {module}" if module else "") + \
            f" at {path}:{line}"
    return ""


def annotate(mlir, model, names, trained, num_data, name, random):
    """Adds the model contract's attributes; returns the module's text."""
    from torch_mlir import ir
    with mlir.context:
        funcs = [op for op in mlir.body.operations
                 if op.operation.name == "func.func"]
        func = next(f for f in funcs
                    if ir.StringAttr(f.attributes["sym_name"]).value == name)
        args = [ir.DictAttr.get({"zest.param": ir.StringAttr.get(n)})
                for n in names]
        args += [ir.DictAttr.get({}) for _ in range(num_data)]
        if random:
            args.append(ir.DictAttr.get({"zest.rng": ir.UnitAttr.get()}))
        func.attributes["arg_attrs"] = ir.ArrayAttr.get(args)
        results = [ir.DictAttr.get({"zest.loss": ir.UnitAttr.get()})]
        results += [ir.DictAttr.get({"zest.grad": ir.StringAttr.get(n)})
                    for n in trained]
        func.attributes["res_attrs"] = ir.ArrayAttr.get(results)
        classes = {path: ir.StringAttr.get(type(module).__name__)
                   for path, module in model.named_modules() if path}
        mlir.operation.attributes["zest.module_classes"] = \
            ir.DictAttr.get(classes)
    return str(mlir)


def entry_name(model):
    """The default entry point's name: the model's class in snake case
    (LlamaForCausalLM -> llama_for_causal_lm)."""
    import re
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2",
                   re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2",
                          type(model).__name__))
    name = re.sub(r"\W", "_", words).lower().strip("_") or "model"
    return name if name != "main" else "main_model"


def import_model(model, loss_fn, batch, name=None, forward=False):
    """(contract IR text, {fqn: initial tensor}) for the training step of
    `model` under `loss_fn(model, *batch)`, named `name` (default: after
    the model's class); with `forward`, also `<name>_forward`, the loss in
    eval mode without gradients."""
    name = name or entry_name(model)
    if name == "main":
        raise ImportError_("the entry point cannot be named 'main'")
    model.train()
    check_supported(model)
    mlir, names, trained, random = trace_step(model, loss_fn, batch, name)
    text = annotate(mlir, model, names, trained, len(batch), name, random)
    if forward:
        forward_name = name + "_forward"
        merge_forward(mlir, trace_forward(model, loss_fn, batch, forward_name),
                      model, names, len(batch), forward_name)
        text = str(mlir)
    weights = {n: p.detach().contiguous()
               for n, p in model.named_parameters()}
    return text, weights
