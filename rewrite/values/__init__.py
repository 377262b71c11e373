"""The value vocabulary the rules (`rewrite/ops`) and the tracer (`rewrite/trace`) share: the
`Var` kinds (`vars.py`) and the log of side effects on values that existed before the call
(`side_effects.py`). Below the rules: it imports only the leaves and `rewrite/guards`."""
