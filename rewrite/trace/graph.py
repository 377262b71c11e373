"""The graph builder: owns the trace's graph (a `rewrite.nodes.Graph`), nothing else does.

The interpreter asks it for placeholders (one per input source) and op calls. Each op is
run on the real values while it is recorded ("tracing may run the real ops"), so shapes,
dtypes and the op's own errors are exactly eager's.
"""
from __future__ import annotations

import operator
import re
import types
import warnings
import weakref

import numpy
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .. import nodes
from ..errors import Unsupported, UserError, WritesInputs
from ..guards.source import Source
from ..values.vars import (ConstVar, DictVar, IdentityKey, ListVar, ObjectVar, ScalarVar, SymIntVar, TensorVar,
                           TupleVar, Var, make_tuple)


class GraphBuilder:
    def __init__(self, clone_inputs: bool = False, facts: bool = True):
        """With `clone_inputs`, the trace runs on copies of the inputs (see `input_copy`): the
        user's code writes into its inputs, and the trace must not do so before the entry runs.
        Without `facts`, the graph goes to the python backend, which reads no facts of the ops'
        results (see _describe): none are kept."""
        self.clone_inputs = clone_inputs
        self.facts = facts
        self._describe = _describe if facts else _mark
        self.ops_in_try = False  # (an op an `except` covers was recorded, or is being recorded: see _copy_written)
        self.copied_lazily = False  # the trace began on the real inputs and went on on copies (_copy_written)
        self._copies: dict = {}  # storage of an input -> its copy (inputs sharing memory still do)
        self._originals: dict = {}  # id(copy) -> the input it copies
        self._copied_at: dict = {}  # id(copy) -> its version counter when made (see writes_into_copy)
        self.graph = nodes.Graph()
        self.inputs: list[tuple[Source, torch.Tensor, nodes.Node]] = []
        self._by_source: dict[Source, TensorVar] = {}
        self._names: set[str] = set()
        self.input_storages: set[int] = set()
        self.op_count = 0
        self.data_dependent = False  # whether an op's output shape came from data (ops.tensors._record)
        self._created: list[nodes.Node] = []  # every node, in creation order (for rollback)
        # the nodes the entry's checks ask about (rewrite/compile.py), in creation order: those that
        # draw random numbers, make a log record, may raise on their values, switch grad mode or
        # enter a context (a mode) -- what they find without a walk of every node
        self.marked: list[nodes.Node] = []
        self.input_ids: set[int] = set()
        self._write_check = _InputWriteCheck(self.input_storages, self.input_ids)
        self._real_of: dict = {}  # node -> a weak reference to the real tensor it computed
        self.shape_env = None  # the trace's ShapeEnv, once an input has a symbolic size (see `symbolic_sizes`)

    def release(self) -> None:
        """Forget the inputs and the values the trace computed (the compile is done)."""
        self.inputs.clear()
        self._by_source.clear()
        self._copies.clear()
        self._originals.clear()
        self._copied_at.clear()
        self._real_of.clear()

    # -- inputs ---------------------------------------------------------------------------

    def placeholder(self, source: Source, value: torch.Tensor) -> TensorVar:
        var = self._by_source.get(source)
        if var is not None:
            return var
        storage = _storage(value)
        # a trace on copies from the start copies every input; one that went on copies midway
        # (_copy_written) copies only an input whose memory it copied already -- the others stay
        # the real ones until an op would write into them (then copied there, by _copy_written,
        # or the call traced again on copies): a model's parameters, read only, are not copied
        # because a BatchNorm wrote its running stats
        copy_now = not self.copied_lazily or storage in self._copies
        if storage is not None:
            self.input_storages.add(storage)
        self.input_ids.add(id(value))
        if self.clone_inputs and copy_now:
            copy = input_copy(value, self._copies)
            self._originals[id(copy)] = value
            self._copied_at[id(copy)] = copy._version
            value = copy
        node = self._input_node(source, value)
        var = TensorVar(node, value, source)
        self._by_source[source] = var
        return var

    def int_input(self, source: Source, value: int, env) -> "SymIntVar":
        """A Python int argument made a symbol: a graph input of its own."""
        node = self._input_node(source, value)
        sym = env.size(value, source, integer=True)
        node.meta["sym_shape"] = sym
        self.shape_env = env
        return SymIntVar(node, sym, value, env, source)

    def symbolic_sizes(self, var: TensorVar, sym: tuple, env) -> None:
        """An input's sizes, some of them symbols of `env`, the trace's ShapeEnv: kept with the
        graph, as what the trace decided on them (a size it pinned) decides what the hand-off
        to torch's backends makes dynamic (rewrite/handoff.py)."""
        var.sym = sym
        var.node.meta["sym_shape"] = sym
        self.shape_env = env

    def size_input(self, source: Source, value: int):
        """A tensor input's size as a graph input of its own, as Dynamo's graphs take one for
        each symbol in their inputs' sizes (what rewrite/handoff.py gives torch's backends)."""
        return self._input_node(source, value)

    def _input_node(self, source: Source, value):
        """A placeholder for `source`; placeholders go first, in the order inputs were met."""
        name = self._fresh(_NON_WORD.sub("_", source.name()).strip("_") or "arg")
        node = self.graph.placeholder(name)
        self._created.append(node)
        node.meta["example_value"] = value
        node.meta["source"] = source
        self.inputs.append((source, value, node))
        if isinstance(value, torch.Tensor):
            self._real_of[node] = weakref.ref(value)
        return node

    def is_input_memory(self, t: torch.Tensor) -> bool:
        """Whether `t` views an input's memory (a change to its metadata is the caller's too)."""
        return _storage(t) in self.input_storages

    def var_of(self, node) -> TensorVar:
        """A TensorVar for a node whose tensor is still alive (what a higher-order op's body read)."""
        ref = self._real_of.get(node)
        value = ref() if ref is not None else None
        if value is None:
            raise Unsupported("a value a higher-order op's body reads that is not a tensor")
        return TensorVar(node, value)

    def _fresh(self, base: str) -> str:
        if base[0].isdigit():
            base = "_" + base
        name, i = base, 1
        while name in self._names:
            name, i = f"{base}_{i}", i + 1
        self._names.add(name)
        return name

    # -- ops --------------------------------------------------------------------------------
    def call(self, kind: str, target, args: tuple, kwargs: dict):
        """Run `target` on the real values and record it. Returns (node, real result)."""
        real_args, fx_args, plain = _split(args)
        real_kwargs, fx_kwargs = (_real(kwargs), _fx(kwargs)) if kwargs else _NO_KWARGS
        seeded = wrote = False
        try:
            if (target in PURE_METHODS if kind == "call_method" else target in PURE_FUNCTIONS) and \
                    (plain and not kwargs or self._pure(real_args, real_kwargs)):  # (writes nothing, draws nothing)
                result = target(*real_args, **real_kwargs) if kind == "call_function" else \
                    _run(kind, target, real_args, real_kwargs)
            else:
                check = self._write_check
                check.seeded = check.wrote = False
                with check:
                    result = _run(kind, target, real_args, real_kwargs)
                seeded, wrote = check.seeded, check.wrote
        except InputWrite as e:
            first_try = not self.clone_inputs or self.copied_lazily  # (the trace began on the real inputs)
            if first_try and self._copy_written(e.storages):  # on copies from now on: the op once more
                return self.call(kind, target, args, kwargs)
            if first_try:  # trace again on copies: the graph will write into the real inputs
                raise WritesInputs() from None
            raise Unsupported(f"{_target_name(target)} writes into memory the trace does not own ({e.op})") from None
        except Exception as e:
            raise UserError(e) from e
        node = self.graph.create_node(kind, target, fx_args, fx_kwargs)
        self._describe(node, result)
        meta = node.meta
        meta["seeded"] = seeded
        meta["writes"] = wrote  # what backends reorder by (codegen/schedule.py)
        self._created.append(node)
        if seeded:
            self.marked.append(node)
        self.op_count += 1
        return node, result

    def _copy_written(self, storages: tuple) -> bool:
        """An op is about to write into inputs' memory (`storages`), which no op recorded so far
        has read (a BatchNorm's running stats, written by the op that first reads them): trace on
        copies of that memory from here on -- its inputs made copies now, and any input read
        later that views it (see placeholder); other inputs stay the real ones until an op would
        write into them (then here again) -- instead of tracing the call again from its start.
        False where an op read it already (its result may view the real memory), or an op in a
        `try` was recorded (a graph that writes into its inputs cannot run again eagerly when it
        fails): then the whole trace runs again on copies."""
        hit = [i for i, (_, value, _) in enumerate(self.inputs)
               if isinstance(value, torch.Tensor) and _storage(value) in storages]
        if not hit or self.ops_in_try or any(self.inputs[i][2].users for i in hit):
            return False
        for i in hit:
            source, value, node = self.inputs[i]
            copy = input_copy(value, self._copies)
            self._originals[id(copy)] = value
            self._copied_at[id(copy)] = copy._version
            self._by_source[source].value = copy
            self.inputs[i] = (source, copy, node)
            node.meta["example_value"] = copy
            self._real_of[node] = weakref.ref(copy)
        self.clone_inputs = self.copied_lazily = True
        return True

    @staticmethod
    def _pure(args: tuple, kwargs: dict) -> bool:
        """Whether an op that neither writes nor draws (`PURE_FUNCTIONS`, `PURE_METHODS`) may
        run without the write check on these arguments: no `out=`, no `inplace=True`, plain
        tensors (or parameters: their ops are Tensor's) -- it can write into no input, whichever
        it reads. (`_split` finds that of tensors and constants without this walk.)"""
        if kwargs and (kwargs.get("out") is not None or kwargs.get("inplace")):
            return False
        for a in args:
            if isinstance(a, torch.Tensor):
                if type(a) not in PLAIN_TENSORS:
                    return False
            elif isinstance(a, (list, tuple)) and any(isinstance(i, torch.Tensor) and type(i) not in PLAIN_TENSORS
                                                      for i in a):
                return False
        return not any(isinstance(v, torch.Tensor) and type(v) not in PLAIN_TENSORS for v in kwargs.values())

    def original(self, value: torch.Tensor) -> torch.Tensor:
        """The caller's tensor a graph input's example value stands for."""
        return self._originals.get(id(value), value)

    def copy_over_own_memory(self, copy: torch.Tensor) -> bool:
        """Whether a copy of an input still views the memory made for it (`x.data = y`,
        `x.set_(y)` move a tensor to other memory)."""
        made = self._copies.get(_storage(self.original(copy)))
        return made is not None and _storage(copy) == made._cdata

    def writes_into_copy(self, copy: torch.Tensor) -> int:
        """How many in-place ops the trace ran on a copy of an input (its version counter's
        steps since it was made): what eager's ops add to the input's own."""
        return copy._version - self._copied_at.get(id(copy), copy._version)

    def int_node(self, kind: str, target, args: tuple, value: int):
        """A node computing a Python int from sizes (`x.size(0)`, `a * b`); not counted as an op."""
        node = self.graph.create_node(kind, target, tuple(_fx(a) for a in args), {})
        node.meta["example_value"] = value
        node.meta["writes"] = False
        self._created.append(node)
        return node

    def set_grad(self, enabled: bool) -> None:
        """Record a grad-mode switch (a `with torch.no_grad()` edge); not counted as an op."""
        node = self.graph.call_function(torch._C._set_grad_enabled, (enabled,))
        node.meta["writes"] = True  # a switch: the ops after it must not move before it
        self._created.append(node)
        self.marked.append(node)

    def record_effect(self, fn, args: tuple):
        """Record a call made for its effect on global state (entering autocast, say); not an op."""
        node = self.graph.call_function(fn, tuple(args))
        node.meta["writes"] = True  # a switch: the ops after it must not move before it
        self._created.append(node)
        self.marked.append(node)
        return node

    def outward_call(self, thunk, fn, args, kwargs) -> None:
        """Record `thunk(fn, args, kwargs)`, a call made for an effect outside the program (a
        log record), in program order; not run while tracing. The graph cannot run again after
        it (`meta["outward"]`)."""
        node = self.graph.call_function(thunk, (fn, tuple(_fx(list(args))), _fx(dict(kwargs))))
        node.meta["writes"] = True
        node.meta["outward"] = True
        node.meta["example_value"] = None
        self._created.append(node)
        self.marked.append(node)

    def wrap_result(self, node, result) -> Var:
        """A Var for an op's result: tensors become TensorVars, sequences of them TupleVars."""
        if isinstance(result, torch.Tensor):
            self._real_of[node] = weakref.ref(result)
            return TensorVar(node, result)
        if result is None:  # an op run for its effect (x[i] = v)
            return ConstVar(None)
        if isinstance(result, (tuple, list)) and all(isinstance(r, torch.Tensor) or r is None for r in result):
            items = []
            for i, r in enumerate(result):
                if r is None:
                    items.append(ConstVar(None))
                else:
                    item = self.graph.call_function(operator.getitem, (node, i))
                    self._describe(item, r)
                    item.meta["writes"] = False
                    self._created.append(item)
                    self._real_of[item] = weakref.ref(r)
                    items.append(TensorVar(item, r))
            if isinstance(result, list):
                return ListVar(items)
            return TupleVar(items, py_type=type(result))
        raise Unsupported(f"{_target_name(node.target)} returned {type(result).__name__}, which the graph cannot hold")

    @property
    def drawn(self) -> set:
        """The devices whose default generator the traced ops drew from."""
        return self._write_check.drawn

    def mark(self) -> tuple:
        return (len(self._created), self.op_count)

    def created_since(self, mark: tuple) -> list:
        """The nodes made since `mark` (a higher-order op's body: see ops/higher_order.py)."""
        return self._created[mark[0]:]

    def drop_since(self, mark: tuple) -> None:
        """Erase the op nodes made since `mark` (moved to a graph of their own); the inputs they
        made stay graph inputs."""
        made = self._created[mark[0]:]
        gone = {n for n in made if n.op != "placeholder"}
        self.graph.erase(gone)
        self._created[mark[0]:] = [n for n in made if n.op == "placeholder"]
        self.op_count = mark[1]
        self.marked = [n for n in self.marked if n not in gone]

    def rollback(self, mark: tuple) -> None:
        """Forget every node made since `mark` (a graph break keeps only what came before)."""
        n, ops = mark
        doomed = set(self._created[n:])
        self.graph.erase(doomed)
        del self._created[n:]
        self.op_count = ops
        self.marked = [node for node in self.marked if node not in doomed]
        self.inputs = [entry for entry in self.inputs if entry[2] not in doomed]
        self._by_source = {s: v for s, v in self._by_source.items() if v.node not in doomed}

    def output(self, outputs: list) -> None:
        self.graph.output(tuple(outputs))


