"""torch.compile over rewritten code: Dynamo reads the original instructions.

Dynamo traces a frame from its bytecode, and the prologue's constant (a Slot) is not one it
accepts ("Cannot construct ConstantVariable for value of type rewrite.slot.Slot"). That
happens to `torch.compile` of a jitted function, of a function that calls one, of a module
whose forward is jitted, and inside libraries that call torch.compile themselves (e.g.
transformers' `generate()` with a static cache). So once the program imports Dynamo --
before or after rewrite, whenever that happens -- its instruction reader is made to read
the original instructions of any spliced code object: the prologue is not part of what the
function does, and the frame's locals are laid out the same, so the code Dynamo generates
runs in the spliced function's frame. Torch-free: nothing here imports torch or Dynamo.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys

from . import original_code

MODULE = "torch._dynamo.bytecode_transformation"  # defines _cached_cleaned_instructions(code, ...)


def patch(module) -> None:
    """Make `module._cached_cleaned_instructions` read original code (once)."""
    cached = getattr(module, "_cached_cleaned_instructions", None)
    if cached is None or getattr(cached, "__rewrite__", False):
        return

    def instructions_of_original(code, *args, **kwargs):
        return cached(original_code(code), *args, **kwargs)
    instructions_of_original.__rewrite__ = True
    instructions_of_original.__wrapped__ = cached
    module._cached_cleaned_instructions = instructions_of_original


class _ThenPatch(importlib.abc.Loader):
    """The module's own loader, then `patch` on the loaded module."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        patch(module)


class _Watch(importlib.abc.MetaPathFinder):
    """Finds nothing itself: it only wraps the loader of Dynamo's instruction module."""

    def find_spec(self, fullname, path, target=None):
        if fullname != MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenPatch(spec.loader)
        return spec


_WATCH = _Watch()


def watch() -> None:
    """Patch Dynamo now if it is imported, else when it is (idempotent)."""
    if MODULE in sys.modules:
        patch(sys.modules[MODULE])
    elif _WATCH not in sys.meta_path:
        sys.meta_path.insert(0, _WATCH)
