"""scaled_dot_product_attention imported as one op: ``zest.attention`` and
its backward ``zest.attention_backward`` (FlashAttention-2's: the output
and each row's log-sum-exp are kept, the probabilities recomputed).

The trace records two PyTorch custom ops, ``zest::attention`` and
``zest::attention_backward``, whose autograd formula is the fused one, so
the traced backward keeps what eager's fused kernels keep. torch-mlir knows
neither: each becomes a call of a private function declaration while
torch-mlir lowers the rest to linalg (``lower_calls`` in this file's
companion ``fused_ops.py``), and the calls become Zest's ops at the end. A
layer's IR does not depend on the sequence length.

Queries, keys and values enter as ``[batch, heads, rows, features]``
(leading batch dimensions collapsed, a missing head dimension added), keys
and values with their own heads (grouped-query attention is never
repeated), the mask as 4-D with broadcast dimensions of size 1, boolean or
in the queries' type. What takes PyTorch's math path instead (``original``):
dropout inside attention, a mask that requires a gradient, non-float
inputs, inputs whose batch dimensions broadcast rather than agree, and
``zest-import --attention=math``.
"""

import math
import os

import torch

from . import functions

# zest-import --attention: "fused" (the op) or "math" (PyTorch's math path,
# every score materialized: for comparisons).
MODE = "fused"


# transformers' switch that passes grouped-query key/value heads to SDPA as
# they are (enable_gqa) even with a mask, instead of repeating them per
# query head (repeat_kv): CUDA's SDPA kernels need the repeat, the op does
# not.
_FORCE_GQA = "TRANSFORMERS_SDPA_FORCE_GQA"


class SdpaInsteadOfEager:
    """While active (with MODE "fused"): the Hugging Face models in `model`
    configured with transformers' eager attention (their own matmul,
    softmax, matmul) that support SDPA run SDPA instead, the same math,
    which the importer routes to the op. Models that cannot (no SDPA
    support, attention weights asked for) keep eager attention: its math
    path. The original setting comes back on exit. (A model's submodules
    share its config: switching the outermost switches them.) transformers
    also hands SDPA grouped-query key/value heads unrepeated where a mask
    is given (`_FORCE_GQA`), so the op reads each key/value head for its
    query heads instead of a copy per query head."""

    def __init__(self, model):
        self.model = model
        self.switched = []
        self.force_gqa = None
        self.forced = False

    def __enter__(self):
        if MODE != "fused":
            return self
        self.force_gqa = os.environ.get(_FORCE_GQA)
        self.forced = True
        os.environ[_FORCE_GQA] = "1"
        for module in self.model.modules():
            config = getattr(module, "config", None)
            if (
                getattr(config, "_attn_implementation", None) == "eager"
                and getattr(module, "_supports_sdpa", False)
                and hasattr(module, "set_attn_implementation")
                and not getattr(config, "output_attentions", False)
            ):
                module.set_attn_implementation("sdpa")
                self.switched.append(module)
        return self

    def __exit__(self, *exc):
        for module in self.switched:
            module.set_attn_implementation("eager")
        if self.forced:
            # As it was: set to its old value, or unset.
            if self.force_gqa is None:
                os.environ.pop(_FORCE_GQA, None)
            else:
                os.environ[_FORCE_GQA] = self.force_gqa
        return False


# The ops, defined without an autograd formula of their own: FusedAttention
# below is theirs (torch.library.custom_op's autograd registration is not
# traceable under torch.func's transforms).
_LIBRARY = torch.library.Library("zest", "FRAGMENT")
_LIBRARY.define(
    "attention(Tensor q, Tensor k, Tensor v, Tensor? mask, bool causal, "
    "float scale) -> (Tensor, Tensor)"
)
_LIBRARY.define(
    "attention_backward(Tensor d_out, Tensor q, Tensor k, Tensor v, "
    "Tensor out, Tensor lse, Tensor? mask, bool causal, float scale) "
    "-> (Tensor, Tensor, Tensor)"
)


