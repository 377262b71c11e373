"""python -m rewrite.hook and rewrite.hook.install: instrumenting a program's own modules at
import time; each function decides at its first call; semantics as under plain python."""
import inspect
import os
import pickle
import subprocess
import sys
import textwrap
import types

import pytest
import torch

import rewrite
import rewrite.hook as hook
from rewrite.bytecode import is_rewritten, original_code

PY = sys.executable
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write(root, files: dict) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def cli(args, cwd, env=None):
    env = dict(os.environ, PYTHONPATH=ROOT, **(env or {}))
    return subprocess.run([PY, "-m", "rewrite.hook", *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=300)


def plain(args, cwd):
    return subprocess.run([PY, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=ROOT))


PROGRAM = {
    "app/__init__.py": "",
    "app/models.py": """
        import torch

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(4, 3)

            def forward(self, x):
                return torch.relu(self.lin(x)) * 2
        """,
    "app/util.py": """
        def total(xs):
            return sum(x * x for x in xs)
        """,
    "app/main.py": """
        import sys
        from . import util
        from .models import Net
        import torch

        def run():
            torch.manual_seed(0)
            net = Net()
            out = net(torch.ones(2, 4))
            print("argv", sys.argv[1:], "name", __name__, "file", __file__.endswith("main.py"))
            print("total", util.total([1, 2, 3]), "out", round(out.sum().item(), 4))

        if __name__ == "__main__":
            run()
        """,
    "script.py": """
        import sys
        from app import util
        from app.models import Net
        import torch

        def fails(n):
            return [1, 2][n]

        if __name__ == "__main__":
            torch.manual_seed(0)
            print("argv", sys.argv, "path0", sys.path[0].endswith("proj"), util.total([3]))
            print("out", round(Net()(torch.ones(1, 4)).sum().item(), 4))
            if sys.argv[1:] == ["fail"]:
                fails(5)
            sys.exit(int(sys.argv[1]) if sys.argv[1:] and sys.argv[1].isdigit() else 0)
        """,
}


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "proj"
    write(root, PROGRAM)
    return root


# -- the command line ------------------------------------------------------------------------

def test_a_script_runs_as_under_python(project):
    got, expected = cli(["--report", "script.py", "x"], project), plain(["script.py", "x"], project)
    assert got.returncode == expected.returncode == 0, got.stderr
    assert got.stdout == expected.stdout
    assert "argv ['script.py', 'x'] path0 True 9" in got.stdout
    assert "Net.forward" in got.stderr and "compiled" in got.stderr  # --report


def test_exit_codes_and_tracebacks_are_the_programs(project):
    got, expected = cli(["script.py", "3"], project), plain(["script.py", "3"], project)
    assert got.returncode == expected.returncode == 3
    got, expected = cli(["script.py", "fail"], project), plain(["script.py", "fail"], project)
    assert got.returncode == expected.returncode == 1
    assert "IndexError: list index out of range" in got.stderr
    assert 'script.py", line 8, in fails' in got.stderr and "return [1, 2][n]" in got.stderr
    assert "rewrite/hook" not in got.stderr  # no frame of the runner itself


def test_a_module_with_relative_imports_runs_with_dash_m(project):
    got, expected = cli(["-m", "app.main", "a"], project), plain(["-m", "app.main", "a"], project)
    assert got.returncode == expected.returncode == 0, got.stderr
    assert got.stdout == expected.stdout
    assert "argv ['a'] name __main__ file True" in got.stdout


def test_pytest_runs_under_the_hook(project):
    write(project, {"tests/test_app.py": """
        import torch
        from app.util import total
        from app.models import Net

        def test_total():
            assert total([1, 2]) == 5

        def test_net():
            torch.manual_seed(0)
            assert Net()(torch.ones(1, 4)).shape == (1, 3)

        def test_fails():
            assert total([1]) == 2
        """})
    got = cli(["--report", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], project)
    expected = plain(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], project)
    assert got.returncode == expected.returncode == 1
    assert "1 failed, 2 passed" in got.stdout and "1 failed, 2 passed" in expected.stdout
    assert "Net.forward" in got.stderr


