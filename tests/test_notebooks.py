"""Every notebooks/*.ipynb runs top to bottom on a fresh kernel without an error."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from conftest import load_script
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no .ipynb"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path):
    nb = nbformat.read(path, as_version=4)
    # run from notebooks/, as Jupyter would: the notebook walks up to the repo root itself
    cwd = ROOT / "notebooks"
    client = NotebookClient(nb, kernel_name="python3", timeout=120, allow_errors=False,
                            resources={"metadata": {"path": str(cwd)}})
    client.execute()   # raises CellExecutionError naming the failing cell
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    images = sum(1 for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                 if "image/png" in o.get("data", {}))
    assert images >= 4, f"{path.name}: expected its figures to render, got {images} images"


def test_committed_notebook_is_what_the_generator_writes():
    mod = load_script("notebooks/make_notebook.py", "make_notebook")
    committed = nbformat.read(ROOT / "notebooks" / "compare_splits.ipynb", as_version=4)
    fresh = mod.build()
    assert [c.source for c in committed.cells] == [c.source for c in fresh.cells], \
        "notebooks/compare_splits.ipynb is stale: run python3 notebooks/make_notebook.py"
    assert all(not c.get("outputs") for c in committed.cells if c.cell_type == "code"), "commit without outputs"