@torch.library.impl(_LIBRARY, "attention", "CompositeExplicitAutograd")
def attention(q, k, v, mask, causal, scale):
    """The output and each row's log-sum-exp (+inf for a row that sees no
    key, whose output is 0), computed in (at least) float32: the eager
    reference of what the compiled kernels compute."""
    s = _scores(q, k, mask, causal, scale)
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - torch.where(torch.isinf(lse), 0.0, lse).unsqueeze(-1))
    p = torch.where(torch.isinf(lse).unsqueeze(-1), 0.0, p)
    out = torch.matmul(p, _wide(_per_query_head(v, q)))
    lse = torch.where(torch.isinf(lse), math.inf, lse)
    return out.to(q.dtype), lse


@torch.library.register_fake("zest::attention", lib=_LIBRARY)
def _(q, k, v, mask, causal, scale):
    out = q.new_empty(q.shape[:-1] + (v.shape[-1],))
    return out, q.new_empty(
        q.shape[:-1], dtype=torch.promote_types(q.dtype, torch.float32)
    )


@torch.library.impl(_LIBRARY, "attention_backward", "CompositeExplicitAutograd")
def attention_backward(d_out, q, k, v, out, lse, mask, causal, scale):
    """FlashAttention-2's gradients from the saved log-sum-exp."""
    s = _scores(q, k, mask, causal, scale)
    p = torch.where(
        torch.isinf(lse).unsqueeze(-1), 0.0, torch.exp(s - lse.unsqueeze(-1))
    )
    do = _wide(d_out)
    delta = (do * _wide(out)).sum(-1, keepdim=True)
    dp = torch.matmul(do, _wide(_per_query_head(v, q)).transpose(-2, -1))
    ds = p * (dp - delta) * scale
    dq = torch.matmul(ds, _wide(_per_query_head(k, q)))
    dk = _per_kv_head(torch.matmul(ds.transpose(-2, -1), _wide(q)), k)
    dv = _per_kv_head(torch.matmul(p.transpose(-2, -1), do), v)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


