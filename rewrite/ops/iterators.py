"""CPython's iterators over containers that change while they are iterated, as steps of an
IteratorVar: what each checks before each item, in what order it walks, when it is
exhausted for good. The bottom of `rewrite/ops`, below `core` (which makes them in `iterate`).

* dict and its views (CPython's `dictiter_iternext*`): walk entry positions upward, so keys
  added meanwhile are reached and deleted ones skipped; raise when the size changed ("changed
  size", at each step again) or when they find more keys than the dict had ("keys changed");
* reversed dict (`dictreviter_iternext`): positions downward from the last one taken; raises
  when the size changed;
* OrderedDict (`odictiter_nextkey`): its links, from the key it holds next; raises when keys
  were added, removed or moved ("mutated"), unless it gave its last key already;
* set and frozenset (`setiter_iternext`): the hash table; raise when the size changed (other
  members at the same size: a graph break, the table's order is not known to the trace);
* deque, reversed deque (`dequeiter_next`): items by index; raise when the deque changed other
  than by item assignment, before or after they ran out;
* reversed list (`listreviter_next`): indices downward, reading the items as they are then.

Each iterator is exhausted for good once it is (CPython drops its container). A dict
iterator over a dict whose table CPython may have compacted since (an insertion into a full
table renumbers positions) cannot tell where it is: the step is a graph break (eager walks
the real table).
"""
from __future__ import annotations

import collections

from ..errors import Unsupported, python_error
from ..values.vars import DictVar, IteratorVar, ListVar, SetVar, TupleVar, Var, key_var


def _kind_of(container: type, view: str | None, reverse: bool = False) -> type:
    """The Python class of the iterator (the builtin's: no subclass code runs)."""
    empty = container()
    target = empty if view is None else getattr(empty, view)()
    return type(reversed(target) if reverse else iter(target))


class DictSteps:
    """A dict's (or a view's) iterator, forward or reversed. While the dict keeps its keys
    (no key added or removed), it walks the keys as they were (`keys`); once they changed, by
    positions (see values.vars.Entries)."""

    def __init__(self, d: DictVar, view: str | None, reverse: bool):
        items = d.items
        self.d, self.view, self.reverse = d, view, reverse
        self.size = len(items)  # what CPython's iterator expects (-1 once it raised: every step raises)
        self.left = len(items)  # items it may still give ("keys changed" past that)
        self.state, self.unsure = items.state, items.unsure
        self.keys = list(reversed(items) if reverse else items)
        self.pos = 0  # into keys
        self.last = items.next if reverse else -1  # the position of the key given last
        self.done = False

    def __call__(self) -> Var | None:
        items = self.d.items
        if self.done:
            return None
        if len(items) != self.size:
            self.size = -1
            raise python_error(RuntimeError, "dictionary changed size during iteration")
        key = self._fast(items) if items.state == self.state else self._by_position(items)
        if key is None:
            self.done = True
            return None
        if self.left == 0 and not self.reverse:
            self.done = True
            raise python_error(RuntimeError, "dictionary keys changed during iteration")
        self.left -= 1
        self.last = items.position[key]
        return self._item(items, key)

    def _fast(self, items):
        if self.pos >= len(self.keys):
            return None
        self.pos += 1
        return self.keys[self.pos - 1]

    def _by_position(self, items):
        if items.unsure != self.unsure:
            raise Unsupported("a dict changed while it was iterated, where CPython may have compacted its table "
                              "(the positions the iteration goes by are not known)")
        position, last = items.position, self.last
        if self.reverse:
            return next((k for k in reversed(items) if position[k] < last), None)
        return next((k for k in items if position[k] > last), None)

    def _item(self, items, key) -> Var:
        if self.view == "values":
            return items[key]
        if self.view == "items":
            return TupleVar([key_var(key), items[key]])
        return key_var(key)

    def snapshot(self):
        return self.size, self.left, self.pos, self.last, self.done

    def restore(self, saved) -> None:
        self.size, self.left, self.pos, self.last, self.done = saved


