"""The import layers of `rewrite/layers.py` hold: every import of every module of `rewrite/`,
`codegen/` (as rewrite.codegen) and `fuzz/` (as rewrite.fuzz) -- module level and function
level, read with `ast`; imports under `if TYPE_CHECKING:` do not count -- goes to the module's
own layer (to a module listed before it) or to a layer below that its layer may import; every
module is in the table; no project module is imported by name at run time
(`importlib.import_module`, `__import__`, `sys.modules[...]`), which would hide an arrow; and
every protocol table a lower layer owns is filled once `rewrite` is imported."""
import ast
import pathlib

import pytest

from rewrite.layers import LAYERS

ROOT = pathlib.Path(__file__).resolve().parent.parent
FOLDERS = {"rewrite": "", "codegen": "codegen", "fuzz": "fuzz"}
# run-time imports of names that are not the project's: the traced program's own `import`
DYNAMIC_IMPORTS = {("rewrite/trace/handlers/variables.py", "import_name")}


def project_modules() -> dict[str, pathlib.Path]:
    """Module name ("" for rewrite/__init__, "ops.core", "codegen.python", ...) -> its file."""
    found = {}
    for folder, prefix in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = [p for p in path.relative_to(ROOT / folder).with_suffix("").parts if p != "__init__"]
            if folder == "rewrite" and parts and parts[0] in ("codegen", "fuzz"):
                continue
            found[".".join(([prefix] if prefix else []) + parts)] = path
    return found


MODULES = project_modules()
PLACE = {}  # module -> (layer index, position in the layer)
for index, (_, names, _) in enumerate(LAYERS):
    for position, name in enumerate(names):
        PLACE[name] = (index, position)


def _resolve(dotted: str) -> str | None:
    """A dotted import target as a project module name, or None (not the project's)."""
    if dotted == "rewrite":
        return ""
    if dotted.startswith("rewrite."):
        dotted = dotted[len("rewrite."):]
    elif not dotted.split(".")[0] in ("codegen", "fuzz"):
        return None
    while dotted and dotted not in MODULES:
        dotted = dotted.rpartition(".")[0]
    return dotted if dotted in MODULES else ("" if dotted == "" else None)


def imports(name: str, path: pathlib.Path):
    """(line, target module, what) of each project import in the module, TYPE_CHECKING aside."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    target = _resolve(alias.name)
                    if target is not None:
                        found.append((child.lineno, target, alias.name))
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = ["rewrite", *package.split(".")] if package else ["rewrite"]
                    base = base[:len(base) - (child.level - 1)]
                    module = ".".join(base + ([child.module] if child.module else []))
                else:
                    module = child.module or ""
                for alias in child.names:
                    target = _resolve(f"{module}.{alias.name}")
                    target = target if target not in (None, "") or module == "rewrite" and alias.name == "*" \
                        else _resolve(module)
                    if target is not None:
                        found.append((child.lineno, target, f"{module}.{alias.name}"))
            visit(child)
    visit(tree)
    return found


def test_every_module_is_in_one_layer():
    listed = [name for _, names, _ in LAYERS for name in names]
    assert len(listed) == len(set(listed)), "a module is listed twice"
    assert sorted(set(MODULES) - set(listed)) == [], "modules in no layer: add them to rewrite/layers.py"
    assert sorted(set(listed) - set(MODULES)) == [], "layers list modules that do not exist"


def violations() -> list[str]:
    out = []
    for name, path in MODULES.items():
        layer, position = PLACE[name]
        layer_name, _, allowed = LAYERS[layer]
        for line, target, what in imports(name, path):
            if target == name:
                continue
            t_layer, t_position = PLACE[target]
            t_name = LAYERS[t_layer][0]
            ok = t_layer < layer and (allowed is None or t_name in allowed) or t_layer == layer and t_position < position
            if not ok:
                where = f"{path.relative_to(ROOT) if ROOT in path.parents else path}:{line}"
                how = "up a layer" if t_layer > layer else "out of its layer's order" if t_layer == layer \
                    else f"to a layer {layer_name} may not import"
                out.append(f"{where}: {name or 'rewrite'} ({layer_name}) imports {what} ({t_name}): {how}")
    return out


def test_no_import_goes_up_a_layer_or_out_of_order():
    assert violations() == []


def _constants(tree) -> dict:
    return {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
            for t in n.targets if isinstance(t, ast.Name)}


def test_no_project_module_is_imported_by_name_at_run_time():
    bad = []
    for name, path in MODULES.items():
        rel = str(path.relative_to(ROOT))
        tree = ast.parse(path.read_text(encoding="utf-8"))
        consts = _constants(tree)
        functions = {id(n): f.name for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                     for n in ast.walk(f)}
        for node in ast.walk(tree):
            key = None
            if isinstance(node, ast.Call) and (
                    isinstance(node.func, ast.Name) and node.func.id in ("__import__", "import_module") or
                    isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"):
                key = node.args[0] if node.args else None
            elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "sys.modules" and \
                    isinstance(node.ctx, ast.Load):
                key = node.slice
            else:
                continue
            value = key.value if isinstance(key, ast.Constant) else consts.get(getattr(key, "id", None))
            if isinstance(value, str):
                if _resolve(value) is not None or value.startswith("."):
                    bad.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
            elif (rel, functions.get(id(node))) not in DYNAMIC_IMPORTS:
                bad.append(f"{rel}:{node.lineno}: {ast.unparse(node)} (a name not known here)")
    assert bad == []


def test_a_deliberate_upward_import_is_caught(tmp_path, monkeypatch):
    """The check fails on what it should: an import from the rules up into the tracer."""
    fake = tmp_path / "core.py"
    fake.write_text(MODULES["ops.core"].read_text() + "\n\ndef _up():\n    from ..trace.interpreter import Tracer\n")
    monkeypatch.setitem(MODULES, "ops.core", fake)
    found = [v for v in violations() if "ops.core (ops) imports" in v]
    assert found and "trace.interpreter" in found[0] and "up a layer" in found[0], found


def test_every_protocol_is_filled_once_rewrite_is_imported():
    import rewrite
    from rewrite import registry
    rewrite.jit  # (the face: importing it fills the tables)
    assert [p for p in registry.Protocol.ALL if p.missing()] == []
    registry.check()
