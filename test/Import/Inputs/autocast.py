# The MLP of mlp.py trained under torch.autocast(bfloat16), as FSDP's
# MixedPrecision(param_dtype=bfloat16) computes: float32 parameters, the
# linear layers and their activation in bfloat16, the loss in float32.
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(__file__))
from mlp import MLP  # noqa: E402


def loss_fn(model, x, y):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(x)
    return nn.functional.mse_loss(out.float(), y)


def make():
    torch.manual_seed(0)
    return MLP(), loss_fn, (torch.randn(8, 16), torch.randn(8, 4))


class Conv1D(nn.Module):
    """transformers' GPT-2 projection: x @ W + b through torch.addmm, W
    stored [in, out]; under autocast torch-mlir widens x and W back to f32
    around an f32 product."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_in, n_out) * 0.2)
        self.bias = nn.Parameter(torch.randn(n_out) * 0.1)

    def forward(self, x):
        return torch.addmm(self.bias, x, self.weight)


class AddmmMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = Conv1D(16, 32)
        self.down = Conv1D(32, 4)

    def forward(self, x):
        return self.down(nn.functional.gelu(self.up(x), approximate="tanh"))


def make_addmm():
    torch.manual_seed(0)
    return AddmmMLP(), loss_fn, (torch.randn(8, 16), torch.randn(8, 4))