class OrderedDictSteps(DictSteps):
    """An OrderedDict's iterator: its keys as they were, while it has its keys in their order;
    a change of them raises, unless it gave its last key already (then it is exhausted)."""

    def __call__(self) -> Var | None:
        items = self.d.items
        if self.done or self.pos >= len(self.keys):
            self.done = True
            return None
        if items.state != self.state:
            self.done = True
            raise python_error(RuntimeError, "OrderedDict mutated during iteration")
        if len(items) != self.size:
            self.size = -1
            raise python_error(RuntimeError, "OrderedDict changed size during iteration")
        key = self._fast(items)
        return self._item(items, key)


class SetSteps:
    """A set's iterator: its members in the table's order as they were; a change of size
    raises (each step again); other members at the same size are a graph break."""

    def __init__(self, s: SetVar, members: list):
        self.s, self.members = s, members
        self.size, self.state = len(s.items), s.items.state
        self.pos = 0
        self.done = False

    def __call__(self) -> Var | None:
        items = self.s.items
        if self.done:
            return None
        if len(items) != self.size:
            self.size = -1
            raise python_error(RuntimeError, "Set changed size during iteration")
        if items.state != self.state:
            raise Unsupported("a set changed while it was iterated (its table's order is not known)")
        if self.pos >= len(self.members):
            self.done = True
            return None
        self.pos += 1
        return self.members[self.pos - 1]

    def snapshot(self):
        return self.size, self.pos, self.done

    def restore(self, saved) -> None:
        self.size, self.pos, self.done = saved


class DequeSteps:
    """A deque's iterator, forward or reversed: by index, over the items as they are, while the
    deque keeps its `state` (item assignment keeps it)."""

    def __init__(self, d: ListVar, reverse: bool):
        self.d, self.reverse = d, reverse
        self.state, self.left = d.state, len(d.items)
        self.index = len(d.items) - 1 if reverse else 0

    def __call__(self) -> Var | None:
        if self.d.state != self.state:
            self.left = 0
            raise python_error(RuntimeError, "deque mutated during iteration")
        if self.left == 0:
            return None
        item = self.d.items[self.index]
        self.index += -1 if self.reverse else 1
        self.left -= 1
        return item

    def snapshot(self):
        return self.index, self.left

    def restore(self, saved) -> None:
        self.index, self.left = saved


class ReversedListSteps:
    """`reversed(lst)`: indices from the last one when it was made, down; an index past the
    list's end (it shrank) ends it, for good."""

    def __init__(self, lst: ListVar):
        self.lst, self.index = lst, len(lst.items) - 1

    def __call__(self) -> Var | None:
        items = self.lst.items
        if 0 <= self.index < len(items):
            self.index -= 1
            return items[self.index + 1]
        self.index = -1
        return None

    def snapshot(self):
        return self.index

    def restore(self, saved) -> None:
        self.index = saved


def dict_iterator(d: DictVar, view: str | None = None, reverse: bool = False) -> IteratorVar:
    ordered = issubclass(d.py_type, collections.OrderedDict)
    steps = (OrderedDictSteps if ordered else DictSteps)(d, view, reverse)
    kind = _kind_of(collections.OrderedDict if ordered else dict, view, reverse)
    return IteratorVar(step=steps, py_type=kind)


def set_iterator(s: SetVar, members: list) -> IteratorVar:
    return IteratorVar(step=SetSteps(s, members), py_type=type(iter(set())))


def deque_iterator(d: ListVar, reverse: bool = False) -> IteratorVar:
    return IteratorVar(step=DequeSteps(d, reverse), py_type=_kind_of(collections.deque, None, reverse))


def reversed_list(lst: ListVar) -> IteratorVar:
    return IteratorVar(step=ReversedListSteps(lst), py_type=type(reversed([])))
