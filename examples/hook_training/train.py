"""A small training loop, unmodified, to run with and without the import hook:

    python examples/hook_training/train.py
    python -m rewrite.hook --report examples/hook_training/train.py

Both print the same losses; under the hook MLP.forward and loss_fn are compiled (--report).
"""
import sys

import torch

from model import MLP, loss_fn, make_data


def batches(x, y, size):
    for i in range(0, len(x), size):
        yield x[i:i + size], y[i:i + size]


def train(epochs=3, batch=32):
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = make_data(256)
    losses = []
    for _ in range(epochs):
        total = 0.0
        for xb, yb in batches(x, y, batch):
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            total += loss.item()
        losses.append(total)
    return losses


if __name__ == "__main__":
    for epoch, loss in enumerate(train(int(sys.argv[1]) if len(sys.argv) > 1 else 3)):
        print(f"epoch {epoch}: loss {loss!r}")
