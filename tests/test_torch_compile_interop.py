"""torch.compile of jitted code, or of code that calls it: Dynamo traces the original
instructions (the prologue's Slot is not a constant it accepts), whether torch._dynamo is
imported before rewrite or after it."""
import subprocess
import sys
import textwrap

import pytest

PROGRAM = """
{first}
import torch
import rewrite
{second}

@rewrite.jit
def helper(x):
    return torch.sigmoid(x) * 3

def calls_helper(x):
    return helper(x * 2) + 1

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return helper(self.lin(x))

torch.manual_seed(0)
x = torch.randn(2, 4)
eager_helper = lambda x: torch.sigmoid(x) * 3
print(torch.allclose(helper(x), eager_helper(x)))  # compiled by rewrite first
for fn, expected in [(helper, eager_helper(x)), (calls_helper, eager_helper(x * 2) + 1)]:
    compiled = torch.compile(fn, backend="eager", fullgraph=True)
    print(torch.allclose(compiled(x), expected), torch.allclose(compiled(x), expected))
net = rewrite.jit(Net())
print(torch.allclose(net(x), eager_helper(net.lin(x))))
compiled = torch.compile(net, backend="eager", fullgraph=True)
print(torch.allclose(compiled(x), eager_helper(net.lin(x))))
print(torch._dynamo.explain(calls_helper)(x).graph_count)
"""


@pytest.mark.parametrize("order", ["dynamo first", "rewrite first"])
def test_torch_compile_of_and_around_jitted_functions(order):
    first, second = ("import torch._dynamo", "") if order == "dynamo first" else ("", "import torch._dynamo")
    source = textwrap.dedent(PROGRAM.format(first=first, second=second))
    got = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr[-3000:]
    assert got.stdout.split() == ["True"] * 7 + ["1"], got.stdout + got.stderr[-2000:]
