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


def test_readme_gate_example_is_current():
    """The CI gate section's PASS/FAIL line is the gate's own output (exit 1: it fails)."""
    import shlex

    text = (ROOT / "README.md").read_text()
    block = re.search(r"```\n\$ dflash-advise (check [^\n]*)\n(.*?)```", text, re.DOTALL)
    assert block, "README lost its gate example"
    args = shlex.split(block.group(1))
    args[1] = str(ROOT / args[1])
    r = CliRunner().invoke(app, route(args))
    assert r.exit_code == (1 if block.group(2).startswith("FAIL") else 0)
    assert r.stdout == block.group(2), f"regenerate README's gate example: dflash-advise {block.group(1)}"
