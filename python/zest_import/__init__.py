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
    factory = getattr(source, name, None)
    if not callable(factory):
        raise ImportError_(f"'{path}' defines no function '{name}'")
    made = factory()
    if not isinstance(made, tuple) or len(made) != 3:
        raise ImportError_(f"{name}() must return (module, loss_fn, "
                           f"example_batch), got {type(made).__name__}")
    model, loss_fn, batch = made
    if not isinstance(batch, (tuple, list)):
        batch = (batch,)
    return model, loss_fn, tuple(batch)


def check_supported(model):
    """Refuses what the traced step would get wrong silently."""
    import torch
    for path, module in model.named_modules():
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm) and \
                module.track_running_stats:
            raise ImportError_(
                f"module '{path}' ({type(module).__name__}) updates its "
                f"running statistics in training, which the traced step "
                f"would drop; use track_running_stats=False or GroupNorm/"
                f"LayerNorm")
        if isinstance(module, torch.nn.Dropout) and module.p > 0 and \
                module.training:
            raise ImportError_(
                f"module '{path}' (Dropout, p={module.p}) needs per-rank "
                f"random streams, which zest-import does not provide yet; "
                f"set p=0 or call model.eval() on it")


def trace_step(model, loss_fn, batch, name):
    """The training step as a torch-mlir module (linalg on tensors), with
    the parameter names and which of them are trained."""
    import torch
    from torch.func import functional_call, functionalize, grad_and_value
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch_mlir import fx as tmfx

    params = dict(model.named_parameters())
    names = list(params)
    trained = [n for n in names if params[n].requires_grad]

    def step(*args):
        values = dict(zip(names, args[:len(names)]))
        data = args[len(names):]

        def loss_of(trainable):
            full = {**values, **trainable}
            return loss_fn(lambda *inputs: functional_call(model, full, inputs),
                           *data)

        grads, loss = grad_and_value(loss_of)({n: values[n] for n in trained})
        return (loss, *[grads[n] for n in trained])

    args = [p.detach() for p in params.values()] + list(batch)
    # scaled_dot_product_attention as its math (matmul, softmax, matmul):
    # the fused CPU kernels' backward has no lowering to linalg.
    from torch.nn.attention import SDPBackend, sdpa_kernel
    try:
        with sdpa_kernel(SDPBackend.MATH):
            graph = make_fx(functionalize(step, remove="mutations"),
                            decomposition_table=tmfx.get_decomposition_table())(
                *args)
    except Exception as error:  # tracing failures name the op themselves
        raise ImportError_(f"tracing the training step failed: {error}")
    try:
        mlir = tmfx.stateless_fx_import(graph, output_type="linalg-on-tensors",
                                        model_name=name)
    except Exception as error:
        raise ImportError_(f"torch-mlir cannot lower the step to linalg: "
                           f"{_unlowered_op(str(error))}")
    from .scatter import ScatterError, lower_scatters
    try:
        lower_scatters(mlir)
    except ScatterError as error:
        raise ImportError_(f"cannot import {error}")
    check_dialects(mlir)
    return mlir, names, trained


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


def _unlowered_op(diagnostics):
    """The op torch-mlir could not lower, named from its diagnostics."""
    import re
    match = re.search(r'name = "torch\.(aten\.[\w.]+)"', diagnostics) or \
        re.search(r"'torch\.(aten\.[\w.]+)'", diagnostics)
    if match:
        return f"no lowering for {match.group(1)}"
    return diagnostics.strip().splitlines()[0]


def annotate(mlir, model, names, trained, num_data, name):
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


def import_model(model, loss_fn, batch, name="train_step"):
    """(contract IR text, {fqn: initial tensor}) for the training step of
    `model` under `loss_fn(model, *batch)`."""
    if name == "main":
        raise ImportError_("the entry point cannot be named 'main'")
    model.train()
    check_supported(model)
    mlir, names, trained = trace_step(model, loss_fn, batch, name)
    text = annotate(mlir, model, names, trained, len(batch), name)
    weights = {n: p.detach().contiguous()
               for n, p in model.named_parameters()}
    return text, weights