def test_bad_usage():
    assert cli(["--bogus", "x.py"], ROOT).returncode != 0
    missing = cli(["no_such_script.py"], ROOT)
    assert missing.returncode == 2 and "can't open file" in missing.stderr
    assert "usage" in cli([], ROOT).stderr.lower() + cli([], ROOT).stdout.lower()


# -- which modules ---------------------------------------------------------------------------

def test_rules_include_exclude_and_what_is_never_instrumented(tmp_path):
    mine = str(tmp_path / "pkg" / "mod.py")
    rules = hook.Rules(root=str(tmp_path))
    assert rules.wants("pkg.mod", mine)
    assert not rules.wants("json.decoder", __import__("json.decoder").decoder.__file__)  # the standard library
    assert not rules.wants("hypothesis", __import__("hypothesis").__file__)  # site-packages
    assert not rules.wants("rewrite.api", os.path.join(ROOT, "rewrite", "api.py"))
    assert not rules.wants("pkg.ext", str(tmp_path / "pkg" / "ext.so"))
    assert not hook.Rules(exclude=["pkg.*"], root=str(tmp_path)).wants("pkg.mod", mine)
    assert not hook.Rules(exclude=["*/pkg/*.py"], root=str(tmp_path)).wants("pkg.mod", mine)
    assert hook.Rules(include=["json"]).wants("json.decoder", __import__("json.decoder").decoder.__file__)
    assert hook.Rules(include=["hypothesis"]).wants("hypothesis.core", __import__("hypothesis").core.__file__)
    assert not hook.Rules().wants("pkg.mod", mine)  # no root, no include: nothing


# -- the programmatic API and the first-call decision ----------------------------------------------

LIBRARY = """
    import functools
    import torch

    SCALE = 3

    def plain(a, b):
        return a + b

    def tensor_arg(x):
        return torch.relu(x) * SCALE

    def uses_torch_global(n):
        return torch.ones(n).sum()

    def make_adder(k):
        def add(v):
            return v + k
        return add

    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs)
        return wrapper

    @deco
    def wrapped(x, y=2):
        return x * y

    class Box:
        def __init__(self, v):
            self.v = v

        def get(self):
            return self.v

        @staticmethod
        def s(a):
            return a * 2

        @classmethod
        def c(cls, a):
            return a * 3

        @property
        def p(self):
            return self.v + 1

    def gen(n):
        def inner(i):
            return i * 2
        for i in range(n):
            yield inner(i)

    def fails(n):
        return [1, 2][n]

    def total_of_squares(xs):
        total = 0
        for x in xs:
            total += x * x
        return total

    def branchy(x, k):
        if k % 3 == 0:
            return x * k
        return x + k

    def describe(x):
        return f"{tuple(x.shape)} {x.dtype}"

    def logs_then_reads(x):
        print("", end="")  # a graph break before anything else; the rest captures no op either
        return x.shape[0]

    def logs_then_computes(x):
        print("", end="")  # a graph break before its ops: its resume function has the graph
        return x * 2 + 1

    class State:
        def __init__(self, w):
            self.w, self.steps = w, 0

    def step(state, lr):
        state.steps += 1
        return state.w * lr
    """


@pytest.fixture
def library(tmp_path):
    name = f"hooklib_{os.getpid()}_{id(tmp_path) % 100000}"
    write(tmp_path, {f"{name}.py": LIBRARY})
    sys.path.insert(0, str(tmp_path))
    hook.install(root=str(tmp_path), backend="python")
    try:
        module = __import__(name)
    finally:
        hook.uninstall()
        sys.path.remove(str(tmp_path))
    yield module
    sys.modules.pop(name, None)


def test_every_function_is_spliced_at_import_and_nothing_compiles_yet(library):
    for fn in (library.plain, library.tensor_arg, library.Box.get, library.Box.__dict__["s"].__func__,
               library.Box.p.fget, library.wrapped.__wrapped__, library.wrapped):
        assert is_rewritten(fn.__code__), fn
    assert not is_rewritten(library.gen.__code__)  # a generator: left as it is
    inner = next(c for c in library.gen.__code__.co_consts if isinstance(c, types.CodeType))
    assert is_rewritten(inner)  # ...but the function nested in it is spliced
    with pytest.raises(ValueError):
        rewrite.dispatcher_of(library.tensor_arg)  # no dispatcher before the first call


