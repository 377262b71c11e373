"""Code-object surgery. Every Python-version difference of the project lives in `compat`."""
from .compat import PY311, PY312, PY313, SUPPORTED
from .splice import splice_prologue, is_rewritten, original_code

__all__ = ["PY311", "PY312", "PY313", "SUPPORTED", "splice_prologue", "is_rewritten", "original_code"]
