"""Decompositions the importer adds to torch-mlir's table, for ATen ops
whose torch-mlir lowering leaves upstream MLIR.

cumsum: torch-mlir lowers it to ``tm_tensor.scan``, a dialect Zest does not
compile. Here it is an inclusive prefix sum by doubling (Hillis-Steele):
ceil(log2 n) rounds of ``x + (x shifted by 2^k along dim)``, each a slice,
a concatenation and an addition that linalg fuses and vectorizes: O(n log n)
additions where a sequential scan has n, but no loop-carried dependence and
no O(n^2) triangular product. Its backward (a reversed cumsum) takes the
same path. Sums associate differently from PyTorch's sequential scan: equal
within float rounding, exact for integers (position ids from a mask).

nll_loss_backward: PyTorch's decomposition scatters -1 into a zero tensor of
the logits' shape (one element per row); torch-mlir lowers the scatter to a
loop over a materialized [tokens, vocab] buffer, filled every step. Here the
one-hot is a comparison of the class index with the target, an elementwise
op that Zest fuses into the log-softmax backward that reads it: no buffer,
no fill, the same values.
"""

import torch

aten = torch.ops.aten


def cumsum(x, dim, dtype=None):
    if dtype is not None:
        x = x.to(dtype)
    elif not x.dtype.is_floating_point and not x.dtype.is_complex:
        x = x.to(torch.int64)  # as torch.cumsum promotes integers
    if x.dim() == 0:
        return x.clone()
    dim = dim % x.dim()
    n = x.shape[dim]
    shift = 1
    while shift < n:
        head = torch.zeros_like(x.narrow(dim, 0, shift))
        x = x + torch.cat([head, x.narrow(dim, 0, n - shift)], dim)
        shift *= 2
    return x


def nll_loss_backward(
    grad_output, self, target, weight, reduction, ignore_index, total_weight
):
    channel_dim = 0 if self.dim() < 2 else 1
    if reduction == 1:  # mean
        grad_output = grad_output / total_weight
    # As PyTorch's kernel: without a batch dimension only target[0] counts.
    if self.dim() == 1 and target.dim() > 0:
        target = target[0]
    target = target.unsqueeze(channel_dim)
    kept = target != ignore_index
    safe_target = torch.where(kept, target, 0)
    shape = [1] * self.dim()
    shape[channel_dim] = self.shape[channel_dim]
    classes = torch.arange(self.shape[channel_dim], device=self.device)
    grad_input = torch.where(classes.view(shape) == safe_target, -1.0, 0.0)
    grad_input = grad_input.to(self.dtype)
    if grad_input.dim() > grad_output.dim() > 0:
        grad_output = grad_output.unsqueeze(channel_dim)
    if weight is not None:
        shape[channel_dim] = weight.shape[0]
        grad_output = grad_output * weight.reshape(shape)
    grad_output = torch.where(kept, grad_output, 0)
    return grad_input * grad_output


def table():
    """{ATen overload: decomposition} added to torch-mlir's table."""
    return {
        aten.cumsum.default: cumsum,
        aten.nll_loss_backward.default: nll_loss_backward,
    }
