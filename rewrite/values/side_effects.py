"""Side effects on objects that existed before the call, as Dynamo's SideEffects (seed §12.17).

While tracing, a write is applied only to the tracer's view: `obj.steps = n` makes later
reads of `obj.steps` see the new Var, `xs.append(t)` changes the ListVar's items. Nothing
real changes. The entry replays them after the graph has run, in program order:

    ___t0 = L['obj']          # every target object is looked up first, before any write
    ___t0.steps = 3           # attribute, global and nonlocal stores, last write wins
    L['xs'][:] = [x, ___o[0]] # lists and dicts that came in are refilled in place (same object)

At a graph break the replay runs before the eager step, which may look at them.

A write is recorded under the first source that reached its `location` (a name in a real
namespace), so a read through another source sees it. Names added during the call, or
deleted and added again, are written last, in the order they came: the namespace's order
is then eager's. A name set and deleted again in the call leaves nothing to replay.
"""
from __future__ import annotations

import types

from ..errors import Unsupported
from ..guards.source import (GLOBALS, ODICT, AttrSource, BaseCopySource, CellContentsSource, ContextVarSource,
                             GlobalSource, ItemSource, ObjectAttrSource, Source, is_identifier, key_expr, py_str)
from .vars import ConstVar, ListVar, Var, key_var, note_mutation, watermark

DELETED = object()


def location(namespace, name) -> tuple:
    """What a write changes, whichever source reached it: a name in one real namespace. A
    module's attributes and its functions' globals are one dict (`state.FLAG` read in the
    caller is the `FLAG` a helper of `state` assigned with `global`)."""
    if issubclass(type(namespace), types.ModuleType):  # (its type: isinstance would ask a config its __class__)
        namespace = vars(namespace)
    return id(namespace), name  # the objects live as long as the trace (the call holds them)


class SideEffects:
    def __init__(self, tracer):
        self.tracer = tracer
        self.stores: dict[Source, object] = {}  # target -> Var (or DELETED), in order of the last write
        self.containers: dict[int, Var] = {}  # id -> ListVar/DictVar with a source, mutated in place
        self.located: dict[tuple, Source] = {}  # location -> the source its writes are recorded under
        self.existed: dict[Source, bool] = {}  # target -> whether it existed before the call
        self.present: dict[Source, bool] = {}  # target -> whether it exists now, in the trace's view
        self.inserted: dict[Source, int] = {}  # target -> when it was (re)added to its namespace: the
        # namespace's insertion order puts it last then (a dict's order is observable: `vars(o)`)
        self._clock = 0
        self.original: dict[Source, Var] = {}  # target -> the constant it held before the call
        self._saved_at, self._saved = -1, None  # the tables as they were at the root's latest checkpoint

    def _changing(self, container: Var | None = None) -> None:
        """Before a change (to `container`, a list or dict that came in, or to a name): the tables
        are saved once per checkpoint (see `undo_to_checkpoint`), the container's items too."""
        note_mutation(container)
        mark = watermark()
        if self._saved_at != mark:
            self._saved_at = mark
            self._saved = (dict(self.stores), dict(self.containers), dict(self.located), dict(self.existed),
                           dict(self.present), dict(self.inserted), self._clock, dict(self.tracer.wrapped))

    def undo_to_checkpoint(self) -> None:
        """Forget the writes made since the root frame's latest checkpoint (a graph break there)."""
        if self._saved_at != watermark():
            return
        (self.stores, self.containers, self.located, self.existed, self.present, self.inserted, self._clock,
         wrapped) = self._saved
        self.tracer.wrapped.clear()
        self.tracer.wrapped.update(wrapped)
        self._saved_at, self._saved = -1, None

    def _target(self, target: Source, where) -> Source:
        return target if where is None else self.located.setdefault(where, target)

    def store(self, target: Source, value, where: tuple | None = None, existed: bool = True,
              original: Var | None = None) -> None:
        """`target` (at `where`, a `location`) is assigned `value`, or deleted (DELETED).
        `existed`: whether it existed before the call (asked at its first write only);
        `original`: the constant it held then, guarded (a write of that again is no write)."""
        self._changing()
        target = self._target(target, where)
        if original is not None:
            self.original.setdefault(target, original)
        before = self.original.get(target)
        if value is DELETED:
            self.original.pop(target, None)  # (deleted and set again: it moves to the end of vars(o))
            before = None
        if before is not None and _same_constant(before, value) and self.existed.get(target, existed):
            self.forget(target)  # back to what it held before the call: nothing to replay
            self.tracer.wrapped[target] = value
            return
        self.existed.setdefault(target, existed)
        present = self.present.get(target, self.existed[target])
        if value is DELETED:
            self.inserted.pop(target, None)
        elif not present:
            self._clock += 1
            self.inserted[target] = self._clock
        self.present[target] = value is not DELETED
        self.stores.pop(target, None)
        self.stores[target] = value
        if value is DELETED:
            self.tracer.wrapped.pop(target, None)
        else:
            self.tracer.wrapped[target] = value  # later reads through this source see the new value

    def forget(self, target: Source, where: tuple | None = None) -> None:
        """`target` holds what it held before the call again (a ContextVar reset to its token):
        nothing to replay for it."""
        self._changing()
        target = self._target(target, where)
        for table in (self.stores, self.existed, self.present, self.inserted):
            table.pop(target, None)
        self.tracer.wrapped.pop(target, None)

    def stored(self, target: Source, where: tuple | None = None):
        """The Var written at `target` while tracing, DELETED, or None when it was not written."""
        if where is not None:
            target = self.located.get(where, target)
        return self.stores.get(target)

    def load(self, target: Source, where: tuple | None = None):
        """The Var stored at `target` while tracing, or None when it was not written."""
        value = self.stored(target, where)
        if value is DELETED:
            raise Unsupported(f"{target.name()} read after it was deleted (the read raises eagerly)")
        if value is not None:
            self.tracer.state_reads += 1  # (what the call wrote: the entry writes it only at its end)
        return value

    def mutate(self, container: Var) -> None:
        """A list or dict that came in is about to change (its items are changed by the caller)."""
        if container.source is None:
            raise Unsupported("mutation of a list or dict the tracer cannot locate (no source)")
        self._changing(container)
        self.containers[id(container)] = container

    def changed(self, source: Source) -> bool:
        """Whether the object at `source` (or anything of it) was written in this trace."""
        return any(c.source == source for c in self.containers.values()) or \
            any(s == source or getattr(s, "base", None) == source for s in self.stores)

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

        targets = [_statements(target, parent) for target in self.stores]  # (assign(value), delete)
        boxes = [(None if isinstance(c.source, BaseCopySource) else parent(c.source), c) for c in self.containers.values()]
        # every new value is computed before any write: `a.x, a.y = a.y, a.x` reads both first
        writes = []

        def value_name(expr: str) -> str:
            name = f"___s{sum(line.startswith('___s') for line in lines)}"
            lines.append(f"{name} = {expr}")
            return name

        last = []  # (re)added during the call: after the names that stayed, in the order they came
        for (target, value), (assign, delete) in zip(self.stores.items(), targets):
            if value is DELETED:
                if self.existed[target]:  # set and deleted again in the call: nothing to undo
                    writes.append(delete)
            elif target in self.inserted:
                last.append((self.inserted[target], target, assign, value))
            else:
                writes.append(assign(value_name(rebuild(value))))
        for _, target, assign, value in sorted(last, key=lambda t: t[0]):
            if self.existed[target]:  # deleted and set again: out of its old place first
                writes.append(_pop(target, parent))
            writes.append(assign(value_name(rebuild(value))))
        for box, c in boxes:
            if isinstance(c.source, BaseCopySource):  # a subclass's builtin part: its own methods, past the class's
                owner, kind = parent(c.source.base), c.source.builtin
                if isinstance(c, ListVar):
                    items = value_name('[' + ', '.join(rebuild(v) for v in c.items) + ']')
                    writes.append(f"list.__setitem__({owner}, slice(None), {items})")
                else:
                    items = value_name("{" + ", ".join(f"{rebuild(key_var(k))}: {rebuild(v)}"
                                                       for k, v in c.items.items()) + "}")
                    if kind == "odict":  # (in order, each with OrderedDict's own __setitem__)
                        writes += [f"{ODICT}.clear({owner})",
                                   f"for ___k, ___v in {items}.items(): {ODICT}.__setitem__({owner}, ___k, ___v)"]
                    else:
                        writes += [f"dict.clear({owner})", f"dict.update({owner}, {items})"]
            elif isinstance(c, ListVar) and c.py_type is not list:  # a deque: refilled in place
                items = value_name('[' + ', '.join(rebuild(v) for v in c.items) + ']')
                writes += [f"{box}.clear()", f"{box}.extend({items})"]
            elif isinstance(c, ListVar):
                writes.append(f"{box}[:] = {value_name('[' + ', '.join(rebuild(v) for v in c.items) + ']')}")
            else:
                items = ", ".join(f"{rebuild(key_var(k))}: {rebuild(v)}" for k, v in c.items.items())
                writes += [f"{box}.clear()", f"{box}.update({value_name('{' + items + '}')})"]
        return lines, writes


