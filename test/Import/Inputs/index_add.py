# Segment sums with index_add (torch-mlir: tm_tensor.scatter in the
# forward; its backward is a gather): each sample's 8 rows are summed into 4
# segments by their ids, then a head and MSE.
import torch
from torch import nn


class SegmentPool(nn.Module):
    def __init__(self, d=8, segments=4):
        super().__init__()
        self.segments = segments
        self.fc = nn.Linear(d, d)
        self.out = nn.Linear(d, 2)

    def forward(self, x, ids):  # x [B, 8, d], ids [B, 8]
        h = torch.tanh(self.fc(x))
        pooled = []
        for b in range(x.shape[0]):  # unrolled over the static batch
            zeros = torch.zeros(self.segments, h.shape[-1])
            pooled.append(zeros.index_add(0, ids[b], h[b]))
        return self.out(torch.stack(pooled))


def make():
    torch.manual_seed(0)
    x, ids = torch.randn(2, 8, 8), torch.randint(0, 4, (2, 8))
    y = torch.randn(2, 4, 2)

    def loss_fn(model, x, ids, y):
        return nn.functional.mse_loss(model(x, ids), y)

    return SegmentPool(), loss_fn, (x, ids, y)
