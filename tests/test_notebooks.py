"""Every notebooks/*.ipynb runs top to bottom on a fresh kernel, through the README's own command.

The README's ``jupyter nbconvert ... --execute`` line runs as written (with the notebook's name
swapped in for another notebook), in a scratch folder that holds a copy of the notebook and links
to ``fixtures/`` and ``advisor/``: the executed copy and anything the kernel writes land there,
never in the checkout. Its time limits hold on a loaded 2-core machine: no limit per cell but
the nbconvert run's own (``--ExecutePreprocessor.timeout``), 10 minutes, and 5 for the kernel to
start, where nbclient's default is one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import load_script
from test_docs_commands import PRELUDE, shell_commands

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
LIMITS = " --ExecutePreprocessor.timeout=600 --ExecutePreprocessor.startup_timeout=300"


def readme_notebook_command() -> str:
    """The README's one command that executes a notebook."""
    cmds = [c for c in shell_commands((ROOT / "README.md").read_text()) if "nbconvert" in c]
    assert len(cmds) == 1, f"README should show how to run the notebook once, found {cmds}"
    return cmds[0]


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no .ipynb"


def test_the_readme_says_how_to_run_the_notebook_and_the_dev_extra_installs_it():
    cmd = readme_notebook_command()
    assert cmd.startswith("jupyter nbconvert --to notebook --execute notebooks/compare_splits.ipynb"), cmd
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {d.split(">")[0].split("=")[0].split("[")[0].strip() for d in extras["dev"]}
    assert {"nbconvert", "nbclient", "nbformat", "ipykernel"} <= names, names
    installs = [c for c in shell_commands((ROOT / "README.md").read_text()) if "pip install" in c]
    assert any("dev" in c for c in installs)


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes_in_a_scratch_folder(path, tmp_path):
    cmd = readme_notebook_command().replace("compare_splits.ipynb", path.name)
    (tmp_path / "notebooks").mkdir()
    shutil.copy(path, tmp_path / "notebooks" / path.name)
    for name in ("fixtures", "advisor"):  # what the notebook looks for, walking up from its folder
        (tmp_path / name).symlink_to(ROOT / name)
    env = dict(os.environ, PY=sys.executable, PYTHONPATH=str(ROOT))
    env.pop("MPLBACKEND", None)  # the kernel's inline backend renders the figures into the cells
    r = subprocess.run(
        ["bash", "-c", PRELUDE + cmd + LIMITS], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1500
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = tmp_path / "nb-out" / path.name
    assert out.is_file(), r.stderr[-3000:]
    nb = nbformat.read(out, as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    images = sum(1 for o in outputs if "image/png" in o.get("data", {}))
    assert images >= 4, f"{path.name}: expected its figures to render, got {images} images"
    assert nbformat.read(path, as_version=4) == nbformat.read(tmp_path / "notebooks" / path.name, as_version=4)


def test_committed_notebook_is_what_the_generator_writes():
    mod = load_script("notebooks/make_notebook.py", "make_notebook")
    committed = nbformat.read(ROOT / "notebooks" / "compare_splits.ipynb", as_version=4)
    fresh = mod.build()
    assert [c.source for c in committed.cells] == [c.source for c in fresh.cells], (
        "notebooks/compare_splits.ipynb is stale: run python3 notebooks/make_notebook.py"
    )
    assert all(not c.get("outputs") for c in committed.cells if c.cell_type == "code"), "commit without outputs"
