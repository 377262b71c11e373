"""The `eager` backend: run the captured GraphModule as it is (checks the capture, not codegen)."""
from rewrite.registry import register_backend


@register_backend(native=True)
def eager(gm, example_inputs):
    return gm.forward
