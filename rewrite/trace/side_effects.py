"""Side effects on objects that existed before the call, as Dynamo's SideEffects (seed §12.17).

While tracing, a write is applied only to the tracer's view: `obj.steps = n` makes later
reads of `obj.steps` see the new Var, `xs.append(t)` changes the ListVar's items. Nothing
real changes. The entry replays them after the graph has run, in program order:

    ___t0 = L['obj']          # every target object is looked up first, before any write
    ___t0.steps = 3           # attribute, global and nonlocal stores, last write wins
    L['xs'][:] = [x, ___o[0]] # lists and dicts that came in are refilled in place (same object)

At a graph break the replay runs before the eager step, which may look at them.
"""
from __future__ import annotations

from ..errors import Unsupported
from ..guards.source import AttrSource, CellContentsSource, GlobalSource, ItemSource, Source
from .values import ConstVar, ListVar, Var, note_mutation

DELETED = object()


class SideEffects:
    def __init__(self, tracer):
        self.tracer = tracer
        self.stores: dict[Source, object] = {}  # target -> Var (or DELETED), in order of the last write
        self.containers: dict[int, Var] = {}  # id -> ListVar/DictVar with a source, mutated in place
        self.recreated: set = set()  # attributes deleted, then set again: last in the object's __dict__

    def store(self, target: Source, value) -> None:
        note_mutation()
        if self.stores.pop(target, None) is DELETED and value is not DELETED:
            self.recreated.add(target)
        self.stores[target] = value
        if value is DELETED:
            self.tracer.wrapped.pop(target, None)
        else:
            self.tracer.wrapped[target] = value  # later reads through this source see the new value

    def load(self, target: Source):
        """The Var stored at `target` while tracing, or None when it was not written."""
        value = self.stores.get(target)
        if value is DELETED:
            raise Unsupported(f"{target.name()} read after it was deleted (the read raises eagerly)")
        return value

    def mutate(self, container: Var) -> None:
        """A list or dict that came in is about to change (its items are changed by the caller)."""
        if container.source is None:
            raise Unsupported("mutation of a list or dict the tracer cannot locate (no source)")
        note_mutation()
        self.containers[id(container)] = container

    def __bool__(self) -> bool:
        return bool(self.stores or self.containers)

    def replay(self, rebuild) -> tuple[list[str], list[str]]:
        """Python statements applying every side effect, `rebuild(Var) -> expression`: those
        that read every target and new value, then those that write."""
        lines, parents = [], {}

        def parent(source: Source) -> str:
            expr = source.expr()
            if expr not in parents:
                parents[expr] = f"___t{len(parents)}"
                lines.append(f"{parents[expr]} = {expr}")
            return parents[expr]

        targets = []
        for target, value in self.stores.items():
            if isinstance(target, GlobalSource):
                where = f"G[{target.global_name!r}]"
            elif isinstance(target, AttrSource):
                where = f"{parent(target.base)}.{target.attr}"
            elif isinstance(target, ItemSource):
                where = f"{parent(target.base)}[{target.index!r}]"
            elif isinstance(target, CellContentsSource):
                where = f"{parent(target.base)}.cell_contents"
            else:
                raise Unsupported(f"a store to {target.name()}")
            targets.append((where, value))
        boxes = [(parent(c.source), c) for c in self.containers.values()]
        # every new value is computed before any write: `a.x, a.y = a.y, a.x` reads both first
        writes = []

        def value_name(expr: str) -> str:
            name = f"___s{sum(line.startswith('___s') for line in lines)}"
            lines.append(f"{name} = {expr}")
            return name

        for (where, value), target in zip(targets, self.stores):
            if target in self.recreated and isinstance(target, AttrSource) and value is not DELETED:
                writes.append(f"{parent(target.base)}.__dict__.pop({target.attr!r}, None)")  # re-added at the end
            writes.append(f"del {where}" if value is DELETED else f"{where} = {value_name(rebuild(value))}")
        for box, c in boxes:
            if isinstance(c, ListVar):
                writes.append(f"{box}[:] = {value_name('[' + ', '.join(rebuild(v) for v in c.items) + ']')}")
            else:
                items = ", ".join(f"{rebuild(ConstVar(k))}: {rebuild(v)}" for k, v in c.items.items())
                writes += [f"{box}.clear()", f"{box}.update({value_name('{' + items + '}')})"]
        return lines, writes