def test_functions_that_never_touch_torch_get_their_original_code_back(library):
    assert library.plain(2, 3) == 5
    assert not is_rewritten(library.plain.__code__)
    box = library.Box(4)
    assert (box.get(), library.Box.s(2), library.Box.c(2), box.p) == (4, 4, 6, 5)
    for fn in (library.Box.get, library.Box.__dict__["s"].__func__, library.Box.__dict__["c"].__func__,
               library.Box.p.fget, library.Box.__init__):
        assert not is_rewritten(fn.__code__), fn
    assert library.wrapped(3) == 6 and not is_rewritten(library.wrapped.__wrapped__.__code__)
    add = library.make_adder(2)
    assert add(5) == 7
    add2 = library.make_adder(3)  # made after both decisions: plain code
    assert add2(5) == 8 and not is_rewritten(add2.__code__)
    first = library.make_adder  # a closure made before its code's decision keeps the bypass
    assert first(2)(1) == 3
    assert list(library.gen(3)) == [0, 2, 4]


def test_functions_that_touch_torch_are_compiled_and_match_eager(library):
    x = torch.randn(5)
    expected = torch.relu(x) * 3
    for _ in range(3):
        assert torch.equal(library.tensor_arg(x), expected)
    d = rewrite.dispatcher_of(library.tensor_arg)
    assert d.compiles == 1 and d.entries[0].graph_module is not None
    assert torch.equal(library.uses_torch_global(4), torch.tensor(4.0))  # torch read as a global
    assert rewrite.dispatcher_of(library.uses_torch_global).compiles == 1
    assert "tensor_arg" in hook.report()


def test_semantics_tracebacks_inspect_pickle_and_code_names(library):
    with pytest.raises(IndexError) as info:
        library.fails(5)
    frame = info.traceback[-1]
    assert frame.lineno + 1 == library.fails.__code__.co_firstlineno + 1 and "[1, 2][n]" in str(frame.statement)
    for fn in (library.plain, library.tensor_arg, library.wrapped):
        assert inspect.getsource(fn).lstrip().startswith(("def", "@"))
        assert pickle.loads(pickle.dumps(fn)) is fn
    assert str(inspect.signature(library.wrapped)) == "(x, y=2)"
    code, orig = library.tensor_arg.__code__, original_code(library.tensor_arg.__code__)
    assert (code.co_name, code.co_qualname, code.co_varnames, code.co_filename, code.co_firstlineno) == \
        (orig.co_name, orig.co_qualname, orig.co_varnames, orig.co_filename, orig.co_firstlineno)


def test_line_tracing_sees_the_same_lines(library):
    """What coverage tools and debuggers see: the line events of the user's lines, on the first
    call (through the prologue and the decision) as on plain code. The prologue's instructions
    sit on the `def` line, which is reported on entry as well."""
    def lines_of(fn, *args):
        seen = []

        def tracer(frame, event, arg):
            if frame.f_code.co_name == fn.__name__ and event == "line":
                seen.append(frame.f_lineno)
            return tracer
        sys.settrace(tracer)
        try:
            fn(*args)
        finally:
            sys.settrace(None)
        return seen

    fn = library.total_of_squares
    assert is_rewritten(fn.__code__)
    plain = types.FunctionType(original_code(fn.__code__), library.__dict__, "total_of_squares")
    first = lines_of(fn, [1, 2, 3])  # spliced: the first call decides
    assert not is_rewritten(fn.__code__)
    body = lines_of(plain, [1, 2, 3])
    assert [n for n in first if n != fn.__code__.co_firstlineno] == body and len(body) >= 6
    assert lines_of(fn, [1, 2, 3]) == body  # the original code, back


def test_install_is_idempotent_and_uninstall_stops_instrumenting(tmp_path):
    write(tmp_path, {"late_mod_x.py": "def f(a):\n    return a\n"})
    sys.path.insert(0, str(tmp_path))
    try:
        hook.install(root=str(tmp_path))
        hook.install(root=str(tmp_path))
        assert sum(isinstance(f, hook._Finder) for f in sys.meta_path) == 1
        hook.uninstall()
        assert not hook.installed()
        import late_mod_x
        assert not is_rewritten(late_mod_x.f.__code__)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("late_mod_x", None)
    with pytest.raises(ValueError):
        hook.install(backend="no-such-backend")