def _storage(t: torch.Tensor):
    """Identifies the storage a tensor views (its views share it, empty ones too)."""
    try:
        return t.untyped_storage()._cdata
    except Exception:
        return id(t)


storage_key = _storage  # (what compile._write_back compares)


def input_copy(value: torch.Tensor, copies: dict) -> torch.Tensor:
    """A copy of an input for the trace to write into, alike in every way the trace can see:
    dtype, shape, strides, storage offset, memory shared with the other inputs' copies,
    requires_grad and leafness, being a view (of a base alike in the same ways, with the same
    creation mode: autograd's checks on in-place writes look at all of them), Parameter-ness,
    being an inference tensor or not (whatever mode the trace is in when it first reads the
    input: a traced `inference_mode` block made its copies inference tensors, which the writes
    after the block could not write into); only the tensor's autograd history is not copied."""
    if type(value) not in (torch.Tensor, torch.nn.Parameter):
        raise Unsupported(f"in-place writes into a {type(value).__qualname__} input")
    key = _storage(value)
    storage = copies.get(key)
    if storage is None:
        with torch.inference_mode(value.is_inference()), torch.no_grad():  # (in this order: off, it turns grad on)
            storage = value.untyped_storage().clone()
        if key is not None:
            copies[key] = storage
    base = value._base if value._is_view() and not value.is_inference() else None
    copy = None if base is None else _view_copy(value, _alike(base, storage))
    if copy is None:
        copy = _alike(value, storage)
    if type(value) is torch.nn.Parameter:
        copy = torch.nn.Parameter(copy, requires_grad=value.requires_grad)
    return copy


