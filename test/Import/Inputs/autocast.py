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
