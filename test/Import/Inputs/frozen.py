# Fine-tuning: a pretrained-style encoder layer frozen (requires_grad=False)
# under a trained head, as a user freezes part of a model.
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
        self.head = nn.Sequential(
            nn.Linear(32, 32), nn.GELU(approximate="tanh"), nn.Linear(32, 4)
        )

    def forward(self, x):
        return self.head(self.encoder(x))


def loss_fn(model, x, y):
    return nn.functional.mse_loss(model(x), y)


def make():
    torch.manual_seed(0)
    model = Model()
    for param in model.encoder.parameters():
        param.requires_grad_(False)
    return model, loss_fn, (torch.randn(8, 16), torch.randn(8, 4))
