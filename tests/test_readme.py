"""README's example is the tool's own output on the bundled reference log (no hand-edited numbers)."""
from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from advisor.cli.app import app, route

ROOT = Path(__file__).resolve().parents[1]


def test_readme_example_is_current():
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```\n\$ dflash-advise (\S+)\n(.*?)```", text, re.S)
    assert block, "README lost its example block"
    r = CliRunner().invoke(app, route([str(ROOT / block.group(1))]))
    assert r.exit_code == 0
    assert r.stdout == block.group(2), "regenerate README's example: dflash-advise fixtures/reference-7x1.jsonl"


def test_readme_starts_with_the_two_commands():
    head = (ROOT / "README.md").read_text().split("## What it answers")[0]
    assert "dflash-advise fixtures/" in head and "python3 -m pytest" in head
