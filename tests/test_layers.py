"""The package's shape: every import runs downhill along the data flow, none closes a circle.

Read from the source (``ast``), every import counted, module-level or inside a function:

- wings in flow order (``WINGS``); a module may import its own wing or an earlier one, never a
  later one;
- no circle among modules (a function-local import counts: hiding one inside a function does
  not break a circle, it only delays it);
- no module imports another module's private name (``_x``), and neither do the tests;
- no module of 1,000 lines or more, and no function over ``MAX_FUNCTION_LINES`` but the event loop;
- no public function (module level, or a method of a public class) takes more than
  ``MAX_PARAMETERS`` parameters, counting every one a caller may pass (``*args`` and ``**kw``
  count one each; ``self`` and ``cls`` none): related ones travel as a record.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "advisor"

# the bottom: records, errors, settings and statistics every wing may use; the documented
# standard-library writers (records, instrument) and the TensorBoard converter sit there too
BASE = (
    "advisor.errors",
    "advisor.settings",
    "advisor.stats",
    "advisor.records",
    "advisor.instrument",
    "advisor.tbimport",
    "advisor.stacks",
)
WINGS = ("base", "ingest", "measure", "model", "fit", "project", "decide", "advice", "present", "cli")
FACE = ("advisor", "advisor.__main__")  # the public face: lazy re-exports, above everything
MAX_MODULE_LINES = 1000
MAX_FUNCTION_LINES = 80
MAX_PARAMETERS = 8
WIDE_ALLOWED = {"advisor.settings.Options"}  # every option in one record: its fields are the point
# the exact simulator's event loop: its handlers are closures over one shared state, the fastest
# form CPython runs (a class with methods costs an attribute lookup per access in the hot loop)
LONG_HOT_LOOPS = {"advisor.model.simulate._events"}  # the event loop: one function, its helpers closures


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def wing(mod: str) -> str:
    if mod in BASE:
        return "base"
    if mod == "advisor.advice":
        return "advice"
    parts = mod.split(".")
    if len(parts) >= 2 and parts[1] in WINGS:
        return parts[1]
    raise AssertionError(f"{mod} belongs to no wing: add it to a wing's folder or to BASE")


def _resolve(mod: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    is_pkg = MODULES[mod].name == "__init__.py"
    base = mod.split(".")
    base = base if is_pkg else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _owner(target: str) -> str | None:
    """The advisor module an imported dotted name lives in (a module, or a name in one)."""
    while target:
        if target in MODULES:
            return target
        target = target.rpartition(".")[0]
    return None


def imports_of(mod: str) -> list[tuple[str, list[str], int]]:
    """(imported module, names taken from it, line) for every advisor import in ``mod``."""
    tree = ast.parse(MODULES[mod].read_text(), str(MODULES[mod]))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                owner = _owner(a.name)
                if owner:
                    out.append((owner, [], node.lineno))
        elif isinstance(node, ast.ImportFrom):
            src = _resolve(mod, node)
            for a in node.names:
                sub = f"{src}.{a.name}"
                if sub in MODULES:  # `from advisor.ingest import load`: the submodule
                    out.append((sub, [], node.lineno))
                elif _owner(src):
                    out.append((_owner(src), [a.name], node.lineno))
    return out


GRAPH = {m: imports_of(m) for m in MODULES}


def test_every_module_belongs_to_a_wing():
    for m in MODULES:
        if m not in FACE:
            wing(m)


def upward_imports(mod: str, graph: dict, wing_of=None) -> list[str]:
    """The imports of ``mod`` that climb to a later wing (or take more than the version from the face)."""
    wing_of = wing_of or wing
    here = WINGS.index(wing_of(mod))
    bad = []
    for target, names, line in graph[mod]:
        if target in FACE:  # only the version string may be read from the face
            if not names or any(n != "__version__" for n in names):
                bad.append(f"{mod}:{line} imports the face {target}")
            continue
        there = WINGS.index(wing_of(target))
        if there > here:
            bad.append(
                f"{mod}:{line} ({WINGS[here]}) imports {target} ({WINGS[there]}), a later wing: "
                f"move what it needs down, or the caller up"
            )
    return bad


def circles(graph: dict) -> list[list[str]]:
    """Import circles: Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w, _, _ in graph[v]:
            if w == v:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return found


