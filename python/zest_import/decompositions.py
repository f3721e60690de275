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

topk: torch-mlir lowers it to ``tm_tensor.topk``. For the small k of a
mixture-of-experts router (top-2 of 8 experts, top-8 of 128) it is k rounds
of a maximum, the first position holding it among those not yet taken, and
the gather of the value: 3k passes over each row, linalg reductions. Larger
k keeps torch-mlir's path (and is refused there).

scatter and scatter_add: the backward of topk and of gather (a router's
weights of its chosen experts) scatters into zeros of the input's shape
along the last dimension (dim -1, on which torch-mlir's lowering crashes).
Where the index covers the input but along `dim` has at most TOPK_ROUNDS
entries, it is that many elementwise selections or additions (no loop over
the updates); otherwise the dimension is made non-negative and torch-mlir
lowers it.

as_strided_scatter: functionalization writes an in-place update of a view
(DeepSeek's attention assigns into the rotary half of its query) as an
as_strided_scatter into the base, which torch-mlir does not lower. Where
the view is a box of the contiguous base (the base's strides, an offset
inside it), it is a slice_scatter per dimension.

histc: torch-mlir has no lowering. Each element's bin is computed
elementwise and the bins counted by comparison with every bin index, a
reduction over the elements: O(elements x bins), for the few bins of an
expert histogram.
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


# The largest k topk is decomposed for: a router's top-k of its experts.
TOPK_ROUNDS = 16


def _positions(x, dim):
    """Each index along `dim`, shaped to broadcast against `x`."""
    shape = [1] * x.dim()
    shape[dim] = x.shape[dim]
    return torch.arange(x.shape[dim], device=x.device).view(shape)


def topk(x, k, dim=-1, largest=True, sorted=True):
    if k > TOPK_ROUNDS or x.dim() == 0 or x.dtype == torch.bool:
        return NotImplemented
    dim = dim % x.dim()
    work = x if largest else -x
    positions = _positions(x, dim)
    low = float("-inf") if x.dtype.is_floating_point else torch.iinfo(x.dtype).min
    taken = torch.zeros_like(x, dtype=torch.bool)
    values, indices = [], []
    for _ in range(k):
        best = torch.where(taken, low, work).amax(dim, keepdim=True)
        candidate = torch.logical_and(work == best, torch.logical_not(taken))
        index = torch.where(candidate, positions, x.shape[dim]).amin(dim, keepdim=True)
        values.append(x.gather(dim, index))
        indices.append(index)
        taken = torch.logical_or(taken, positions == index)
    return torch.cat(values, dim), torch.cat(indices, dim)


def _scatter(x, dim, index, src, accumulate):
    """scatter (accumulate False) or scatter_add into `x` as selections (or
    additions) per index entry along `dim`, where `index` covers `x` but
    along `dim` holds at most TOPK_ROUNDS entries; None where it does not
    (the caller takes PyTorch's op, its dimension made non-negative)."""
    covers = index.dim() == x.dim() and all(
        index.shape[d] == x.shape[d] == src.shape[d] for d in range(x.dim()) if d != dim
    )
    if not covers or index.shape[dim] > TOPK_ROUNDS:
        return None
    positions = _positions(x, dim)
    for r in range(index.shape[dim]):
        at = positions == index.narrow(dim, r, 1)
        value = src.narrow(dim, r, 1).to(x.dtype)
        x = torch.where(at, x + value, x) if accumulate else torch.where(at, value, x)
    return x


def _scatter_decomposition(op, accumulate):
    """The decomposition of scatter `op` (scatter.src, or scatter_add with
    `accumulate`)."""

    def decomposition(x, dim, index, src):
        normal = dim % x.dim() if x.dim() else 0
        result = _scatter(x, normal, index, src, accumulate)
        if result is not None:
            return result
        # Decomposed again with the dimension non-negative: then PyTorch's.
        return NotImplemented if normal == dim else op(x, normal, index, src)

    return decomposition


scatter_src = _scatter_decomposition(aten.scatter.src, accumulate=False)
scatter_add = _scatter_decomposition(aten.scatter_add.default, accumulate=True)


def _contiguous_strides(shape):
    strides, step = [], 1
    for size in reversed(shape):
        strides.insert(0, step)
        step *= size
    return strides


def as_strided_scatter(x, src, size, stride, storage_offset=None):
    offset = storage_offset or 0
    base = _contiguous_strides(x.shape)
    if len(size) != x.dim() or list(stride) != base:
        return NotImplemented
    starts = [(offset // base[d]) % x.shape[d] for d in range(x.dim())]
    if sum(st * bs for st, bs in zip(starts, base)) != offset or any(
        st + sz > n for st, sz, n in zip(starts, size, x.shape)
    ):
        return NotImplemented

    def scatter(into, value, dim):
        if dim == into.dim():
            return value
        part = into.narrow(dim, starts[dim], size[dim])
        return torch.slice_scatter(
            into,
            scatter(part, value, dim + 1),
            dim,
            starts[dim],
            starts[dim] + size[dim],
        )

    return scatter(x, src.to(x.dtype), 0)


def histc(x, bins=100, min=0, max=0):
    if min == max:
        return NotImplemented  # the range comes from the data: not static
    low, high = float(min), float(max)
    wide = x.to(torch.promote_types(x.dtype, torch.float32))
    bin_of = ((wide - low) * (bins / (high - low))).floor().to(torch.int64)
    # The upper bound belongs to the last bin; values outside are not counted.
    bin_of = torch.where(wide == high, bins - 1, bin_of)
    inside = torch.logical_and(wide >= low, wide <= high)
    bin_of = torch.where(inside, bin_of, -1).reshape(-1, 1)
    counts = (bin_of == torch.arange(bins, device=x.device)).sum(0)
    return counts.to(x.dtype)


def table():
    """{ATen overload: decomposition} added to torch-mlir's table."""
    return {
        aten.cumsum.default: cumsum,
        aten.nll_loss_backward.default: nll_loss_backward,
        aten.topk.default: topk,
        aten.histc.default: histc,
        aten.scatter.src: scatter_src,
        aten.scatter_add.default: scatter_add,
        aten.as_strided_scatter.default: as_strided_scatter,
    }
