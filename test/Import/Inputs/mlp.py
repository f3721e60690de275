# A 2-layer MLP with an MSE loss, as a user would hand it to zest-import.
import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(16, 32), nn.GELU(approximate="tanh"), nn.Linear(32, 4)
        )

    def forward(self, x):
        return self.layers(x)


def loss_fn(model, x, y):
    return nn.functional.mse_loss(model(x), y)


def make():
    torch.manual_seed(0)
    return MLP(), loss_fn, (torch.randn(8, 16), torch.randn(8, 4))
