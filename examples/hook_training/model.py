"""The model code of the hook example: nothing in it mentions rewrite."""
import torch
import torch.nn.functional as F


class MLP(torch.nn.Module):
    def __init__(self, d_in=16, hidden=32, d_out=4):
        super().__init__()
        self.fc1 = torch.nn.Linear(d_in, hidden)
        self.norm = torch.nn.LayerNorm(hidden)
        self.fc2 = torch.nn.Linear(hidden, d_out)

    def forward(self, x):
        return self.fc2(F.gelu(self.norm(self.fc1(x))))


def loss_fn(logits, target):
    return F.cross_entropy(logits, target)


def make_data(n, d_in=16, classes=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d_in, generator=g)
    w = torch.randn(d_in, classes, generator=g)
    return x, (x @ w).argmax(-1)
