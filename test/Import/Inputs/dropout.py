# An MLP with dropout after each hidden layer (nn.Dropout and the functional
# form), as a user would write it for training.
import torch
from torch import nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self, d=16, hidden=32, classes=4):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.drop = nn.Dropout(0.25)
        self.fc2 = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, classes)

    def forward(self, x):
        x = self.drop(torch.relu(self.fc1(x)))
        x = F.dropout(torch.relu(self.fc2(x)), p=0.5, training=self.training)
        return self.out(x)


def make():
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(4, 16)
    y = torch.randint(0, 4, (4,))

    def loss_fn(model, x, y):
        return F.cross_entropy(model(x), y)

    return model, loss_fn, (x, y)
