"""python -m rewrite.hook [options] script.py [args] | -m module [args]

Runs a program unmodified, with every function of its own modules rewritten as they are
imported (the script itself included). sys.argv, __main__, __file__, sys.path[0], relative
imports and `if __name__ == "__main__"` are as under plain `python`.
"""
from __future__ import annotations

import builtins
import importlib.util
import os
import runpy
import sys
import traceback
import types

from .. import config
from . import install, options, report_at_exit
from .instrument import instrument

USAGE = """usage: python -m rewrite.hook [--include GLOB]... [--exclude GLOB]... [--backend NAME]
                            [--fullgraph] [--report] [--torch-compile | --torch-compile-only]
                            (script.py | -m module) [args...]

  --include GLOB   also instrument these modules (names, or file paths if the pattern has a /)
  --exclude GLOB   never instrument these
  --backend NAME   the backend compiled functions use (default: per device)
  --fullgraph      raise where a function cannot be captured as one graph
  --report         print at exit which functions were compiled (graphs, breaks, recompiles)
  --torch-compile  the program's torch.compile / model.compile() calls compile with rewrite too
                   (rewrite.patch_torch_compile); --torch-compile-only: that alone, no instrumentation
"""


def parse(argv: list[str]) -> dict:
    opts = {"include": [], "exclude": [], "backend": None, "fullgraph": False, "report": False,
            "torch_compile": None, "module": None, "script": None, "args": []}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--include", "--exclude", "--backend"):
            if i + 1 >= len(argv):
                raise SystemExit(f"{a} needs a value\n{USAGE}")
            key = a[2:]
            if key == "backend":
                opts["backend"] = argv[i + 1]
            else:
                opts[key].append(argv[i + 1])
            i += 2
        elif a.startswith(("--include=", "--exclude=", "--backend=")):
            key, value = a[2:].split("=", 1)
            if key == "backend":
                opts["backend"] = value
            else:
                opts[key].append(value)
            i += 1
        elif a in ("--fullgraph", "--report"):
            opts[a[2:]] = True
            i += 1
        elif a in ("--torch-compile", "--torch-compile-only"):
            opts["torch_compile"] = "only" if a.endswith("only") else "with"
            i += 1
        elif a in ("-h", "--help"):
            print(USAGE)
            raise SystemExit(0)
        elif a == "-m":
            if i + 1 >= len(argv):
                raise SystemExit(f"-m needs a module name\n{USAGE}")
            opts["module"], opts["args"] = argv[i + 1], argv[i + 2:]
            return opts
        elif a.startswith("-"):
            raise SystemExit(f"unknown option {a}\n{USAGE}")
        else:
            opts["script"], opts["args"] = a, argv[i + 1:]
            return opts
    raise SystemExit(USAGE)


def _fresh_main() -> types.ModuleType:
    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    return main


def run_script(path: str, args: list[str]) -> None:
    full = os.path.abspath(path)
    try:
        with open(full, "rb") as f:
            source = importlib.util.decode_source(f.read())
    except OSError as e:  # as python says it
        print(f"{sys.executable}: can't open file {full!r}: [Errno {e.errno}] {e.strerror}", file=sys.stderr)
        raise SystemExit(2) from None
    sys.argv = [path, *args]
    sys.path[0] = os.path.dirname(full)
    main = _fresh_main()
    main.__file__ = full
    main.__spec__ = None
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", full)
    code = instrument(compile(source, full, "exec", dont_inherit=True), options())
    exec(code, main.__dict__)


def run_module(name: str, args: list[str]) -> None:
    sys.argv = [name, *args]
    _fresh_main()
    runpy._run_module_as_main(name, alter_argv=True)


def main(argv=None) -> None:
    opts = parse(list(sys.argv[1:] if argv is None else argv))
    root = os.path.dirname(os.path.abspath(opts["script"])) if opts["script"] else os.getcwd()
    if opts["torch_compile"] != "only":
        try:
            install(opts["include"], opts["exclude"], opts["backend"], opts["fullgraph"], root=root)
        except ValueError as e:  # an unknown backend name
            raise SystemExit(f"rewrite.hook: {e}") from None
    if opts["torch_compile"]:
        from ..patching import patch_torch_compile  # (deferred: imports torch, which the hook alone does not)
        patch_torch_compile()
    if not opts["fullgraph"]:
        config.suppress_errors = True  # a whole program: an internal error runs that function eagerly
    if opts["report"]:
        report_at_exit()
    try:
        if opts["module"]:
            run_module(opts["module"], opts["args"])
        else:
            run_script(opts["script"], opts["args"])
    except SystemExit:
        raise
    except BaseException as e:  # as `python` shows it: the program's frames, not this runner's
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename in (__file__, runpy.__file__):
            tb = tb.tb_next
        traceback.print_exception(type(e), e, tb)
        sys.exit(1)


if __name__ == "__main__":
    main()
