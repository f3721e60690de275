# zest_import's nll_loss_backward against PyTorch's kernel.
import torch
from zest_import.decompositions import nll_loss_backward

aten = torch.ops.aten
torch.manual_seed(0)
cases = equal = 0
for batched in (True, False):
    for reduction in (0, 1, 2):  # none, mean, sum
        for weighted in (False, True):
            for ignore_index in (-100, 3):
                logp = torch.randn(6, 7).log_softmax(-1) if batched else torch.randn(7)
                if batched:
                    ignored = -100 if ignore_index == -100 else 2
                    target = torch.tensor([3, 0, ignored, 6, 3, 1])
                else:
                    target = torch.tensor(3 if ignore_index != 3 else 5)
                weight = torch.rand(7) + 0.5 if weighted else None
                out, total = aten.nll_loss_forward(
                    logp, target, weight, reduction, ignore_index
                )
                grad = torch.randn_like(out)
                args = (grad, logp, target, weight, reduction, ignore_index, total)
                expected = aten.nll_loss_backward(*args)
                cases += 1
                equal += torch.equal(nll_loss_backward(*args), expected)
print(f"{equal} cases equal" if equal == cases else f"{equal} of {cases} equal")
