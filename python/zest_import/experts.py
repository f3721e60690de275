"""Mixture-of-experts layers imported as grouped products:
``zest.grouped_matmul`` and its weights' gradient
``zest.grouped_matmul_weight_grad``.

transformers 5 computes a model's experts (``@use_experts_implementation``
classes: Mixtral, Qwen2/Qwen3-MoE, OLMoE, ...) one of several ways, all the
same math: ``grouped_mm`` (the default: sort the (token, slot) rows by
expert, ``histc`` for the group sizes, ``torch.nn.functional.grouped_mm``),
``batched_mm`` (each row gathers its expert's weights: a copy of them per
row) and ``eager`` (a loop over the experts a batch hits, with shapes that
depend on the routing: not traceable). While the importer traces, each such
module computes ``experts_forward`` below instead, whichever it was
configured with (``ExpertsAsGroupedProducts``; restored after):

* the rows are grouped by expert with a counting sort written in tensor
  ops (a one-hot of the expert ids, its prefix sums by column): a row's
  place is its expert's first row plus the rows of the same expert before
  it. O(rows x experts x log rows) integer additions, no comparison sort,
  stable (rows keep their order within an expert);
* each projection is one grouped product over all rows with the experts'
  end offsets, computed at run time: the total number of rows (tokens x
  top-k) is static, which is what keeps the memory plan exact whatever the
  routing;
* the weighted rows go back to (token, slot) order and are summed per
  token, as transformers' implementations do.

``torch.nn.functional.grouped_mm`` (and ``torch._grouped_mm``) called by a
model's own code become the same op (``grouped_mm`` below, through
functions.FusedFunctionsMode). Offsets are the groups' cumulative ends;
rows past the last end get 0 (PyTorch leaves them undefined).
"""

import types

import torch

from . import functions
from .errors import ZestImportError

_LIBRARY = torch.library.Library("zest", "FRAGMENT")
_LIBRARY.define(
    "grouped_matmul(Tensor input, Tensor weight, Tensor offsets, "
    "bool transpose_weight) -> Tensor"
)
_LIBRARY.define(
    "grouped_matmul_weight_grad(Tensor input, Tensor grad_output, "
    "Tensor offsets, bool transpose_weight) -> Tensor"
)


def _group_bounds(offsets, rows):
    """(group, first row, end row) of each group, from the cumulative ends
    (eager reference only: it reads the offsets' values)."""
    start = 0
    for group, end in enumerate(offsets.tolist()):
        end = min(max(int(end), start), rows)
        yield group, start, end
        start = end


def _matrix(weight, group, transpose_weight):
    w = weight[group]
    return w.transpose(0, 1) if transpose_weight else w


def _output_columns(weight, transpose_weight):
    return weight.shape[1 if transpose_weight else 2]


def _weight_grad_shape(input, grad_output, offsets, transpose_weight):
    k, n = input.shape[1], grad_output.shape[1]
    return (offsets.shape[0],) + ((n, k) if transpose_weight else (k, n))


_LIBRARY.define("expert_routing(Tensor ends, int group_size) -> (Tensor, Tensor)")
_LIBRARY.define(
    "expert_dispatch(Tensor input, Tensor ends, Tensor routing, "
    "int group_size) -> Tensor"
)
_LIBRARY.define(
    "expert_combine(Tensor input, Tensor ends, Tensor routing, "
    "int group_size) -> Tensor"
)


def _single_rank(group_size):
    if group_size != 1:
        raise ZestImportError(
            "the expert exchanges run over one rank while importing "
            "(zestc --expert-parallel sets the expert groups)"
        )


@torch.library.impl(_LIBRARY, "expert_routing", "CompositeExplicitAutograd")
def expert_routing(ends, group_size):
    """The row counts each rank of an expert group sends this rank's
    experts, and the ends of the rows it receives: in a group of one rank,
    this rank's own counts and ends (zest.expert_routing)."""
    _single_rank(group_size)
    counts = torch.diff(ends.to(torch.int64), prepend=ends.new_zeros(1))
    return counts, ends.clone()


@torch.library.register_fake("zest::expert_routing", lib=_LIBRARY)
def _(ends, group_size):
    return ends.new_empty(ends.shape, dtype=torch.int64), ends.new_empty(ends.shape)


def _exchange_rows(input, ends, routing, group_size):
    _single_rank(group_size)
    return input.clone()


def _fake_exchange(input, ends, routing, group_size):
    return input.new_empty(input.shape)


for _name in ("expert_dispatch", "expert_combine"):
    torch.library.impl(_LIBRARY, _name, "CompositeExplicitAutograd")(_exchange_rows)
    torch.library.register_fake(f"zest::{_name}", lib=_LIBRARY)(_fake_exchange)


