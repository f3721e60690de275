# zest_import.attention against torch.nn.functional.scaled_dot_product_attention
# in float64, forward and the gradients of q, k and v: no mask, is_causal
# (as many, fewer and more keys than queries), a boolean mask shared by the
# batch, a float mask per batch row, rows with no key to attend to (padding:
# PyTorch's safe softmax gives them 0), grouped-query heads; blocks of 16
# and 32 (several blocks, split differently; causal blocks skipped).
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


def case_kwargs(case, batch, queries, keys):
    if case == "causal":
        return {"is_causal": True}
    if case == "bool":
        return {"attn_mask": torch.rand(queries, keys) > 0.3}
    if case == "float":
        return {"attn_mask": torch.randn(batch, 1, queries, keys, dtype=torch.float64)}
    if case == "padding":
        mask = torch.ones(batch, 1, queries, keys, dtype=torch.bool)
        mask[0, :, :3, :] = False  # queries that see nothing
        mask[1, :, :, :4] = False  # keys nobody sees
        return {"attn_mask": mask}
    return {}


torch.manual_seed(0)
worst, cases = 0.0, 0
cases_list = ["none", "causal", "bool", "float", "padding"]
for kv_heads, queries, keys, block, case in itertools.product(
    [4, 2], [5, 37, 70], [37, 70], [16, 32], cases_list
):
    attention.BLOCK = block
    q = torch.randn(2, 4, queries, 8, dtype=torch.float64)
    k = torch.randn(2, kv_heads, keys, 8, dtype=torch.float64)
    v = torch.randn(2, kv_heads, keys, 8, dtype=torch.float64)
    kwargs = case_kwargs(case, 2, queries, keys)
    if kv_heads != 4:
        kwargs["enable_gqa"] = True
    expected = run(q, k, v, **kwargs)
    with functions.FusedFunctionsMode():
        got = run(q, k, v, **kwargs)
    for e, g in zip(expected, got):
        worst = max(worst, (e - g).abs().max().item())
    cases += 1
print(
    f"{cases} cases, largest difference {worst:.1e}:",
    "equal" if worst < 1e-12 else "DIFFERENT",
)
