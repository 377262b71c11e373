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

from ..watch import after_import
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


def watch() -> None:
    """Patch Dynamo now if it is imported, else when it is (idempotent)."""
    after_import(MODULE, patch)
