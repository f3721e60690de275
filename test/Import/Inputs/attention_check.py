# zest_import.attention (zest::attention and its backward, through the
# importer's routing of scaled_dot_product_attention) against PyTorch's
# own in float64, forward and the gradients of q, k and v: no mask,
# is_causal (as many, fewer and more keys than queries), a boolean mask
# shared by the batch, a float mask per batch row, rows with no key to
# attend to (padding: PyTorch's safe softmax gives them 0), grouped-query
# heads; inputs without a head dimension (3-D) and with two batch
# dimensions (5-D), masks of every rank up to the inputs'.
import itertools

import torch
import torch.nn.functional as F

from zest_import import attention, functions


def run(q, k, v, **kwargs):
    q, k, v = [t.clone().requires_grad_() for t in (q, k, v)]
    out = F.scaled_dot_product_attention(q, k, v, **kwargs)
    (
        out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)
    ).sum().backward()
    return out.detach(), q.grad, k.grad, v.grad


def case_kwargs(case, lead, queries, keys):
    if case == "causal":
        return {"is_causal": True}
    if case == "bool":
        return {"attn_mask": torch.rand(queries, keys) > 0.3}
    if case == "float":
        return {"attn_mask": torch.randn(*lead, 1, queries, keys, dtype=torch.float64)}
    if case == "padding":
        mask = torch.ones(*lead, 1, queries, keys, dtype=torch.bool)
        mask.view(-1, queries, keys)[0, :3, :] = False  # queries that see nothing
        mask.view(-1, queries, keys)[-1, :, :4] = False  # keys nobody sees
        return {"attn_mask": mask}
    return {}


def tensors(lead, heads, rows):
    shape = (*lead, heads, rows, 8) if heads else (*lead, rows, 8)
    return torch.randn(*shape, dtype=torch.float64)


# Every case must take the fused op, not PyTorch's path.
fused_calls = 0
apply = attention.FusedAttention.apply


def counted_apply(*args):
    global fused_calls
    fused_calls += 1
    return apply(*args)


attention.FusedAttention.apply = counted_apply

torch.manual_seed(0)
worst, cases = 0.0, 0
layouts = [((2,), 4, 4), ((2,), 4, 2), ((2, 3), 4, 4), ((3,), 0, 0)]
for (lead, heads, kv_heads), queries, keys, case in itertools.product(
    layouts, [5, 37, 70], [37, 70], ["none", "causal", "bool", "float", "padding"]
):
    q = tensors(lead, heads, queries)
    k, v = tensors(lead, kv_heads, keys), tensors(lead, kv_heads, keys)
    kwargs = case_kwargs(case, lead, queries, keys)
    if not heads and "attn_mask" in kwargs and kwargs["attn_mask"].dim() > 3:
        kwargs["attn_mask"] = kwargs["attn_mask"].squeeze(-3)
    if kv_heads != heads:
        kwargs["enable_gqa"] = True
    expected = run(q, k, v, **kwargs)
    with functions.FusedFunctionsMode():
        got = run(q, k, v, **kwargs)
    for e, g in zip(expected, got):
        worst = max(worst, (e - g).abs().max().item())
    cases += 1
print(f"{fused_calls} of {cases} cases fused")
print(
    f"{cases} cases, largest difference {worst:.1e}:",
    "equal" if worst < 1e-12 else "DIFFERENT",
)
