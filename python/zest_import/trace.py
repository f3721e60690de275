"""Tracing a model's training step (and its forward entry) into a torch-mlir
module on linalg: ``grad_and_value`` of the loss through ``functional_call``,
functionalized and decomposed, with ``torch.export`` as the fallback for
code ``make_fx`` cannot trace, and random draws on per-rank streams."""

from .errors import (
    ZestImportError,
    first_line,
    is_data_dependent,
    stack_frames,
    traceback_frames,
    unlowered_op,
    where,
)


def export_loss(model, loss_fn, batch):
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
        with QuietStderr():
            program = torch.export.export(LossModule(), tuple(batch), strict=False)
    except Exception as error:
        raise ZestImportError(
            f"tracing the training step failed"
            f"{where(model, traceback_frames(error))} (with "
            f"make_fx and with torch.export): "
            f"{first_line(error)}"
        )
    return program.module(), "model."


class QuietStderr:
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


class NeedsRandomStreams(Exception):
    """The step draws random numbers: trace it again with {zest.rng}."""


def random_op_table(model, streams):
    """Decompositions for ATen's random ops: Bernoulli draws (dropout) from
    the counter-based streams, the rest refused with where they came from."""
    import torch
    from . import rng

    table = {}
    if streams is None:

        def needs_streams(*args, **kwargs):
            raise NeedsRandomStreams()

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
                raise ZestImportError(
                    f"the step draws random numbers with {_op}"
                    f"{where(model, stack_frames())}; only Bernoulli "
                    f"draws (dropout) have per-rank random streams in Zest"
                )

            table[op] = refuse
    return table


def model_loss(model, loss_fn, values, data):
    """loss_fn(model, *data) with the model holding `values` (tied weights
    re-tied, as functional_call does); loss_fn gets the module itself, its
    submodules and attributes."""
    from torch.nn.utils.stateless import _reparametrize_module

    with _reparametrize_module(model, values, tie_weights=True):
        return loss_fn(model, *data)


def make_fx_step(fn, args, model, streams):
    """make_fx of `fn` on `args` with the importer's decompositions (torch-
    mlir's, ours, the random ops'), scaled_dot_product_attention traced as
    Zest's fused op (attention.py; PyTorch's math path materializes every
    score), source lines recorded for errors."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch_mlir import fx as tmfx
    from . import decompositions
    from . import functions

    table = {
        **tmfx.get_decomposition_table(),
        **decompositions.table(),
        **random_op_table(model, streams),
    }
    # Fake tensors: the trace computes nothing, so a model's gradients and
    # activations never exist (a 1B-parameter Llama: 15.8 GB -> its weights).
    with sdpa_kernel(SDPBackend.MATH), functions.FusedFunctionsMode(), QuietStderr():
        return make_fx(
            fn,
            decomposition_table=table,
            record_stack_traces=True,
            tracing_mode="fake",
            # Buffers (rotary tables) stay real: they become constants.
            _allow_non_fake_inputs=True,
        )(*args)


def trace_step(model, loss_fn, batch, name):
    """The training step as a torch-mlir module (linalg on tensors), the
    parameter names, which of them are trained, whether the step takes
    random streams (a last {zest.rng} argument) and, per data argument,
    the table it indexes (indices.index_bounds)."""
    import torch
    from torch.func import functionalize, grad_and_value
    from . import rng

    params = dict(model.named_parameters())
    names = list(params)
    trained = [n for n in names if params[n].requires_grad]
    micro = batch[0].shape[0] if batch and batch[0].dim() else 1

    def make_step(loss_of_values, streams):
        def step(*args):
            values = dict(zip(names, args[: len(names)]))
            data = args[len(names) : len(names) + len(batch)]
            if streams is not None:
                # The draws run as decompositions, under functionalization:
                # they need the tensor functionalize wraps.
                rng_arg = args[-1]
                if torch._is_functional_tensor(rng_arg):
                    rng_arg = torch._from_functional_tensor(rng_arg)
                streams.rng, streams.draws = rng_arg, 0

            def loss_of(trainable):
                return loss_of_values({**values, **trainable}, data)

            grads, loss = grad_and_value(loss_of)({n: values[n] for n in trained})
            if not loss.dtype.is_floating_point:
                raise ZestImportError(
                    f"loss_fn must return a floating-point scalar, got {loss.dtype}"
                )
            return (loss, *[grads[n] for n in trained])

        return step

    def traced(loss_of_values, streams):
        args = [p.detach() for p in params.values()] + list(batch)
        if streams is not None:
            args.append(torch.zeros(2, dtype=torch.int64))
        return make_fx_step(
            functionalize(make_step(loss_of_values, streams), remove="mutations"),
            args,
            model,
            streams,
        )

    def traced_with_streams(loss_of_values):
        try:
            return traced(loss_of_values, None), False
        except NeedsRandomStreams:
            return traced(loss_of_values, rng.Streams(None, micro)), True

    graph, random = trace_loss(
        model, loss_fn, batch, traced_with_streams, "training step"
    )
    from .indices import index_bounds

    bounds = index_bounds(graph, names, len(batch))
    return lower(graph, name, model), names, trained, random, bounds


def trace_loss(model, loss_fn, batch, trace, what):
    """`trace(loss_of_values)` on the model's loss; where make_fx meets a
    branch on tensor values (Hugging Face masking utilities), on the loss
    torch.export'ed first (`what` names the entry in errors)."""
    from torch.func import functional_call

    def eager_loss(values, data):
        return model_loss(model, loss_fn, values, data)

    try:
        return trace(eager_loss)
    except ZestImportError:
        raise
    except Exception as error:
        if not is_data_dependent(error):
            raise ZestImportError(
                f"tracing the {what} failed"
                f"{where(model, traceback_frames(error))}: "
                f"{first_line(error)}"
            )
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        exported, prefix = export_loss(model, loss_fn, batch)

    def exported_loss(values, data):
        return functional_call(
            exported, {prefix + n: v for n, v in values.items()}, data
        )

    try:
        return trace(exported_loss)
    except ZestImportError:
        raise
    except Exception as error:
        raise ZestImportError(
            f"tracing the exported {what} failed: {first_line(error)}"
        )