def _alike(value: torch.Tensor, storage) -> torch.Tensor:
    """A tensor over `storage` where `value` lies in its own, with its requires_grad and leafness
    (a non-leaf's writes are allowed where a leaf's are not); not a view."""
    with torch.inference_mode(value.is_inference()):  # (the trace may be in a traced inference_mode block)
        with torch.no_grad():
            copy = torch.empty((), dtype=value.dtype, device=value.device)
        if value.requires_grad:
            copy.requires_grad_()
            if not value.is_leaf:
                with torch.enable_grad():
                    copy = copy * 1
        with torch.no_grad():
            copy.set_(storage, value.storage_offset(), value.shape, value.stride())
    return copy


def _view_copy(value: torch.Tensor, base: torch.Tensor):
    """`value`, a view, made again as a view of `base` (the copy of its base), as autograd
    sees it: a leaf view is made without grad, a non-leaf one with (through a leaf view that
    requires grad where the base does not), and the view keeps the mode it was made in (an
    in-place write into a view made under no_grad is an error with grad on). None where it
    cannot be made (a view that changed the dtype to one of another size)."""
    def view(of):
        if of.dtype != value.dtype:
            of = of.view(value.dtype)
        return of.as_strided(value.shape, value.stride(), value.storage_offset())
    try:
        if value.is_leaf:
            with torch.no_grad():
                copy = view(base)
            copy.requires_grad_(value.requires_grad)
        elif base.requires_grad:
            with torch.enable_grad():
                copy = view(base)
        else:
            with torch.no_grad():
                mid = base.view(base.shape)
            mid.requires_grad_()
            with torch.enable_grad():
                copy = view(mid)
        torch._C._autograd._set_creation_meta(copy, torch._C._autograd._get_creation_meta(value))
    except RuntimeError:
        return None
    return copy


