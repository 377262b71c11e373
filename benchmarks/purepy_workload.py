"""Pure-Python workloads (no tensors) for benchmarks/hook.py: what an instrumented program
spends most of its time in when it is not calling torch -- small functions, methods,
recursion, closures made in loops, generators, sorting with key functions."""
from __future__ import annotations


class Node:
    def __init__(self, value, left=None, right=None):
        self.value, self.left, self.right = value, left, right

    def insert(self, value):
        if value < self.value:
            if self.left is None:
                self.left = Node(value)
            else:
                self.left.insert(value)
        elif self.right is None:
            self.right = Node(value)
        else:
            self.right.insert(value)

    def walk(self):
        if self.left is not None:
            yield from self.left.walk()
        yield self.value
        if self.right is not None:
            yield from self.right.walk()


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def tree(n):
    seed, root = 12345, Node(0)
    for _ in range(n):
        seed = (seed * 1103515245 + 12345) % (1 << 31)
        root.insert(seed % 100000)
    return sum(1 for _ in root.walk())


def closures(n):
    total = 0
    for i in range(n):
        def add(v, i=i):
            return v + i
        total += add(1)
    return total


def key_sort(n):
    words = [f"w{(i * 7919) % n:05d}" for i in range(n)]
    return sorted(words, key=lambda w: (w[-1], w))[:3]


def _norm(v):
    return (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]) ** 0.5


def nbody(steps):
    bodies = [[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 10.0], [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0],
              [0.0, 2.0, 0.0, -0.7, 0.0, 0.0, 0.5]]
    dt = 0.01
    for _ in range(steps):
        for i, a in enumerate(bodies):
            for b in bodies[i + 1:]:
                d = (a[0] - b[0], a[1] - b[1], a[2] - b[2])
                r = _norm(d) ** 3 + 1e-9
                for k in range(3):
                    a[3 + k] -= d[k] * b[6] * dt / r
                    b[3 + k] += d[k] * a[6] * dt / r
        for body in bodies:
            for k in range(3):
                body[k] += dt * body[3 + k]
    return round(bodies[0][0], 6)


def text(n):
    counts: dict[str, int] = {}
    for i in range(n):
        for word in f"the quick brown fox {i % 17} jumps over the lazy dog {i % 5}".split():
            counts[word] = counts.get(word, 0) + 1
    return max(counts.items(), key=lambda kv: kv[1])


WORKLOADS = {"fib(22)": (fib, 22), "binary tree 5000": (tree, 5000), "closures in a loop": (closures, 20000),
             "sort with key lambda": (key_sort, 20000), "n-body 2000 steps": (nbody, 2000),
             "word counts": (text, 4000)}
