"""docs/deployed.md: every command of its worked 2-node example runs (exit 0)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULES = {"dflash-advise": "advisor", "dflash-train": "trainer"}


def test_deployed_commands_run(tmp_path):
    text = (ROOT / "docs" / "deployed.md").read_text()
    block = re.search(r"```console\n(.*?)```", text, re.S)
    assert block, "docs/deployed.md lost its worked example"
    cmds = [line[2:] for line in block.group(1).splitlines() if line.startswith("$ ")]
    assert len(cmds) >= 4
    (tmp_path / "fixtures").symlink_to(ROOT / "fixtures")
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "COLUMNS": "100"}
    for cmd in cmds:
        argv = shlex.split(cmd)
        p = subprocess.run(
            [sys.executable, "-m", MODULES[argv[0]], *argv[1:]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert p.returncode == 0, f"{cmd}: {p.stderr[-2000:]}"
    out = subprocess.run(
        [sys.executable, "-m", "advisor", "2node.jsonl", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    assert '"placement_text"' in out and '"gpus_by_role"' in out