_NO_KWARGS = ({}, {})  # (an op's keyword arguments when it has none: read, never written)


def _run(kind: str, target, args: tuple, kwargs: dict):
    if kind == "call_method":
        return getattr(args[0], target)(*args[1:], **kwargs)
    return target(*args, **kwargs)


# ops that write into no tensor and draw no random number: run without the write check (a
# Python dispatch mode entered per op: every ATen op under it costs tens of µs, ten times a
# small op's own cost); any other op -- in-place ones, random ones, factories -- runs under it
PURE_FUNCTIONS = frozenset({
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod, operator.pow,
    operator.matmul, operator.neg, operator.pos, operator.abs, operator.invert, operator.and_, operator.or_,
    operator.xor, operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge, operator.getitem,
    torch.relu, torch.sigmoid, torch.tanh, torch.exp, torch.log, torch.sqrt, torch.rsqrt, torch.abs, torch.neg,
    torch.sin, torch.cos, torch.matmul, torch.mm, torch.bmm, torch.add, torch.sub, torch.mul, torch.div,
    torch.where, torch.softmax, torch.log_softmax, torch.cat, torch.stack, torch.sum, torch.mean, torch.amax,
    torch.amin, torch.clamp, torch.maximum, torch.minimum, torch.flatten, torch.transpose, torch.permute,
    torch.reshape, torch.squeeze, torch.unsqueeze, torch.einsum, torch.tril, torch.triu, torch.erf,
    torch.nn.functional.relu, torch.nn.functional.gelu, torch.nn.functional.silu, torch.nn.functional.linear,
    torch.nn.functional.layer_norm, torch.nn.functional.softmax, torch.nn.functional.log_softmax,
    torch.nn.functional.conv2d,
})
PURE_METHODS = frozenset({
    "view", "reshape", "transpose", "permute", "contiguous", "unsqueeze", "squeeze", "expand", "flatten",
    "size", "float", "half", "double", "long", "int", "bool", "to", "type_as", "softmax", "log_softmax", "sum",
    "mean", "amax", "amin", "max", "min", "pow", "sqrt", "rsqrt", "exp", "log", "relu", "sigmoid", "tanh", "abs",
    "neg", "matmul", "masked_fill", "clamp", "chunk", "split", "narrow", "t", "expand_as", "view_as", "reshape_as",
    "add", "sub", "mul", "div", "__getitem__", "clone", "detach", "flip", "cumsum", "argmax", "argmin", "tril",
    "triu", "repeat", "roll", "gather", "numel", "dim", "all", "any", "norm", "var", "std", "prod",
})


PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)


_NON_WORD = re.compile(r"\W+")


class InputWrite(Exception):
    def __init__(self, op: str, storages: tuple = ()):
        self.op = op
        self.storages = storages  # (the input memory it would write: all of it, a batch norm's two statistics)


def _draws(func, args, kwargs) -> bool:
    """Whether a random op draws numbers on these arguments: attention with `dropout_p` 0
    (what every model runs in eval mode, or with dropout off) is tagged random but draws none."""
    names = [a.name for a in func._schema.arguments]
    if "dropout_p" not in names:
        return True
    at = names.index("dropout_p")
    p = args[at] if at < len(args) else kwargs.get("dropout_p", func._schema.arguments[at].default_value)
    return not (isinstance(p, (int, float)) and p == 0)


def _running_stats(func, args, kwargs) -> tuple:
    """The arguments a batch norm writes in training: its running statistics."""
    names = [a.name for a in func._schema.arguments]
    at = names.index("training")
    training = args[at] if at < len(args) else kwargs.get("training")
    return ("running_mean", "running_var") if training else ()


# ops that write into arguments their schema does not mark as written (`Tensor(a!)`): by the
# schema's name, the names of the arguments they write on these arguments. (Without it, a
# BatchNorm in training mode traced on the real inputs updated the real running statistics,
# and the compiling call's own run of the graph updated them again.)
UNDECLARED_WRITES = {name: _running_stats for name in (
    "aten::native_batch_norm", "aten::cudnn_batch_norm", "aten::miopen_batch_norm")}


