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


def table():
    """{ATen overload: decomposition} added to torch-mlir's table."""
    return {aten.cumsum.default: cumsum}
