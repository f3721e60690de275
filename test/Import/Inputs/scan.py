# torch.cumsum in both of its common uses: integer position ids counted
# from a padding mask (as Hugging Face models compute them) and a float
# running (causal) mean over the sequence, differentiated.
import torch
from torch import nn
import torch.nn.functional as F

VOCAB, SEQ, D = 16, 8, 16


class RunningMeanLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D)
        self.pos = nn.Embedding(SEQ + 1, D)
        self.mix = nn.Linear(D, D)
        self.head = nn.Linear(D, VOCAB)
        # A persistent buffer: in the state dict, a constant of the step.
        self.register_buffer("counts", torch.arange(1, SEQ + 1).float().view(1, SEQ, 1))

    def forward(self, ids):
        positions = (ids != 0).long().cumsum(dim=1)  # 0 = padding
        h = torch.tanh(self.mix(self.tok(ids) + self.pos(positions)))
        return self.head(h.cumsum(dim=1) / self.counts)


def make():
    torch.manual_seed(0)
    ids = torch.randint(0, VOCAB, (2, SEQ))

    def loss_fn(model, ids):
        logits = model(ids)
        return F.cross_entropy(
            logits[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1)
        )

    return RunningMeanLM(), loss_fn, (ids,)