def _row_exchange(name, gradient, doc):
    """The autograd Function of the exchange zest::`name` over one rank,
    whose gradient is the exchange zest::`gradient` (dispatch and combine
    are each other's transpose)."""

    class RowExchange(torch.autograd.Function):
        @staticmethod
        def forward(input, ends, routing):
            return getattr(torch.ops.zest, name)(input, ends, routing, 1)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[1], inputs[2])

        @staticmethod
        def backward(ctx, grad_output):
            ends, routing = ctx.saved_tensors
            grad = getattr(torch.ops.zest, gradient)(grad_output, ends, routing, 1)
            return grad, None, None

    RowExchange.__name__ = RowExchange.__qualname__ = (
        "Expert" + name.split("_")[1].capitalize()
    )
    RowExchange.__doc__ = doc
    return RowExchange


ExpertDispatch = _row_exchange(
    "expert_dispatch",
    "expert_combine",
    "zest::expert_dispatch: rows grouped by expert to their experts' ranks.",
)
ExpertCombine = _row_exchange(
    "expert_combine",
    "expert_dispatch",
    "zest::expert_combine: the experts' rows back to where they came from.",
)


@torch.library.impl(_LIBRARY, "grouped_matmul", "CompositeExplicitAutograd")
def grouped_matmul(input, weight, offsets, transpose_weight):
    """Rows [ends[g-1], ends[g]) of `input` [rows, K] times group g's
    matrix (`weight` [groups, K, N], or [groups, N, K] transposed); rows
    past the last end are 0. Products accumulate in float32 at least."""
    wide = torch.promote_types(input.dtype, torch.float32)
    n = _output_columns(weight, transpose_weight)
    out = input.new_zeros((input.shape[0], n), dtype=wide)
    for group, start, end in _group_bounds(offsets, input.shape[0]):
        if start < end:
            w = _matrix(weight, group, transpose_weight).to(wide)
            out[start:end] = input[start:end].to(wide) @ w
    return out.to(input.dtype)


@torch.library.register_fake("zest::grouped_matmul", lib=_LIBRARY)
def _(input, weight, offsets, transpose_weight):
    return input.new_empty((input.shape[0], _output_columns(weight, transpose_weight)))


@torch.library.impl(_LIBRARY, "grouped_matmul_weight_grad", "CompositeExplicitAutograd")
def grouped_matmul_weight_grad(input, grad_output, offsets, transpose_weight):
    """Each group's weight gradient, input[rows of g]^T grad_output[rows of
    g] (transposed for a transposed weight); 0 for an empty group."""
    wide = torch.promote_types(input.dtype, torch.float32)
    shape = _weight_grad_shape(input, grad_output, offsets, transpose_weight)
    grad = input.new_zeros(shape, dtype=wide)
    for group, start, end in _group_bounds(offsets, input.shape[0]):
        g = input[start:end].to(wide).T @ grad_output[start:end].to(wide)
        grad[group] = g.T if transpose_weight else g
    return grad.to(input.dtype)


@torch.library.register_fake("zest::grouped_matmul_weight_grad", lib=_LIBRARY)
def _(input, grad_output, offsets, transpose_weight):
    return input.new_empty(
        _weight_grad_shape(input, grad_output, offsets, transpose_weight)
    )


class GroupedMatmul(torch.autograd.Function):
    """zest::grouped_matmul; the input's gradient is the grouped product of
    the output's gradient with the transposed matrices, the weights' is
    zest::grouped_matmul_weight_grad."""

    @staticmethod
    def forward(input, weight, offsets, transpose_weight):
        return torch.ops.zest.grouped_matmul(input, weight, offsets, transpose_weight)

    @staticmethod
    def setup_context(ctx, inputs, output):
        input, weight, offsets, transpose_weight = inputs
        ctx.save_for_backward(input, weight, offsets)
        ctx.transpose_weight = transpose_weight

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, offsets = ctx.saved_tensors
        grad_input = grad_weight = None
        if ctx.needs_input_grad[0]:
            grad_input = torch.ops.zest.grouped_matmul(
                grad_output, weight, offsets, not ctx.transpose_weight
            )
        if ctx.needs_input_grad[1]:
            grad_weight = torch.ops.zest.grouped_matmul_weight_grad(
                input, grad_output, offsets, ctx.transpose_weight
            )
        return grad_input, grad_weight, None, None


def _fusable(input, weight, offsets):
    return (
        functions.REGISTERED
        and input.dim() == 2
        and weight.dim() == 3
        and offsets.dim() == 1
        and offsets.shape[0] == weight.shape[0]
        and input.shape[1] == weight.shape[1]
        and input.dtype == weight.dtype
        and input.dtype in (torch.float32, torch.bfloat16, torch.float16)
        and offsets.dtype in (torch.int32, torch.int64)
    )