def test_closures_made_after_both_decisions_carry_no_prologue(library):
    add = library.make_adder(1)  # make_adder decided plain: its original code comes back
    assert add(1) == 2  # add decided plain: make_adder's code now makes plain closures
    later = library.make_adder(5)
    assert later(1) == 6 and not is_rewritten(later.__code__)
    assert not is_rewritten(library.make_adder.__code__)


def test_an_object_holding_tensors_counts_as_touching_torch(library):
    state = library.State(torch.ones(3))
    assert torch.equal(library.step(state, 2.0), torch.full((3,), 2.0)) and state.steps == 1
    assert rewrite.dispatcher_of(library.step).compiles == 1


def test_a_program_that_never_imports_torch_runs_without_it(tmp_path):
    write(tmp_path, {"pure.py": """
        import sys

        def squares(n):
            return sum(i * i for i in range(n))

        print(squares(10), "torch" in sys.modules)
        """})
    got = cli(["--report", "pure.py"], tmp_path)
    assert got.returncode == 0 and got.stdout == "285 False\n", got.stderr
    assert "1 never touched torch" in got.stderr


def test_exclude_and_backend_options(project):
    got = cli(["--exclude", "app.models", "--backend", "eager", "--report", "script.py"], project)
    expected = plain(["script.py"], project)
    assert got.returncode == 0 and got.stdout == expected.stdout, got.stderr
    assert "Net.forward" not in got.stderr  # app.models was not instrumented
    assert cli(["--backend", "no-such-backend", "script.py"], project).returncode != 0


def test_torch_compile_on_instrumented_functions_traces_their_original_code(tmp_path):
    """Dynamo cannot read the prologue's constant: it is made to read the original instructions
    (inlined helpers, graph breaks and resume functions included)."""
    write(tmp_path, {"prog.py": """
        import torch

        def helper(x):
            return torch.sigmoid(x) * 3

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(4, 4)

            def forward(self, x):
                return helper(self.lin(x)) + 1

        def with_break(x):
            y = x * 2
            print("break")
            return helper(y)

        torch.manual_seed(0)
        net = Net()
        x = torch.randn(2, 4)
        compiled = torch.compile(net, backend="eager")
        print(torch.allclose(compiled(x), net(x)), torch.allclose(compiled(x), helper(net.lin(x)) + 1))
        g = torch.compile(with_break, backend="eager")
        print(torch.allclose(g(x), with_break(x)))
        print(torch._dynamo.explain(with_break)(x).graph_count)
        """})
    got, expected = cli(["prog.py"], tmp_path), plain(["prog.py"], tmp_path)
    assert got.returncode == expected.returncode == 0, got.stderr[-3000:]
    assert got.stdout == expected.stdout and got.stdout.count("True") == 3


def test_a_function_that_captures_no_op_gets_its_original_code_back(library):
    """It reads a tensor but calls no torch op: like Dynamo's frames without tensor ops, it runs
    as it is from then on (no guards, no recompiles for each new shape)."""
    assert library.describe(torch.ones(2, 3)) == "(2, 3) torch.float32"
    assert not is_rewritten(library.describe.__code__)
    assert library.describe(torch.ones(4)) == "(4,) torch.float32"
    assert "captured no op" in hook.report()


def test_the_report_counts_a_function_compiled_only_when_some_graph_captured_its_ops(library):
    x = torch.ones(3)
    for _ in range(2):
        assert library.logs_then_reads(x) == 3
        assert torch.equal(library.logs_then_computes(x), x * 2 + 1)
    report = hook.report()
    rows = {line.split()[0]: line.split()[2:] for line in report.splitlines()[2:]}  # graphs, breaks, ...
    assert "logs_then_reads" not in rows, report  # a break and no op anywhere: not "compiled"
    assert rows["logs_then_computes"][:2] == ["1", "1"], report  # the graph: its resume function's


def test_a_function_that_keeps_recompiling_gets_its_original_code_back(library):
    from rewrite.hook.instrument import RECOMPILE_LIMIT
    x = torch.ones(3)
    for k in range(RECOMPILE_LIMIT + 3):  # a branch on each new int: a new entry each time
        assert torch.equal(library.branchy(x, k), x * k if k % 3 == 0 else x + k)
    assert not is_rewritten(library.branchy.__code__)
    assert "kept recompiling" in hook.report()