class _InputWriteCheck(TorchDispatchMode):
    """Stops any ATen op that would write into an input's memory before it runs, and notes
    whether an op wrote into any tensor at all (`wrote`), or drew random numbers (`seeded`).

    The tracer runs the user's ops on the real inputs; whatever Python path leads there
    (`x.add_`, `x.__iadd__(y)`, `F.relu(x, inplace=True)`, `x[0] = v`, `out=x`, `x.copy_`),
    the op's schema says which arguments it writes: the one place writes are detected.
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps a mode's __torch_dispatch__ to keep Dynamo out of it, importing
        # torch._dynamo (and triton, ~1 s) on the first op; nothing here runs under Dynamo
        return False

    def __init__(self, storages: set, ids: set):
        super().__init__()
        self.storages = storages  # the memory of inputs: writes through views
        self.ids = ids  # the input tensors themselves: in-place metadata changes (x.unsqueeze_)
        self.seeded = False
        self.wrote = False
        self.generators: dict = {}  # device -> the trace's own copy of its default generator
        self.drawn: set = set()  # the devices whose default generator the graph draws from

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        seeded = torch.Tag.nondeterministic_seeded in func.tags and _draws(func, args, kwargs)
        if seeded:
            self.seeded = True  # a random op: the compiled code draws from the generator
        undeclared = UNDECLARED_WRITES.get(func._schema.name)
        inputs = []  # the input memory the op writes
        for i, arg in enumerate(func._schema.arguments):
            if (arg.alias_info is None or not arg.alias_info.is_write) and \
                    (undeclared is None or arg.name not in undeclared(func, args, kwargs)):
                continue
            value = args[i] if i < len(args) else kwargs.get(arg.name)
            for t in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(t, torch.Tensor):
                    self.wrote = True
                    if id(t) in self.ids or _storage(t) in self.storages:
                        inputs.append(_storage(t))
        if inputs:
            raise InputWrite(str(func), tuple(inputs))
        if seeded:
            return self._draw_privately(func, args, kwargs)
        return func(*args, **kwargs)

    def _draw_privately(self, func, args, kwargs):
        """Run a random op on the trace's own copy of the default generator: the trace leaves
        the real one alone (other threads draw from it meanwhile, and the compiled code draws
        what eager draws)."""
        device = next((a.device for a in _flat(args, kwargs) if isinstance(a, torch.Tensor)), None)
        device = torch.device(device or kwargs.get("device") or "cpu")
        self.drawn.add(device)
        default = default_generator(device)
        if default is None:
            return func(*args, **kwargs)
        names = [a.name for a in func._schema.arguments]
        if "generator" in names:
            at = names.index("generator")
            if at < len(args):
                if args[at] is None:
                    args = (*args[:at], self._private(device, default), *args[at + 1:])
            elif kwargs.get("generator") is None:
                kwargs = {**kwargs, "generator": self._private(device, default)}
            return func(*args, **kwargs)
        with_generator = _generator_overload(func)
        if with_generator is not None:
            return with_generator(*args, **kwargs, generator=self._private(device, default))
        state = default.get_state()  # an op that takes no generator (native_dropout, RNN kernels)
        try:
            return func(*args, **kwargs)
        finally:
            default.set_state(state)

    def _private(self, device, default):
        g = self.generators.get(device)
        if g is None:
            g = self.generators[device] = torch.Generator(device=device)
            g.set_state(default.get_state())
        return g


def default_generator(device: torch.device):
    if device.type == "cpu":
        return torch.default_generator
    if device.type == "cuda" and torch.cuda.is_initialized():
        return torch.cuda.default_generators[device.index if device.index is not None else torch.cuda.current_device()]
    return None


_GENERATOR_OVERLOADS: dict = {}


def _generator_overload(func):
    """The overload of the same op that takes a generator, with the same other arguments."""
    if func not in _GENERATOR_OVERLOADS:
        names = [a.name for a in func._schema.arguments]
        found = None
        packet = func.overloadpacket
        for name in packet.overloads():
            other = getattr(packet, name)
            others = [a.name for a in other._schema.arguments]
            if "generator" in others and [n for n in others if n != "generator"] == names:
                found = other
                break
        _GENERATOR_OVERLOADS[func] = found
    return _GENERATOR_OVERLOADS[func]


def _flat(args, kwargs):
    for a in (*args, *kwargs.values()):
        if isinstance(a, (list, tuple)):
            yield from a
        else:
            yield a


def _describe(node, result) -> None:
    """What backends read of an op's result. For a strided tensor, its facts (sizes, strides,
    dtype, requires_grad, device: meta["facts"]), from which `example_values` makes a shadow on
    the meta device for the backends that read one -- so the trace holds no intermediate: each
    dies when the traced code lets go of it, as in eager (the first call of a long chain of ops
    on big tensors would otherwise hold all of them at once); the python backend reads none,
    and pays for none. Anything else (a tensor of a kind the meta device does not hold): the
    value itself, in meta["example_value"]."""
    if type(result) is torch.Tensor or isinstance(result, torch.Tensor):
        dtype = result.dtype
        if result.layout is _STRIDED and (_ON_META.get(dtype) or _on_meta(dtype)) and not result.is_meta:
            node.meta["facts"] = (result.shape, result.stride(), dtype, result.requires_grad, result.device)
            return
    node.meta["example_value"] = result


def _mark(node, result) -> None:
    """_describe for a graph only the python backend reads: that the op made a tensor
    (meta["facts"] None: what ops.log_calls asks), not what tensor."""
    if isinstance(result, torch.Tensor):
        node.meta["facts"] = None
    else:
        node.meta["example_value"] = result


def example_values(graph) -> None:
    """Give each node `_describe` left facts its shadow on the meta device (meta["example_value"],
    its device in meta["device"]): what backends from torch's world read."""
    for node in graph.nodes:
        facts = node.meta.get("facts")
        if facts is not None and "example_value" not in node.meta:
            shape, stride, dtype, requires_grad, device = facts
            node.meta["example_value"] = torch.empty_strided(shape, stride, dtype=dtype, device="meta",
                                                             requires_grad=requires_grad)
            node.meta["device"] = device