def lower(graph, name, model):
    """torch-mlir's linalg-on-tensors module for the traced `graph`, its
    scatters as loops, checked for ops outside upstream MLIR."""
    from torch_mlir import fx as tmfx

    from torch_mlir.compiler_utils import run_pipeline_with_repro_report
    from . import fused_ops

    quiet = QuietStderr()
    try:
        with quiet:
            mlir = tmfx.stateless_fx_import(graph, output_type="raw", model_name=name)
            fused_ops.custom_ops_to_calls(mlir)
            run_pipeline_with_repro_report(
                mlir,
                "builtin.module(func.func(torch-match-quantized-custom-ops), "
                "torchdynamo-export-to-torch-backend-pipeline{ extra-library=})",
                "Lowering TorchFX IR -> Torch Backend IR",
            )
            run_pipeline_with_repro_report(
                mlir,
                fused_ops.linalg_pipeline(mlir.context),
                "Lowering Torch Backend IR -> Linalg-on-Tensors Backend IR",
            )
            fused_ops.calls_to_zest_ops(mlir)
    except Exception as error:
        why = unlowered_op(quiet.text + str(error), graph, model)
        raise ZestImportError(f"torch-mlir cannot lower the step to linalg: {why}")
    from .scatter import ScatterError, lower_scatters

    try:
        lower_scatters(mlir)
    except ScatterError as error:
        raise ZestImportError(f"cannot import {error}")
    check_dialects(mlir)
    return mlir


def trace_forward(model, loss_fn, batch, name):
    """The loss alone, in eval mode (dropout off), as a torch-mlir module
    whose function `name` takes the parameters and the batch."""
    import torch
    from torch.func import functionalize

    params = dict(model.named_parameters())
    names = list(params)

    def traced(loss_of_values):
        def forward(*args):
            values = dict(zip(names, args[: len(names)]))
            return loss_of_values(values, args[len(names) :])

        with torch.no_grad():
            # In-place ops (a router's `weights /= sum`) removed, as in
            # the step.
            return make_fx_step(
                functionalize(forward, remove="mutations"),
                [p.detach() for p in params.values()] + list(batch),
                model,
                None,
            )

    model.eval()
    try:
        graph = trace_loss(model, loss_fn, batch, traced, "forward entry")
    finally:
        model.train()
    return lower(graph, name, model)


def check_dialects(mlir):
    """Refuses ops outside the upstream dialects Zest compiles (torch-mlir's
    tm_tensor.scan for cumsum, say), naming the first one and where."""
    from torch_mlir import ir

    # cf.assert: torch-mlir's bounds checks (embedding ids).
    allowed = (
        "func.",
        "linalg.",
        "tensor.",
        "arith.",
        "math.",
        "scf.",
        "cf.assert",
        "zest.attention",
        "zest.cross_entropy",
        "zest.grouped_matmul",
        "zest.expert_",
    )
    found = []

    def visit(op):
        name = op.operation.name
        if not found and name != "builtin.module" and not name.startswith(allowed):
            found.append((name, str(op.operation.location)))
        return ir.WalkResult.ADVANCE

    with mlir.context:
        mlir.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    if found:
        name, location = found[0]
        where = "" if location == "loc(unknown)" else f" at {location}"
        hint = {
            "tm_tensor.scan": " (torch.cumsum)",
            "tm_tensor.sort": " (torch.sort, argsort, topk with k > 16)",
        }.get(name, "")
        raise ZestImportError(
            f"the step contains '{name}'{hint}{where}, which "
            f"Zest does not compile yet"
        )
