"""Code-object surgery. Every Python-version difference of the project lives in `compat`."""
from .compat import SUPPORTED
from .splice import splice_prologue, is_rewritten, original_code

__all__ = ["SUPPORTED", "splice_prologue", "is_rewritten", "original_code"]
