"""Property-based differential testing of rewrite against eager PyTorch (Hypothesis).

The generator of random PyTorch programs, the eager-vs-@jit oracle, `python -m fuzz` and
`fuzz.check(fn, ...)` are built in issue 3; this package is their home.
"""
