"""The docstring house rule, checked: a summary line everywhere, Args and Returns where users call.

The house rules (README, "Layout") ask for a summary line and the maths and the rules on every
public function, and ``Args:`` and ``Returns:`` (Google style) on the API a user calls: what
``advisor/__init__`` exports, instrument.py and the records of the JSON (``API``). This test reads
advisor/ with `ast` and fails for each public function or method whose docstring lacks a summary
line and, in the API, for one that lacks an ``Args:`` entry for a parameter or a ``Returns:``
(``Yields:`` for a generator) section where something is returned.

Public: a module-level function, or a method of a module-level class, whose name and class name
do not start with an underscore. Left out: properties (their summary is their documentation),
overloads, and the typer commands and callback of ``advisor/cli/app.py``, whose docstrings are
the CLI's ``--help`` and whose parameters carry their own help.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "advisor"
MODULES = sorted(p for p in ROOT.rglob("*.py"))
SKIPPED_DECORATORS = {"property", "cached_property", "overload", "command", "callback", "setter"}
API = {  # module -> its public names whose functions and methods carry Args and Returns ("*": all)
    "advice.py": {"advise", "advise_numbers", "fit_logs", "Advice", "Fitted", "Recommendation"},
    "settings.py": {"Options"},
    "present/json.py": {"advice_json"},
    "ingest/load.py": {"load_log"},
    "instrument.py": {"*"},
    "records.py": {"*"},
    "errors.py": {"LogError", "LogRefused", "SettingsError"},
}
SECTION = re.compile(r"^\s*(Args|Returns|Yields|Raises):\s*$", re.MULTILINE)


def _decorator_names(fn: ast.FunctionDef) -> set[str]:
    names = set()
    for dec in fn.decorator_list:
        node = dec.func if isinstance(dec, ast.Call) else dec
        names.add(node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", ""))
    return names


def _public_functions(tree: ast.Module):
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            yield node.name, node
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and not item.name.startswith("_"):
                    yield f"{node.name}.{item.name}", item


def _params(fn: ast.FunctionDef) -> list[str]:
    args = fn.args
    names = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
    names += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    return [n for n in names if n not in ("self", "cls")]


def _is_generator(fn: ast.FunctionDef) -> bool:
    def walk(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(child, (ast.Yield, ast.YieldFrom)):
                return True
            if walk(child):
                return True
        return False

    return walk(fn)


def _section(doc: str, name: str) -> str:
    """The text of section ``name`` (up to the next section or the end), or "" when absent."""
    parts = SECTION.split(doc)
    for i in range(1, len(parts) - 1, 2):
        if parts[i] == name:
            return parts[i + 1]
    return ""


def problems(path: Path, root: Path = ROOT, api: dict[str, set[str]] | None = None) -> list[str]:
    """What the docstrings of ``path``'s public functions lack, one line each."""
    found = []
    names = (API if api is None else api).get(path.relative_to(root).as_posix(), set())
    for name, fn in _public_functions(ast.parse(path.read_text(encoding="utf-8"))):
        if _decorator_names(fn) & SKIPPED_DECORATORS:
            continue
        where = f"{path.relative_to(root.parent)}:{fn.lineno} {name}"
        doc = ast.get_docstring(fn)
        if not doc or not doc.strip().splitlines()[0].strip():
            found.append(f"{where}: no summary line")
            continue
        if "*" not in names and name.split(".")[0] not in names:
            continue
        params = _params(fn)
        if params:
            documented = {
                m.group(1).lstrip("*") for m in re.finditer(r"^ {4}(\*{0,2}\w+)\b.*?:", _section(doc, "Args"), re.M)
            }
            missing = [p for p in params if p not in documented]
            if missing:
                found.append(f"{where}: Args lacks {', '.join(missing)}")
        returns_none = fn.returns is not None and ast.unparse(fn.returns) in ("None", "NoReturn")
        if _is_generator(fn):
            if not _section(doc, "Yields").strip():
                found.append(f"{where}: no Yields")
        elif not returns_none and not _section(doc, "Returns").strip():
            found.append(f"{where}: no Returns")
    return found


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(ROOT)) for p in MODULES])
def test_public_functions_document_args_and_returns(path):
    assert problems(path) == []


def test_the_check_finds_what_a_docstring_lacks(tmp_path):
    bad = tmp_path / "mod.py"
    bad.write_text(
        "def f(a, *rest, b=1, **kw) -> int:\n"
        '    """Summary.\n\n    Args:\n        a: the first.\n        *rest: more.\n    """\n'
        "def g() -> int:\n"
        '    """Summary."""\n'
        "def h(x) -> None:\n"
        '    """Summary.\n\n    Args:\n        x: a thing.\n    """\n'
        "def gen():\n"
        '    """Summary.\n\n    Returns:\n        wrong section.\n    """\n'
        "    yield 1\n"
        "class C:\n"
        "    @property\n"
        "    def p(self):\n"
        "        return 1\n"
        "    def m(self, y):\n"
        '        """Summary.\n\n        Args:\n            y: a thing.\n\n'
        '        Returns:\n            it.\n        """\n',
        encoding="utf-8",
    )
    assert [line.split(" ", 1)[1] for line in problems(bad, root=tmp_path, api={"mod.py": {"*"}})] == [
        "f: Args lacks b, kw",
        "f: no Returns",
        "g: no Returns",
        "gen: no Yields",
    ]


def test_outside_the_api_a_summary_line_is_enough(tmp_path):
    mod = tmp_path / "mod.py"
    mod.write_text('def f(a) -> int:\n    """Summary."""\ndef g(a) -> int:\n    return a\n', encoding="utf-8")
    assert [line.split(" ", 1)[1] for line in problems(mod, root=tmp_path, api={})] == ["g: no summary line"]
    assert [line.split(" ", 1)[1] for line in problems(mod, root=tmp_path, api={"mod.py": {"f"}})] == [
        "f: Args lacks a",
        "f: no Returns",
        "g: no summary line",
    ]
