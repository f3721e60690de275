# Models and factories zest-import refuses, each with a clear error.
import torch
from torch import nn


def mse(model, x, y):
    return nn.functional.mse_loss(model(x), y)


def batchnorm():
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    return model, mse, (torch.randn(8, 4), torch.randn(8, 4))


def noise():
    class Noise(nn.Module):
        def forward(self, x):
            return x + 0.1 * torch.randn_like(x)  # Gaussian: no stream

    model = nn.Sequential(nn.Linear(4, 4), Noise())
    return model, mse, (torch.randn(8, 4), torch.randn(8, 4))


def not_a_triple():
    return nn.Linear(4, 4)


def data_dependent():
    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            y = self.fc(x)
            if y.sum() > 0:  # control flow on a value: not traceable
                return y
            return -y

    return Branchy(), mse, (torch.randn(8, 4), torch.randn(8, 4))


def sort():
    class Sorted(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            return torch.sort(self.fc(x), dim=1).values

    return Sorted(), mse, (torch.randn(8, 4), torch.randn(8, 4))


class Bessel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.special.i0(self.fc(x))  # no lowering in torch-mlir


def unlowered():
    class Wrapper(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Bessel()

        def forward(self, x):
            return self.inner(x)

    return Wrapper(), mse, (torch.randn(8, 4), torch.randn(8, 4))


def bf16_parameter():
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    model[1].to(torch.bfloat16)

    def loss_fn(model, x, y):  # loss_fn gets the module itself
        h = model[0](x).to(torch.bfloat16)
        return nn.functional.mse_loss(model[1](h).float(), y)

    return model, loss_fn, (torch.randn(8, 4), torch.randn(8, 4))


def no_parameters():
    return nn.ReLU(), lambda m, x: m(x).sum(), (torch.randn(8, 4),)


def raises():
    raise ValueError("no such checkpoint")  # factory errors are reported


def uneven_batch():
    return nn.Linear(4, 4), mse, (torch.randn(8, 4), torch.randn(6, 4))


def scalar_batch():
    def loss_fn(model, x, scale):
        return (model(x) * scale).mean()

    return nn.Linear(4, 4), loss_fn, (torch.randn(8, 4), torch.tensor(2.0))


def integer_loss():
    return nn.Linear(4, 4), lambda m, x: (m(x) > 0).sum(), (torch.randn(8, 4),)


def all_frozen():
    model = nn.Linear(4, 4).requires_grad_(False)
    return model, lambda m, x: m(x).pow(2).mean(), (torch.randn(8, 4),)


def topk_large():
    """topk beyond the k the importer decomposes (16): torch-mlir's sort."""

    class Largest(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 40)

        def forward(self, x):
            return torch.topk(self.fc(x), 20).values[:, :4]

    return Largest(), mse, (torch.randn(8, 4), torch.randn(8, 4))
