# zest_import.loss (zest::cross_entropy and its backward, through the
# importer's routing of cross_entropy, functional and ATen) against PyTorch's
# own in float32 (within 1e-6 of the largest magnitude): loss and logits'
# gradient for reductions none, mean and sum, label smoothing 0 and 0.2,
# ignored rows (and every row ignored); 3-D logits and class weights take
# PyTorch's path (float64, the same results).
import itertools

import torch
import torch.nn.functional as F

from zest_import import functions, loss

fused_calls = 0
apply = loss.FusedCrossEntropy.apply


def counted_apply(*args):
    global fused_calls
    fused_calls += 1
    return apply(*args)


loss.FusedCrossEntropy.apply = counted_apply


def run(fn, logits, target, **kwargs):
    logits = logits.clone().requires_grad_()
    out = fn(logits, target, **kwargs)
    (
        out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)
    ).sum().backward()
    return out.detach(), logits.grad


def aten(logits, target, reduction="mean", ignore_index=-100, label_smoothing=0.0):
    code = {"none": 0, "mean": 1, "sum": 2}[reduction]
    return torch.ops.aten.cross_entropy_loss.default(
        logits, target, None, code, ignore_index, label_smoothing
    )


torch.manual_seed(0)
worst, cases = 0.0, 0
for fn, reduction, smoothing, ignored, dtype in itertools.product(
    [F.cross_entropy, aten],
    ["none", "mean", "sum"],
    [0.0, 0.2],
    ["some", "all"],
    [torch.int64],
):
    logits = torch.randn(7, 11)
    target = torch.randint(0, 11, (7,))
    target[torch.tensor([1, 4])] = -100
    if ignored == "all":
        target[:] = -100
    target = target.to(dtype)
    kwargs = dict(reduction=reduction, label_smoothing=smoothing)
    expected = run(fn, logits, target, **kwargs)
    with functions.FusedFunctionsMode():
        got = run(fn, logits, target, **kwargs)
    for e, g in zip(expected, got):
        both_nan = torch.isnan(e) & torch.isnan(g)
        scale = max(1.0, e.nan_to_num(0).abs().max().item())
        difference = (e - g).abs().masked_fill(both_nan, 0).nan_to_num(1.0)
        worst = max(worst, difference.max().item() / scale)
    cases += 1
fused = fused_calls
# What the op does not take: PyTorch's path, the same results.
for kwargs in [{"weight": torch.rand(11, dtype=torch.float64)}]:
    logits, target = torch.randn(7, 11, dtype=torch.float64), torch.randint(0, 11, (7,))
    expected = run(F.cross_entropy, logits, target, **kwargs)
    with functions.FusedFunctionsMode():
        got = run(F.cross_entropy, logits, target, **kwargs)
    worst = max(worst, max((e - g).abs().max().item() for e, g in zip(expected, got)))
    cases += 1
logits, target = torch.randn(3, 11, 5, dtype=torch.float64), torch.randint(
    0, 11, (3, 5)
)
with functions.FusedFunctionsMode():
    got = run(F.cross_entropy, logits, target)
expected = run(F.cross_entropy, logits, target)
worst = max(worst, max((e - g).abs().max().item() for e, g in zip(expected, got)))
cases += 1
print(f"{fused} of {cases} cases fused")
print(
    f"{cases} cases, largest difference {worst:.1e}:",
    "equal" if worst < 1e-6 else "DIFFERENT",
)