def _on_meta(dtype) -> bool:
    """Whether a tensor on the meta device can have `dtype` (asked once per dtype)."""
    known = _ON_META.get(dtype)
    if known is None:
        with warnings.catch_warnings():  # (quantized and complex-half dtypes warn when made)
            warnings.simplefilter("ignore")
            try:
                torch.empty(0, dtype=dtype, device="meta")
                known = True
            except Exception:
                known = False
        _ON_META[dtype] = known
    return known


_ON_META: dict = {}
_STRIDED = torch.strided


def _split(args: tuple) -> tuple[tuple, tuple, bool]:
    """(`_real(args)`, `_fx(args)`, whether they are plain tensors (or parameters) and
    constants) in one pass where every argument is a tensor or a plain constant (most ops'
    arguments); else the two walks (and False)."""
    real, fx = [], []
    plain = True
    for a in args:
        t = type(a)
        if t is TensorVar:
            value = a.value
            real.append(value)
            fx.append(a.node)
            if plain and type(value) not in PLAIN_TENSORS:
                plain = False
        elif t is ConstVar and type(a.value) in _PLAIN:
            real.append(a.value)
            fx.append(a.value)
        else:
            return _real(args), _fx(args), False
    return tuple(real), tuple(fx), plain


_PLAIN = (int, float, bool, str, type(None), torch.dtype)