@pytest.mark.parametrize("mod", [m for m in MODULES if m not in FACE])
def test_imports_run_downhill(mod):
    bad = upward_imports(mod, GRAPH)
    assert not bad, "\n".join(bad)


def test_no_import_circles():
    assert not circles(GRAPH), f"import circles: {circles(GRAPH)}"


def test_no_private_names_across_modules():
    bad = [
        f"{m}:{line} takes {n} from {t}"
        for m, edges in GRAPH.items()
        for t, names, line in edges
        for n in names
        if n.startswith("_") and t != m and not n.startswith("__")
    ]
    assert not bad, "private names imported across modules:\n" + "\n".join(bad)


def test_tests_import_public_names():
    bad = []
    for p in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("advisor"):
                bad += [
                    f"{p.name}:{node.lineno} {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    assert not bad, "tests import private names:\n" + "\n".join(bad)


@pytest.mark.parametrize("mod", list(MODULES))
def test_module_size(mod):
    n = len(MODULES[mod].read_text().splitlines())
    assert n < MAX_MODULE_LINES, f"{mod} has {n} lines: split it by job"


def test_functions_are_short_but_the_event_loop():
    long = []
    for m, p in MODULES.items():
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES and f"{m}.{node.name}" not in LONG_HOT_LOOPS:
                    long.append(f"{m}.{node.name}: {n} lines")
    assert not long, "functions over the limit:\n" + "\n".join(long)


def wide_functions(mod: str, source: str) -> list[str]:
    """Public functions and public classes' methods of ``source`` over ``MAX_PARAMETERS`` parameters."""

    def count(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
        a = fn.args
        names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
        return len([n for n in names if n not in ("self", "cls")]) + (a.vararg is not None) + (a.kwarg is not None)

    out = []

    def visit(body: list[ast.stmt], where: str) -> None:
        for node in body:
            name = f"{where}.{getattr(node, 'name', '')}"
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_") and name not in WIDE_ALLOWED:
                visit(node.body, name)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                public = not node.name.startswith("_") or (node.name == "__init__" and where != mod)
                if public and count(node) > MAX_PARAMETERS:
                    out.append(f"{name}: {count(node)} parameters")

    visit(ast.parse(source).body, mod)
    return out


def test_public_functions_take_few_parameters():
    wide = [w for m, p in MODULES.items() for w in wide_functions(m, p.read_text())]
    assert not wide, f"public functions over {MAX_PARAMETERS} parameters (pass a record):\n" + "\n".join(wide)


def test_the_parameter_check_sees_a_wide_function():
    """The rule is live: it counts keyword-only, ``*args`` and ``**kw`` and leaves out private names."""
    src = """
def f(a, b, c, d, e, f, g, *args, h, **kw): ...
def _g(a, b, c, d, e, f, g, h, i): ...
def ok(a, b, c, d, e, f, g, h): ...
class C:
    def __init__(self, a, b, c, d, e, f, g, h, i): ...
    def m(self, a, b, c, d, e, f, g, h): ...
class _P:
    def m(self, a, b, c, d, e, f, g, h, i): ...
"""
    assert wide_functions("x", src) == ["x.f: 10 parameters", "x.C.__init__: 9 parameters"]


def test_the_checker_sees_a_circle_and_an_upward_import():
    """The rules are live: on a made-up graph they find the circle and the climb that are there."""
    graph = {
        "a.fit.x": [("a.ingest.y", [], 1)],
        "a.ingest.y": [("a.ingest.z", [], 2)],
        "a.ingest.z": [("a.fit.x", ["f"], 3)],
        "a.decide.w": [("a.ingest.y", [], 4)],
    }
    wing_of = lambda m: m.split(".")[1]  # noqa: E731
    assert circles(graph) == [["a.fit.x", "a.ingest.y", "a.ingest.z"]]
    assert upward_imports("a.ingest.z", graph, wing_of) and not upward_imports("a.decide.w", graph, wing_of)
    assert not upward_imports("a.fit.x", graph, wing_of)
    assert sum(len(v) for v in GRAPH.values()) > 50  # and the real graph was read
