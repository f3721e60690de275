"""PyTorch functions the importer traces as its own formulation: routing
(FusedFunctionsMode) and what torch.func needs for them.

attention.py: scaled_dot_product_attention as the zest::attention custom op,
inside an autograd.Function whose backward is zest::attention_backward
(FlashAttention-2's), so the traced backward keeps what eager's fused
kernels keep (a log-sum-exp per row), not what autograd would save of the
forward's ops.

loss.py: cross_entropy as the zest::cross_entropy custom op, likewise: the
backward keeps each row's log-sum-exp, not its log-probabilities.

experts.py: grouped_mm (rows grouped by run-time offsets) as the
zest::grouped_matmul custom op, its backward two of them.
"""

import torch


def _functionalize_forward(interpreter, function, *operands, **_):
    """torch.func.functionalize's rule for an autograd.Function (PyTorch
    has none, "NYI"): by the time it runs, torch.func.grad has recorded the
    function's backward, so functionalization sees its forward's ops as
    ordinary ops."""
    return function.forward(*operands)


def _register_functionalize_rule():
    """Installs the rule above on torch's custom_function_call (a private
    table of the pinned torch); False where that table is not there, and
    the functions then take PyTorch's own path."""
    try:
        from torch._functorch.autograd_function import custom_function_call
        from torch._C._functorch import TransformType

        table = custom_function_call.functorch_table
    except (ImportError, AttributeError):
        return False
    table[TransformType.Functionalize] = _functionalize_forward
    return True


REGISTERED = _register_functionalize_rule()


def _routes():
    from . import attention, experts, loss

    F = torch.nn.functional
    aten = torch.ops.aten
    return {
        F.grouped_mm: experts.grouped_mm,
        torch._grouped_mm: experts.grouped_mm,
        F.scaled_dot_product_attention: attention.scaled_dot_product_attention,
        aten.scaled_dot_product_attention.default: attention.scaled_dot_product_attention,
        F.cross_entropy: loss.cross_entropy,
        aten.cross_entropy_loss.default: loss.cross_entropy_loss,
    }


class FusedFunctionsMode(torch.overrides.TorchFunctionMode):
    """Routes the calls above made while it is active (torch.nn.functional's,
    however the model refers to them, and the ATen op an exported program
    calls) to the importer's versions, which get the original to fall back
    on."""

    def __init__(self):
        super().__init__()
        self.routes = _routes()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        # The mode is off while its handler runs: the replacements' own ops
        # (and the fallbacks) are not routed here again.
        route = self.routes.get(func)
        if route is not None:
            return route(*args, **kwargs, original=func)
        return func(*args, **kwargs)
