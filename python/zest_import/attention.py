"""scaled_dot_product_attention traced as blocked attention with an online
softmax (FlashAttention's algorithm, written in torch ops), so the imported
step never holds a [batch, heads, queries, keys] tensor.

PyTorch's math path (what make_fx traces otherwise) materializes the scores
and keeps the probabilities for the backward: 2 GiB per layer for 32 heads
at 4096 tokens. Eager's fused CPU and GPU kernels keep only the output and
the log-sum-exp of each row. Here the queries and keys are cut into blocks
(at most BLOCK rows each); each pair of blocks contributes its scores to a
running maximum, sum and output, and the backward recomputes each block's
probabilities from the saved log-sum-exp. The largest temporary is one
block's scores, [batch, heads, BLOCK, BLOCK]; with is_causal, blocks wholly
above the diagonal are skipped (half the products at long sequences, as
eager's kernels do). Every op is an ordinary ATen op, so the result is the
linalg-on-tensors contract and Zest compiles the blocks like any products
and elementwise chains.

What takes PyTorch's math path instead: attention that is one block
(queries and keys at most BLOCK; keeping its probabilities is then no larger
than a block and cheaper than recomputing them: GPT-2 124M at 128 tokens
plans 9.9 MB less, and skips a product per layer), dropout inside attention (its mask would have to be drawn again, block by
block, in the backward), a mask that requires a gradient, and inputs whose
batch dimensions broadcast rather than agree.
"""

import math

import torch

from . import functions

# Rows of queries and of keys per block (zest-import --attention-block):
# 256 keeps one block's scores at 256 KiB per head. 0: PyTorch's math path.
BLOCK = 256


def _blocks(n, size):
    return [(start, min(start + size, n)) for start in range(0, n, size)]


def _mask_block(mask, rows, cols):
    """The mask's block, its broadcast (size 1) dimensions left as they are:
    expanding them would write the whole mask out per batch and head."""
    (r0, r1), (c0, c1) = rows, cols
    if mask.dim() >= 2 and mask.shape[-2] != 1:
        mask = mask[..., r0:r1, :]
    if mask.dim() >= 1 and mask.shape[-1] != 1:
        mask = mask[..., c0:c1]
    return mask


def _masked_scores(q, k, scale, mask, causal, rows, cols, recompute=False):
    """Scores of query rows [rows) against key columns [cols), masked:
    a bool mask keeps True, a float mask is added, causal keeps j <= i.

    The backward's recomputation scales the queries before the product,
    the forward scales the product: the same scores within rounding, but
    not the same ops, so CSE cannot merge them and keep the forward's
    scores alive until the backward (which would undo the recomputation)."""
    (r0, r1), (c0, c1) = rows, cols
    q, k_t = q[..., r0:r1, :], k[..., c0:c1, :].transpose(-2, -1)
    if recompute:
        s = torch.matmul(q * scale, k_t)
    else:
        s = torch.matmul(q, k_t) * scale
    if mask is not None:
        m = _mask_block(mask, rows, cols)
        s = torch.where(m, s, -math.inf) if m.dtype == torch.bool else s + m
    if causal and c1 - 1 > r0:  # some column is above the diagonal
        i = torch.arange(r0, r1, device=q.device).unsqueeze(-1)
        j = torch.arange(c0, c1, device=q.device)
        s = torch.where(j <= i, s, -math.inf)
    return s


def _key_blocks(rows, n_keys, causal):
    """The key blocks query rows [rows) see: all of them, or with causal
    masking those starting at or before the last row."""
    return [c for c in _blocks(n_keys, BLOCK) if not causal or c[0] <= rows[1] - 1]


def _forward_rows(q, k, v, scale, mask, causal, rows):
    """Output and log-sum-exp of query rows [rows): a running maximum m,
    sum l and unnormalized output acc over the key blocks. Rows that see
    no key (all masked) give 0 and a log-sum-exp of +inf, which makes their
    recomputed probabilities 0 in the backward (PyTorch's safe softmax)."""
    m = l = acc = None
    for cols in _key_blocks(rows, k.shape[-2], causal):
        s = _masked_scores(q, k, scale, mask, causal, rows, cols)
        m_new = s.amax(-1) if m is None else torch.maximum(m, s.amax(-1))
        m_safe = torch.where(m_new == -math.inf, 0.0, m_new)
        p = torch.exp(s - m_safe.unsqueeze(-1))
        pv = torch.matmul(p.to(v.dtype), v[..., cols[0] : cols[1], :])
        if m is None:
            l, acc = p.sum(-1), pv
        else:
            alpha = torch.exp(m - m_safe)
            l = l * alpha + p.sum(-1)
            acc = acc * alpha.unsqueeze(-1) + pv
        m = m_new
    empty = l == 0
    out = acc / torch.where(empty, 1.0, l).unsqueeze(-1)
    lse = torch.where(empty, math.inf, m_safe + torch.log(l))
    return out.to(q.dtype), lse