@torch.library.register_fake("zest::attention_backward", lib=_LIBRARY)
def _(d_out, q, k, v, out, lse, mask, causal, scale):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _per_query_head(x, q):
    """Key/value heads repeated for their query heads (the eager reference
    only: the op itself never repeats them)."""
    return x.repeat_interleave(q.shape[1] // x.shape[1], dim=1)


def _per_kv_head(grad, x):
    """Gradients of the repeated heads summed back onto each key/value head."""
    b, h, n, d = grad.shape
    return grad.reshape(b, x.shape[1], h // x.shape[1], n, d).sum(2)


def _wide(x):
    """x in float32, or float64 as it is."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def _scores(q, k, mask, causal, scale):
    s = torch.matmul(_wide(q), _wide(_per_query_head(k, q)).transpose(-2, -1)) * scale
    if mask is not None:
        s = (
            torch.where(mask, s, -math.inf)
            if mask.dtype == torch.bool
            else s + _wide(mask)
        )
    if causal:
        keep = torch.ones(
            q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device
        ).tril()
        s = torch.where(keep, s, -math.inf)
    return s


class FusedAttention(torch.autograd.Function):
    """zest::attention with zest::attention_backward as its gradient (the
    ops have no autograd formula of their own)."""

    @staticmethod
    def forward(q, k, v, mask, causal, scale):
        return torch.ops.zest.attention(q, k, v, mask, causal, scale)

    @staticmethod
    def setup_context(ctx, inputs, output):
        q, k, v, mask, causal, scale = inputs
        out, lse = output
        ctx.save_for_backward(q, k, v, mask, out, lse)
        ctx.causal, ctx.scale = causal, scale
        ctx.mark_non_differentiable(lse)

    @staticmethod
    def backward(ctx, d_out, _d_lse):
        q, k, v, mask, out, lse = ctx.saved_tensors
        dq, dk, dv = torch.ops.zest.attention_backward(
            d_out, q, k, v, out, lse, mask, ctx.causal, ctx.scale
        )
        return dq, dk, dv, None, None, None


def _as_4d(x, batch):
    """[batch..., heads, rows, features] with the batch dimensions collapsed
    into one; a missing head dimension (3-D input) added."""
    if x.dim() == 3:
        x = x.unsqueeze(1)
    return x.reshape(batch, *x.shape[-3:])


def _mask_4d(mask, query, lead):
    """The mask as [batch, heads, queries, keys] with broadcast dimensions of
    size 1 (the whole mask is never expanded per head); a float mask in the
    queries' type, as PyTorch requires."""
    if mask.dtype != torch.bool and mask.dtype != query.dtype:
        mask = mask.to(query.dtype)
    while mask.dim() < 2 + len(lead) + (1 if query.dim() > 3 else 0):
        mask = mask.unsqueeze(0)
    if query.dim() == 3:  # no head dimension: the mask has none either
        mask = mask.unsqueeze(-3)
    mask_lead = mask.shape[:-3]
    if all(size == 1 for size in mask_lead):
        batch = 1
    else:
        mask = mask.expand(*lead, *mask.shape[-3:])
        batch = math.prod(lead)
    return mask.reshape(batch, *mask.shape[-3:])


def _lead(x):
    """The batch dimensions: all but [heads, rows, features] ([rows,
    features] for 3-D inputs, which have no head dimension)."""
    return x.shape[:-3] if x.dim() > 3 else x.shape[:-2]


def _fusable(query, key, value, attn_mask, dropout_p, is_causal):
    return (
        MODE == "fused"
        and dropout_p == 0.0
        and query.dim() >= 3
        and query.dtype.is_floating_point
        and query.dtype == key.dtype == value.dtype
        and query.dim() == key.dim() == value.dim()
        and _lead(query) == _lead(key) == _lead(value)
        and key.shape[-2] == value.shape[-2]
        and (attn_mask is None or not attn_mask.requires_grad)
        and (attn_mask is None or not is_causal)  # as PyTorch refuses it
        and functions.REGISTERED
    )


def _autocast_dtype(query):
    """The type autocast computes attention in, or None outside autocast."""
    device = query.device.type
    if torch.is_autocast_enabled(device):
        return torch.get_autocast_dtype(device)
    return None


def _repeat_heads(x, groups):
    """`x` [..., kv_heads, rows, features] with each head repeated `groups`
    times in place, as transformers' repeat_kv repeats key/value heads."""
    *lead, kv_heads, rows, features = x.shape
    x = x.unsqueeze(-3).expand(*lead, kv_heads, groups, rows, features)
    return x.reshape(*lead, kv_heads * groups, rows, features)


def _head_counts(query, key):
    """The query's and the key's heads (1 without a head dimension)."""
    return (x.shape[-3] if x.dim() > 3 else 1 for x in (query, key))


def _math_path(
    original, query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa
):
    """PyTorch's own SDPA (`original`), grouped-query key/value heads
    repeated first: what transformers hands over unrepeated under
    `_FORCE_GQA` takes the path it took with repeat_kv."""
    heads, kv_heads = _head_counts(query, key)
    if enable_gqa and kv_heads not in (0, heads) and heads % kv_heads == 0:
        key, value = (_repeat_heads(x, heads // kv_heads) for x in (key, value))
        enable_gqa = False
    return original(
        query,
        key,
        value,
        attn_mask,
        dropout_p,
        is_causal,
        scale=scale,
        enable_gqa=enable_gqa,
    )


def scaled_dot_product_attention(
    query,
    key,
    value,
    attn_mask=None,
    dropout_p=0.0,
    is_causal=False,
    scale=None,
    enable_gqa=False,
    original=None,
):
    """torch.nn.functional.scaled_dot_product_attention's semantics as the
    zest::attention op; `original` computes what the op does not take."""
    heads, kv_heads = _head_counts(query, key)
    fusable = _fusable(query, key, value, attn_mask, dropout_p, is_causal)
    if kv_heads != heads and not enable_gqa:
        fusable = False  # PyTorch's own error
    if not fusable or kv_heads == 0 or heads % kv_heads != 0:
        return _math_path(
            original,
            query,
            key,
            value,
            attn_mask,
            dropout_p,
            is_causal,
            scale,
            enable_gqa,
        )
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    dtype = _autocast_dtype(query)
    if dtype is not None:
        query, key, value = query.to(dtype), key.to(dtype), value.to(dtype)
    lead = _lead(query)
    batch = math.prod(lead)
    q, k, v = (_as_4d(x, batch) for x in (query, key, value))
    mask = None if attn_mask is None else _mask_4d(attn_mask, query, lead)
    out, _ = FusedAttention.apply(q, k, v, mask, bool(is_causal), float(scale))
    return out.reshape(*query.shape[:-1], value.shape[-1])