def grouped_mm(mat_a, mat_b, *args, offs=None, original=None, **kwargs):
    """torch.nn.functional.grouped_mm's 2-D x 3-D form (rows grouped by
    `offs`) as the op: `mat_b` [groups, K, N], possibly a transposed view of
    [groups, N, K] weights, which the op then reads in place."""
    # A bias or an output type (set, not just passed as None) takes
    # PyTorch's path.
    extra = args or any(value is not None for value in kwargs.values())
    if extra or offs is None or not _fusable(mat_a, mat_b, offs):
        return original(mat_a, mat_b, *args, offs=offs, **kwargs)
    transposed = mat_b.stride(-2) == 1 and mat_b.stride(-1) != 1
    weight = mat_b.transpose(-2, -1) if transposed else mat_b
    return GroupedMatmul.apply(mat_a, weight, offs, transposed)


def _rows_by_expert(expert_ids, num_experts):
    """(ends, perm, place) of a stable counting sort of the rows by expert:
    `ends` the experts' cumulative row counts (int32), `perm[j]` the row at
    sorted position j, `place[i]` row i's sorted position."""
    experts = torch.arange(num_experts, device=expert_ids.device)
    onehot = (expert_ids.unsqueeze(1) == experts).to(torch.int64)  # [S, E]
    counts = onehot.sum(0)
    ends = torch.cumsum(counts, 0)
    before = torch.cumsum(onehot, 0).gather(1, expert_ids.unsqueeze(1)).squeeze(1)
    place = (ends - counts)[expert_ids] + before - 1
    rows = torch.arange(expert_ids.shape[0], device=expert_ids.device)
    perm = torch.zeros_like(rows).index_put((place,), rows)
    return ends.to(torch.int32), perm, place


def _projection(module, x, name, expert_ids, ends):
    """x times the experts' `name` matrices (`gate_up_proj`, `up_proj`,
    `down_proj`), stored [experts, out, in] or, `is_transposed`, [experts,
    in, out]; plus the rows' experts' biases (`expert_ids`, None for
    experts without bias)."""
    weight = getattr(module, name)
    out = GroupedMatmul.apply(
        x.to(weight.dtype), weight, ends, not module.is_transposed
    )
    if module.has_bias:
        out = out + getattr(module, name + "_bias")[expert_ids]
    return out


def experts_forward(module, hidden_states, top_k_index, top_k_weights):
    """transformers' experts computation (the math of every
    ``experts_implementation``) as two grouped products."""
    if getattr(module, "_is_expert_parallel", False):
        raise ZestImportError(
            f"{type(module).__name__} is set up for transformers' expert "
            f"parallelism; build the model without it (Zest shards the experts itself)"
        )
    num_tokens, top_k = top_k_index.shape[0], top_k_index.shape[-1]
    expert_ids = top_k_index.reshape(-1)
    ends, perm, place = _rows_by_expert(expert_ids, module.num_experts)
    grouped_ids = expert_ids[perm] if module.has_bias else None
    x = hidden_states[perm // top_k]
    # The rows travel to their experts' ranks and back (zestc
    # --expert-parallel; over one rank, as here, nothing moves).
    routing, local_ends = torch.ops.zest.expert_routing(ends, 1)
    x = ExpertDispatch.apply(x, ends, routing)
    first = "gate_up_proj" if module.has_gate else "up_proj"
    x = _projection(module, x, first, grouped_ids, local_ends)
    x = module._apply_gate(x) if module.has_gate else module.act_fn(x)
    x = _projection(module, x, "down_proj", grouped_ids, local_ends)
    x = ExpertCombine.apply(x, ends, routing)
    if module.has_post_expert_norm:
        x = module.post_expert_norm(x)
    x = x * top_k_weights.reshape(-1)[perm].unsqueeze(-1)
    x = x[place].view(num_tokens, top_k, -1).sum(dim=1)
    return x.to(hidden_states.dtype)


def _is_experts(module):
    """A module of a class transformers' @use_experts_implementation
    wrapped."""
    return all(
        hasattr(module, name)
        for name in ("has_gate", "has_bias", "is_transposed", "num_experts")
    ) and hasattr(type(module), "_apply_gate")


class ExpertsAsGroupedProducts:
    """While active: every transformers experts module of `model` computes
    experts_forward, whatever its configured implementation; the instances'
    own forward comes back on exit."""

    def __init__(self, model):
        self.model = model
        self.patched = []

    def __enter__(self):
        for module in self.model.modules():
            if _is_experts(module) and "forward" not in vars(module):
                module.forward = types.MethodType(experts_forward, module)
                self.patched.append(module)
        return self

    def __exit__(self, *exc):
        for module in self.patched:
            del module.forward
        return False
