"""cross_entropy imported as one op: ``zest.cross_entropy`` and its backward
``zest.cross_entropy_backward``.

PyTorch's decomposition writes the log-softmax of the logits, gathers the
targets' entries and keeps the log-probabilities for the backward: at a
128256-word vocabulary and 4096 tokens each such [tokens, vocabulary] f32
array is 2 GiB. The op reads each row once and keeps only its log-sum-exp;
the backward writes each gradient element from its logit and its row's
log-sum-exp. The trace records two PyTorch custom ops tied by an
autograd.Function, as attention.py does, and fused_ops.py turns them into
Zest's ops.

What takes PyTorch's path instead: class weights, probability (float)
targets, logits that are not [rows, classes] (a K-dimensional loss), and
zest-import --loss=math.
"""

import torch

from . import functions

# zest-import --loss: "fused" (the op) or "math" (PyTorch's decomposition).
MODE = "fused"

_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}

_LIBRARY = torch.library.Library("zest", "FRAGMENT")
_LIBRARY.define(
    "cross_entropy(Tensor logits, Tensor target, int reduction, "
    "int ignore_index, float label_smoothing) -> (Tensor, Tensor)"
)
_LIBRARY.define(
    "cross_entropy_backward(Tensor grad_loss, Tensor logits, Tensor target, "
    "Tensor lse, int reduction, int ignore_index, float label_smoothing) "
    "-> Tensor"
)


def _smoothed_targets(logits, target, ignore_index, label_smoothing):
    """Each row's target distribution (0 on ignored rows) and whether it is
    kept."""
    kept = target != ignore_index
    classes = logits.shape[-1]
    onehot = torch.nn.functional.one_hot(torch.where(kept, target, 0), classes)
    dist = onehot.to(logits.dtype) * (1 - label_smoothing) + label_smoothing / classes
    return dist * kept.unsqueeze(-1), kept


@torch.library.impl(_LIBRARY, "cross_entropy", "CompositeExplicitAutograd")
def cross_entropy(logits, target, reduction, ignore_index, label_smoothing):
    """The loss and each row's log-sum-exp, in (at least) float32: the eager
    reference of what the compiled kernels compute."""
    x = logits.to(torch.promote_types(logits.dtype, torch.float32))
    lse = torch.logsumexp(x, -1)
    dist, kept = _smoothed_targets(x, target, ignore_index, label_smoothing)
    rows = lse * kept - (dist * x).sum(-1)
    if reduction == 0:
        return rows, lse
    total = rows.sum()
    return (total / kept.sum() if reduction == 1 else total), lse


@torch.library.register_fake("zest::cross_entropy", lib=_LIBRARY)
def _(logits, target, reduction, ignore_index, label_smoothing):
    wide = torch.promote_types(logits.dtype, torch.float32)
    rows = logits.shape[0]
    loss = logits.new_empty((rows,) if reduction == 0 else (), dtype=wide)
    return loss, logits.new_empty((rows,), dtype=wide)


@torch.library.impl(_LIBRARY, "cross_entropy_backward", "CompositeExplicitAutograd")
def cross_entropy_backward(
    grad_loss, logits, target, lse, reduction, ignore_index, label_smoothing
):
    x = logits.to(lse.dtype)
    dist, kept = _smoothed_targets(x, target, ignore_index, label_smoothing)
    g = grad_loss.unsqueeze(-1) if reduction == 0 else grad_loss
    if reduction == 1:
        g = g / kept.sum()
    grad = (torch.exp(x - lse.unsqueeze(-1)) - dist) * g
    # Ignored rows get 0, even where a mean over no row made g NaN.
    return torch.where(kept.unsqueeze(-1), grad, 0.0).to(logits.dtype)


@torch.library.register_fake("zest::cross_entropy_backward", lib=_LIBRARY)
def _(grad_loss, logits, target, lse, reduction, ignore_index, label_smoothing):
    return torch.empty_like(logits)


class FusedCrossEntropy(torch.autograd.Function):
    """zest::cross_entropy with zest::cross_entropy_backward as its
    gradient."""

    @staticmethod
    def forward(logits, target, reduction, ignore_index, label_smoothing):
        return torch.ops.zest.cross_entropy(
            logits, target, reduction, ignore_index, label_smoothing
        )

    @staticmethod
    def setup_context(ctx, inputs, output):
        logits, target, reduction, ignore_index, label_smoothing = inputs
        _, lse = output
        ctx.save_for_backward(logits, target, lse)
        ctx.args = (reduction, ignore_index, label_smoothing)
        ctx.mark_non_differentiable(lse)

    @staticmethod
    def backward(ctx, grad_loss, _grad_lse):
        logits, target, lse = ctx.saved_tensors
        grad = torch.ops.zest.cross_entropy_backward(
            grad_loss, logits, target, lse, *ctx.args
        )
        return grad, None, None, None, None


def _fusable(logits, target, weight, reduction, label_smoothing):
    return (
        MODE == "fused"
        and functions.REGISTERED
        and weight is None
        and reduction in _REDUCTIONS
        and logits.dim() == 2
        and logits.dtype in (torch.float32, torch.bfloat16, torch.float16)
        and target.dim() == 1
        and target.dtype in (torch.int64, torch.int32)
        and target.shape[0] == logits.shape[0]
        and 0.0 <= float(label_smoothing) <= 1.0
    )


def cross_entropy(
    input,
    target,
    weight=None,
    size_average=None,
    ignore_index=-100,
    reduce=None,
    reduction="mean",
    label_smoothing=0.0,
    original=None,
):
    """torch.nn.functional.cross_entropy's semantics as the zest op."""
    if size_average is not None or reduce is not None:
        reduction = torch.nn._reduction.legacy_get_string(size_average, reduce)
    if not _fusable(input, target, weight, reduction, label_smoothing):
        return original(
            input,
            target,
            weight=weight,
            size_average=size_average,
            ignore_index=ignore_index,
            reduce=reduce,
            reduction=reduction,
            label_smoothing=label_smoothing,
        )
    if torch.is_autocast_enabled(input.device.type):
        input = input.float()  # autocast computes cross_entropy in float32
    loss, _ = FusedCrossEntropy.apply(
        input, target, _REDUCTIONS[reduction], int(ignore_index), float(label_smoothing)
    )
    return loss


def cross_entropy_loss(
    input,
    target,
    weight=None,
    reduction=1,
    ignore_index=-100,
    label_smoothing=0.0,
    original=None,
):
    """ATen's cross_entropy_loss (what an exported program calls), with its
    integer reduction."""
    names = {value: name for name, value in _REDUCTIONS.items()}

    def aten(
        input,
        target,
        weight=None,
        reduction="mean",
        ignore_index=-100,
        label_smoothing=0.0,
        **_
    ):
        return original(
            input, target, weight, _REDUCTIONS[reduction], ignore_index, label_smoothing
        )

    return cross_entropy(
        input,
        target,
        weight=weight,
        ignore_index=ignore_index,
        reduction=names.get(reduction, reduction),
        label_smoothing=label_smoothing,
        original=aten,
    )
