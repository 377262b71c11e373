"""A tour of rewrite: one function, its captured graph, its guards, a recompile, and speed.

Run: .venv/bin/python examples/demo.py
"""
import timeit

import torch

import rewrite
from rewrite import dispatcher_of, jit


def f(x, n):
    y = x * 2
    for i in range(n):
        y = y + i
    return y.relu()


def eager_f(x, n):
    y = x * 2
    for i in range(n):
        y = y + i
    return y.relu()


def branchy(x):
    y = x * 2
    if y.sum() > 0:  # data-dependent: the graph breaks here
        z = y.relu()
    else:
        z = y.tanh()
    return z + 1


def main():
    original = f
    assert jit(f) is original, "jit rewrites f.__code__ in place and returns f itself"

    x = torch.randn(4, 4)
    for n in (3, 3, 5):
        torch.testing.assert_close(f(x, n), eager_f(x, n))
    entries = dispatcher_of(f).entries
    print(f"f(x, 3), f(x, 3), f(x, 5): {len(entries)} cache entries (the guard on n failed once)\n")

    newest, oldest = entries[0], entries[-1]
    print("== the graph captured for n=3 (the loop is unrolled) ==")
    print(oldest.graph_module.code.strip(), "\n")
    print("== its guards: one generated Python closure ==")
    print(oldest.guard.source)
    print("== why the n=3 entry rejected n=5 ==")
    print(" -", oldest.guard.failures((x, 5))[0], "\n")
    print("== the entry that runs on a hit (python backend, straight-line torch calls) ==")
    print(newest.source)

    print("== a graph break: explain() on Dynamo's own example ==")
    print(rewrite.explain(branchy)(x), "\n")

    print("== speed: a cache hit against a direct call and torch.compile(backend='eager') ==")
    dynamo_f = torch.compile(eager_f, backend="eager")
    dynamo_f(x, 3), dynamo_f(x, 3)
    g = {"f": f, "eager_f": eager_f, "dynamo_f": dynamo_f, "x": x}
    t = {name: min(timeit.repeat(f"{name}(x, 3)", globals=g, number=20000, repeat=5)) / 20000 * 1e6
         for name in ("eager_f", "f", "dynamo_f")}
    print(f"direct call        {t['eager_f']:7.2f} µs")
    print(f"@jit (rewrite)     {t['f']:7.2f} µs   overhead {t['f'] - t['eager_f']:+.2f} µs")
    print(f"torch.compile      {t['dynamo_f']:7.2f} µs   overhead {t['dynamo_f'] - t['eager_f']:+.2f} µs")
    rewrite.reset()


if __name__ == "__main__":
    main()