def _same_constant(a, b) -> bool:
    return isinstance(a, ConstVar) and isinstance(b, ConstVar) and type(a.value) is type(b.value) \
        and a.value == b.value


def _statements(target: Source, parent):
    """(value expression -> the statement assigning it to `target`, the statement deleting it)."""
    if isinstance(target, GlobalSource):
        where = f"{GLOBALS}[{py_str(target.global_name)}]"
    elif isinstance(target, ObjectAttrSource):  # past the class's own __setattr__ (the trace ran it)
        base, name = parent(target.base), py_str(target.attr)
        return (lambda v: f"object.__setattr__({base}, {name}, {v})"), f"object.__delattr__({base}, {name})"
    elif isinstance(target, AttrSource):
        base, name = parent(target.base), target.attr
        if not is_identifier(name):  # a name from data (setattr(obj, key, v)): a string, never code
            return (lambda v: f"setattr({base}, {py_str(name)}, {v})"), f"delattr({base}, {py_str(name)})"
        where = f"{base}.{name}"
    elif isinstance(target, ItemSource):
        where = f"{parent(target.base)}[{key_expr(target.index)}]"
    elif isinstance(target, CellContentsSource):
        where = f"{parent(target.base)}.cell_contents"
    elif isinstance(target, ContextVarSource):  # (set: a ContextVar cannot be unset without its token)
        base = parent(target.base)
        return (lambda v: f"{base}.set({v})"), None
    else:
        raise Unsupported(f"a store to {target.name()}")
    return (lambda v: f"{where} = {v}"), f"del {where}"


def _pop(target: Source, parent) -> str:
    """A statement taking `target` out of its namespace (it is added again at the end)."""
    if isinstance(target, ObjectAttrSource):
        return f"object.__getattribute__({parent(target.base)}, '__dict__').pop({py_str(target.attr)}, None)"
    if isinstance(target, AttrSource):
        return f"{parent(target.base)}.__dict__.pop({py_str(target.attr)}, None)"
    if isinstance(target, ItemSource):
        return f"{parent(target.base)}.pop({key_expr(target.index)}, None)"
    return f"{GLOBALS}.pop({py_str(target.global_name)}, None)"