def _forward(q, k, v, mask, causal, scale):
    outs, lses = [], []
    for rows in _blocks(q.shape[-2], BLOCK):
        out, lse = _forward_rows(q, k, v, scale, mask, causal, rows)
        outs.append(out)
        lses.append(lse)
    return torch.cat(outs, -2), torch.cat(lses, -1)


def _backward(d_out, q, k, v, mask, out, lse, causal, scale):
    """FlashAttention-2's backward by blocks: each block's probabilities
    recomputed from the log-sum-exp, D_i = dO_i . O_i = sum_j P_ij dP_ij.
    Under autocast (bfloat16 q, k, v; a float32 log-sum-exp) the
    probabilities and their gradient stay (at least) float32 and enter the
    products in the inputs' type, as in the forward; the backward runs
    outside autocast, so each product's operands must agree."""
    wide = torch.promote_types(q.dtype, torch.float32)
    delta = (d_out.to(wide) * out.to(wide)).sum(-1)
    n_keys = k.shape[-2]
    dk = [None] * len(_blocks(n_keys, BLOCK))
    dv = [None] * len(dk)
    dq = []
    for rows in _blocks(q.shape[-2], BLOCK):
        r0, r1 = rows
        do = d_out[..., r0:r1, :]
        dq_rows = None
        for b, cols in enumerate(_key_blocks(rows, n_keys, causal)):
            c0, c1 = cols
            s = _masked_scores(q, k, scale, mask, causal, rows, cols, True)
            p = torch.exp(s.to(wide) - lse[..., r0:r1].unsqueeze(-1))
            dp = torch.matmul(do, v[..., c0:c1, :].transpose(-2, -1))
            ds = p * (dp.to(wide) - delta[..., r0:r1].unsqueeze(-1)) * scale
            dv_b = torch.matmul(p.to(do.dtype).transpose(-2, -1), do)
            ds = ds.to(q.dtype)
            dk_b = torch.matmul(ds.transpose(-2, -1), q[..., r0:r1, :])
            dq_b = torch.matmul(ds, k[..., c0:c1, :])
            dv[b] = dv_b if dv[b] is None else dv[b] + dv_b
            dk[b] = dk_b if dk[b] is None else dk[b] + dk_b
            dq_rows = dq_b if dq_rows is None else dq_rows + dq_b
        dq.append(dq_rows)
    # Key blocks no query row sees (causal, more keys than queries).
    for b, (c0, c1) in enumerate(_blocks(n_keys, BLOCK)):
        if dk[b] is None:
            dk[b] = torch.zeros_like(k[..., c0:c1, :])
            dv[b] = torch.zeros_like(v[..., c0:c1, :])
    return torch.cat(dq, -2), torch.cat(dk, -2), torch.cat(dv, -2)


class BlockedAttention(torch.autograd.Function):
    """softmax(q k^T * scale + mask) v over equal-shaped heads and the
    log-sum-exp of each row (+inf where a row sees no key), by blocks."""

    @staticmethod
    def forward(q, k, v, mask, causal, scale):
        return _forward(q, k, v, mask, causal, scale)

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
        grads = _backward(d_out, q, k, v, mask, out, lse, ctx.causal, ctx.scale)
        return (*grads, None, None, None)


def _repeat_heads(x, n_rep):
    """GQA: each key/value head serves n_rep consecutive query heads."""
    return x if n_rep == 1 else x.repeat_interleave(n_rep, dim=-3)


def _autocast(query):
    """Under autocast PyTorch's math path cannot be traced (its backward
    multiplies a float32 gradient by bfloat16 probabilities), so attention
    that fits one block is still done here, as one block."""
    return torch.is_autocast_enabled(query.device.type)


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
    """torch.nn.functional.scaled_dot_product_attention's semantics, by
    blocks; `original` computes what this does not block (see above)."""
    blockable = (
        BLOCK > 0
        and (max(query.shape[-2], key.shape[-2]) > BLOCK or _autocast(query))
        and dropout_p == 0.0
        and query.dim() >= 3
        and query.shape[:-3] == key.shape[:-3] == value.shape[:-3]
        and key.shape[-2] == value.shape[-2]
        and (attn_mask is None or not attn_mask.requires_grad)
        and (attn_mask is None or not is_causal)  # as PyTorch refuses it
        and query.dtype.is_floating_point
        and functions.REGISTERED
    )
    if enable_gqa or key.shape[-3] != query.shape[-3]:
        heads, kv_heads = query.shape[-3], key.shape[-3]
        blockable = blockable and kv_heads > 0 and heads % kv_heads == 0
        if blockable:
            key = _repeat_heads(key, heads // kv_heads)
            value = _repeat_heads(value, heads // kv_heads)
    if not blockable:
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
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    mask = attn_mask
    if mask is not None and mask.dtype != torch.bool:
        mask = mask.to(query.dtype)
    out, _ = BlockedAttention.apply(query, key, value, mask, bool(is_causal), scale)
    return out
