"""`patch_torch_compile`: `torch.compile` and `nn.Module.compile` compile with rewrite.

For code that calls torch.compile for you -- a Hugging Face `Trainer(args=TrainingArguments(
torch_compile=True))`, `model.compile()`, a copied script's `pipe.unet = torch.compile(pipe.unet)`
-- without editing it:

    rewrite.patch_torch_compile()          # from now on (rewrite.unpatch_torch_compile() undoes it)
    with rewrite.patch_torch_compile():    # inside the block
    @rewrite.patch_torch_compile()         # during each call of the function

What a call under the patch returns, for each kind of target:

- a module: the module itself, its forward jitted (as `rewrite.jit(module)`: `state_dict()` keys
  unprefixed), with `_orig_mod` naming the module itself for code that unwraps;
- a function, a bound method, a `functools.partial` of one: a jitted copy (the original stays
  eager, as under torch.compile, so `compiled(x)` can be compared with `fn(x)`);
- any other callable (an object with `__call__`, a builtin, a class): a jitted function that
  calls it (the tracer follows the call in);
- no target: the decorator (`@torch.compile(backend=...)`).

torch.compile's keywords are `rewrite.jit`'s: backend (a name of rewrite's or of torch's
registry, or a callable; none named: rewrite's default for the device, not Inductor), mode,
options, fullgraph, dynamic, disable. `name` is a label only; `recompile_limit`,
`isolate_recompiles` and `shapes_spec` are not applied (a warning says so when one is set).
torch's own calls of torch.compile (eager `torch.cond`, flex attention: code of the `torch`
package) keep torch's compiler.
"""
from __future__ import annotations

import functools
import sys
import threading
import types
import warnings

import torch

from . import logs
from .api import _jitted_copy, backend_with, jit
from .registry import lookup_backend

# torch's own, as this module found them (what unpatching puts back)
TORCH_COMPILE = torch.compile
MODULE_COMPILE = torch.nn.Module.compile
NOT_APPLIED = {"recompile_limit": None, "isolate_recompiles": False, "shapes_spec": None}  # keyword -> its default

_lock = threading.Lock()
_depth = 0  # patches in force (nested `with` blocks and decorated calls share one)


def torch_compile(model=None, *, fullgraph: bool = False, dynamic: bool | None = None, backend=None,
                  mode: str | None = None, options: dict | None = None, name: str | None = None,
                  disable: bool = False, **rest):
    """torch.compile, with rewrite (see the module's docstring): what `torch.compile` is under the patch."""
    if _torch_caller(sys._getframe(1)):
        return TORCH_COMPILE(model, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                             options=options, name=name, disable=disable, **rest)
    unknown = set(rest) - set(NOT_APPLIED)
    if unknown:
        raise TypeError(f"compile() got an unexpected keyword argument {sorted(unknown)[0]!r}")
    for keyword, value in rest.items():
        if value != NOT_APPLIED[keyword]:
            warnings.warn(f"rewrite.patch_torch_compile: torch.compile's {keyword}={value!r} is not applied "
                          f"(rewrite.config sets what rewrite has of it)", stacklevel=2)
    keywords = {"fullgraph": fullgraph, "dynamic": dynamic, "backend": backend, "mode": mode, "options": options}
    if model is None:  # @torch.compile(...): the decorator
        return lambda fn: _compile(fn, disable, keywords)
    return _compile(model, disable, keywords)


def _compile(model, disable: bool, keywords: dict):
    if disable:
        return model
    if not callable(model):
        raise RuntimeError("torch.compile: the model must be callable")  # (torch's check)
    backend = keywords["backend"]
    if isinstance(backend, str):
        try:
            lookup_backend(backend)
        except ValueError:  # an unknown name: torch.compile's own error (InvalidBackend), here as there
            from torch._dynamo.backends.registry import lookup_backend as torch_lookup  # (deferred: Dynamo)
            torch_lookup(backend)
            raise
    options = {"backend": backend_with(backend, keywords["mode"], keywords["options"], keywords["dynamic"]),
               "fullgraph": keywords["fullgraph"], "dynamic": keywords["dynamic"]}
    compiled = _compiled(model, options)
    _log(model, options)
    return compiled


