"""The `eager` backend: run the captured GraphModule as it is (checks the capture, not codegen).

torch.fx writes a graph's constant arguments into its code with `repr`: right for numbers,
strings, dtypes and devices, not for the other objects a graph may hold as arguments (a
logger's bound method a log node calls, a function passed to an op, a tensor). Those are made
attributes of the module and read through `get_attr` nodes first -- as is a negative number raised to a power (fx writes `-2 ** x`).
"""
import enum
import math
import operator

import torch

from rewrite.registry import register_backend


@register_backend(native=True)
def eager(gm, example_inputs):
    if lift_constants(gm):
        gm.recompile()
    return gm.forward


# what torch.fx's code writes as itself (its repr, read back by its own globals: torch, device, inf, ...)
LITERALS = (type(None), bool, int, float, complex, str, type(Ellipsis), torch.dtype, torch.device, torch.layout,
            torch.memory_format, enum.Enum)


def written_as_itself(a) -> bool:
    """Whether fx's code for `a`, a node's argument, makes `a` again (or the node it names)."""
    if isinstance(a, (torch.fx.Node, *LITERALS)):
        return True
    if isinstance(a, (tuple, list)):
        return all(written_as_itself(x) for x in a)
    if isinstance(a, slice):
        return all(written_as_itself(x) for x in (a.start, a.stop, a.step))
    if isinstance(a, dict):
        return all(type(k) is str and written_as_itself(v) for k, v in a.items())
    return False


def lift_constants(gm: torch.fx.GraphModule) -> bool:
    """Make each argument fx cannot write as itself an attribute of `gm`, read by a `get_attr`
    node before its first user; whether any was."""
    lifted: dict[int, torch.fx.Node] = {}

    def lift(a, user):
        if written_as_itself(a):
            return a
        if isinstance(a, (tuple, list)) and not hasattr(a, "_fields"):  # (a named tuple: lifted whole)
            items = [lift(x, user) for x in a]
            return tuple(items) if isinstance(a, tuple) else items
        if isinstance(a, dict):
            return {k: lift(v, user) for k, v in a.items()}
        return attribute(a, user)

    def attribute(a, user):
        node = lifted.get(id(a))
        if node is None:
            name = f"_rewrite_constant_{len(lifted)}"
            setattr(gm, name, a)
            with gm.graph.inserting_before(user):
                node = lifted[id(a)] = gm.graph.get_attr(name)
        return node

    for node in list(gm.graph.nodes):
        if node.op in ("call_function", "call_method") and \
                not (written_as_itself(node.args) and written_as_itself(node.kwargs)):
            node.args = lift(node.args, node)
            node.kwargs = lift(node.kwargs, node)
        if node.op == "call_function" and node.target in (operator.pow, operator.ipow) and \
                _negative(node.args[0]):  # fx writes `-2 ** x`: -(2 ** x)
            node.args = (attribute(node.args[0], node), *node.args[1:])
    return bool(lifted)


def _negative(a) -> bool:
    """A number written with a leading minus (-2, -0.0, -inf)."""
    return type(a) in (int, float) and math.copysign(1, a) < 0