def _real(obj):
    if isinstance(obj, (TensorVar, ScalarVar, SymIntVar)):
        return obj.value
    if isinstance(obj, ConstVar) and isinstance(obj.value, slice):
        return _real(obj.value)  # its bounds may be symbolic sizes
    if isinstance(obj, (ConstVar, ObjectVar)):
        return obj.value
    if isinstance(obj, TupleVar):
        return make_tuple(obj.py_type, [_real(v) for v in obj.items])
    if isinstance(obj, ListVar):
        return [_real(v) for v in obj.items]
    if isinstance(obj, DictVar):
        if obj.py_type is not dict or any(isinstance(k, IdentityKey) for k in obj.items):
            raise Unsupported(f"passing a {obj.py_type.__name__} (or a dict with object keys) to a torch op")
        return {k: _real(v) for k, v in obj.items.items()}
    if isinstance(obj, tuple):
        return tuple(_real(v) for v in obj)
    if isinstance(obj, list):
        return [_real(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _real(v) for k, v in obj.items()}
    if isinstance(obj, slice):
        return slice(_real(obj.start), _real(obj.stop), _real(obj.step))
    if isinstance(obj, Var):
        raise Unsupported(f"cannot pass {obj!r} to a graph op")
    return obj


def _fx(obj):
    if isinstance(obj, (TensorVar, ScalarVar, SymIntVar)):
        return obj.node
    if isinstance(obj, ConstVar) and isinstance(obj.value, numpy.generic):
        return obj.value.item()  # (a NumPy scalar is the Python number to torch's ops; graphs hold that)
    if isinstance(obj, ConstVar):
        return _fx(obj.value) if isinstance(obj.value, slice) else obj.value
    if isinstance(obj, ObjectVar):
        if not isinstance(obj.value, (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType)):
            # an instance is guarded by its type only: its value must not be baked into the graph
            raise Unsupported(f"passing an object of type {type(obj.value).__qualname__} to a torch op")
        return obj.value
    if isinstance(obj, TupleVar):
        return tuple(_fx(v) for v in obj.items)
    if isinstance(obj, ListVar):
        return [_fx(v) for v in obj.items]
    if isinstance(obj, DictVar):
        if obj.py_type is not dict or any(isinstance(k, IdentityKey) for k in obj.items):
            raise Unsupported(f"passing a {obj.py_type.__name__} (or a dict with object keys) to a torch op")
        return {k: _fx(v) for k, v in obj.items.items()}
    if isinstance(obj, tuple):
        return tuple(_fx(v) for v in obj)
    if isinstance(obj, list):
        return [_fx(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _fx(v) for k, v in obj.items()}
    if isinstance(obj, slice):
        return slice(_fx(obj.start), _fx(obj.stop), _fx(obj.step))
    return obj


def _target_name(target) -> str:
    if isinstance(target, str):
        return f".{target}()"
    mod = getattr(target, "__module__", None) or ""
    return f"{mod}.{getattr(target, '__name__', target)}" if mod else str(target)
