# Cross-entropy with what Hugging Face training adds to the plain loss:
# class weights and targets ignored (-100 and padding id 0, as labels of
# padded positions are), so the loss's backward (a one-hot compared with
# the targets, python/zest_import/decompositions.py) must weigh and skip
# exactly as PyTorch's scatter does.
import torch
from torch import nn
import torch.nn.functional as F

VOCAB, SEQ, D = 16, 8, 16


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D)
        self.mix = nn.Linear(D, D)
        self.head = nn.Linear(D, VOCAB)
        self.register_buffer("class_weight", torch.linspace(0.5, 1.5, VOCAB))

    def forward(self, ids):
        return self.head(torch.tanh(self.mix(self.tok(ids))))


def make():
    torch.manual_seed(0)
    ids = torch.randint(0, VOCAB, (2, SEQ))

    def loss_fn(model, ids):
        logits = model(ids)[:, :-1].reshape(-1, VOCAB)
        targets = ids[:, 1:].reshape(-1)
        # Every fourth target position is -100; id 0 is ignored in the
        # second term.
        positions = torch.arange(targets.shape[0])
        labels = torch.where(positions % 4 == 3, -100, targets)
        weighted = F.cross_entropy(logits, labels, weight=model.class_weight)
        summed = F.cross_entropy(logits, targets, ignore_index=0, reduction="sum")
        return weighted + summed / targets.shape[0]

    return TinyLM(), loss_fn, (ids,)