def _compiled(model, options: dict):
    """What torch.compile(model) returns under the patch (see the module's docstring)."""
    if isinstance(model, torch.nn.Module):
        try:
            jit(model, **options)
        except TypeError as e:  # (a forward that is not Python code of its own: torch's compiler takes it)
            warnings.warn(f"rewrite.patch_torch_compile: {e}; torch.compile compiles this module", stacklevel=4)
            return TORCH_COMPILE(model, **_torch_keywords(options))
        object.__setattr__(model, "_orig_mod", model)  # (not a submodule: state_dict stays as it was)
        return model
    if isinstance(model, types.FunctionType):
        return _jitted_copy(model, options)
    if isinstance(model, types.MethodType) and isinstance(model.__func__, types.FunctionType):
        owner = model.__self__
        if isinstance(owner, torch.nn.Module) and model.__func__ in _CALL_IMPLS:  # torch.compile(m._call_impl)
            _compiled(owner, options)
            return model  # (the module's own __call__ path, its forward jitted: never nn.Module's for all)
        return types.MethodType(_jitted_copy(model.__func__, options), owner)
    if isinstance(model, functools.partial) and isinstance(model.func, types.FunctionType):
        made = functools.partial(_jitted_copy(model.func, options), *model.args, **model.keywords)
        made.__dict__.update(model.__dict__)
        return made

    def call(*args, **kwargs):  # any other callable: the tracer follows the call in
        return model(*args, **kwargs)

    functools.update_wrapper(call, model, updated=())
    return jit(call, **options)


def _torch_keywords(options: dict) -> dict:
    backend = options["backend"]
    if backend is None:
        backend = "inductor"
    elif hasattr(backend, "wrapper"):  # (api.WithOptions: torch's own wrapper of backend, mode, options)
        backend = backend.wrapper
    return {"backend": backend, "fullgraph": options["fullgraph"], "dynamic": options["dynamic"]}


_CALL_IMPLS = {torch.nn.Module._call_impl, torch.nn.Module._wrapped_call_impl}


def module_compile(self, *args, **kwargs) -> None:
    """nn.Module.compile, with rewrite: the module's forward jitted in place (torch's compiles
    `self._call_impl`; jitting that bound method's function would compile every module's)."""
    torch_compile(self, *args, **kwargs)


def _torch_caller(frame) -> bool:
    """Whether torch.compile was called from torch's own code (those keep torch's compiler)."""
    name = frame.f_globals.get("__name__", "") if frame is not None else ""
    return name == "torch" or name.startswith("torch.")


def _log(model, options: dict) -> None:
    if logs.enabled("torch_compile"):
        what = type(model).__name__ if isinstance(model, torch.nn.Module) else \
            getattr(model, "__qualname__", type(model).__name__)
        backend = options["backend"]
        logs.get("torch_compile").debug("torch.compile(%s) compiles with rewrite (backend=%s, fullgraph=%s, "
                                        "dynamic=%s)", what, backend if isinstance(backend, str) or backend is None
                                        else getattr(backend, "__name__", backend), options["fullgraph"],
                                        options["dynamic"])


def _apply() -> None:
    global _depth
    with _lock:
        _depth += 1
        torch.compile = torch_compile
        torch.nn.Module.compile = module_compile


def _release() -> None:
    global _depth
    with _lock:
        _depth = max(_depth - 1, 0)
        if _depth == 0:
            torch.compile = TORCH_COMPILE
            torch.nn.Module.compile = MODULE_COMPILE


class TorchCompilePatch:
    """What `patch_torch_compile()` returns: the patch is in force from the call; leaving a
    `with` block over it ends it; as a decorator, it is in force during each call instead."""

    def __init__(self):
        self._active = True
        _apply()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        if self._active:
            self._active = False
            _release()

    def __call__(self, fn):
        self.close()  # (a decorator: not in force now, but in each call)

        @functools.wraps(fn)
        def patched(*args, **kwargs):
            _apply()
            try:
                return fn(*args, **kwargs)
            finally:
                _release()
        return patched


def patch_torch_compile() -> TorchCompilePatch:
    """Make `torch.compile` and `nn.Module.compile` compile with rewrite: from now on (a call),
    inside a `with` block, or during each call of a decorated function."""
    return TorchCompilePatch()


def unpatch_torch_compile() -> None:
    """Put torch's own `torch.compile` and `nn.Module.compile` back, whatever patches are open."""
    global _depth
    with _lock:
        _depth = 0
        torch.compile = TORCH_COMPILE
        torch.nn.Module.compile = MODULE_COMPILE


def patched() -> bool:
    """Whether torch.compile compiles with rewrite now."""
    return torch.compile is torch_compile
