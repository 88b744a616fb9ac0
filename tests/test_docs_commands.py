"""Every command shown in README.md and docs/*.md runs, as shown.

Commands are read from the documents themselves: fenced ``bash``/``sh`` blocks and indented
shell blocks (lines starting with ``dflash-advise``, ``dflash-train`` or ``python``, with ``\\``
continuations). Each document's commands run in order, in one scratch directory that links
``fixtures``, ``docs``, ``examples`` and ``benchmarks`` from the repository (so a command that
writes ``run.jsonl`` leaves it for the next one, as a reader's shell would), through bash with
``dflash-advise``/``dflash-train``/``python`` bound to this checkout. Placeholders are swapped
for small fixtures by ``SUBSTITUTIONS`` (named, in order; the one benchmark keeps its shape at a
smaller size). Not run: ``pip install`` (it would reinstall the package this suite tests) and
``pytest`` (the suite itself); their parts are checked instead (the files and extras they name
exist). The notebook's ``jupyter nbconvert`` line runs in tests/test_notebooks.py, and the
commands of docs/stacks/ and docs/deployed.md's console block in tests/test_stacks.py and
tests/test_deployed_doc.py. Python blocks run when they are whole programs (the README's library calls, the schema
check) and are compiled when they are snippets of someone else's loop (docs/instrumenting.md).
The example gate and workflow (docs/*.toml, docs/*.yml) run the commands their comments and
steps show, the same way. The README's example output is compared byte for byte in
tests/test_readme.py.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LOG = "fixtures/reference-7x1.jsonl"
ENDED = "fixtures/cpu-2x1.jsonl"  # a log with its `end`: --follow returns once it is read

# (pattern, replacement), applied in order to every command; each names what it stands for
SUBSTITUTIONS = [
    (r"\[(--[^\]]*)\]", r"\1"),  # optional options: given
    (r"\brun-m1\.jsonl run-m2\.jsonl\b", "fixtures/h200-1x1.jsonl fixtures/h200-1x2.jsonl"),  # two drafter counts
    (r"\bcheck gate\.toml\b", "check docs/gate.example.toml"),
    (r"\bLOG\.\.\.", LOG),
    (r"\bLOG\b", LOG),
    (r"/logs/node07/rank-\*\.jsonl", "fixtures/h200-1x1.jsonl"),  # one node's rank files
    (r"\bruns/exp-17/tb\b", "fixtures/tensorboard"),  # TensorBoard event files
    # the large-log benchmark at a small size: its shape (split, jobs, the merge check), not its timing
    (r"--lines 1000000", "--lines 20000"),
    (r"--split 16", "--split 4"),
    (r"--jobs 1 2 4 8 16", "--jobs 1 2"),
    (r"--dir /tmp/ll", "--dir {scratch}/ll"),  # the benchmark runs in the repo
    # the rank-file benchmark at a small size: two file counts, one run, no crossover scan
    (
        r"parallel_ranks\.py --out /tmp/parallel_ranks\.json",
        "parallel_ranks.py --lines 20000 --files 4 16 --runs 1 --scan --out {scratch}/parallel_ranks.json",
    ),
]
# sbatch and the advice on what its job writes: tests/test_slurm_summarize.py runs the script's steps;
# the notebook's nbconvert line: tests/test_notebooks.py runs it as written, in a scratch folder
NOT_RUN = ("pip install", "-m pytest", "sbatch ", "RUN_DIR/summaries/", "jupyter nbconvert")
PRELUDE = (
    'dflash-advise() { "$PY" -m advisor "$@"; }\ndflash-train() { "$PY" -m trainer "$@"; }\n'
    'python() { "$PY" "$@"; }\npython3() { "$PY" "$@"; }\njupyter() { "$PY" -m jupyter "$@"; }\n'
    "set -o pipefail\n"
)


def shell_commands(text: str) -> list[str]:
    """The shell commands of a Markdown text, in order: fenced bash/sh blocks and indented blocks."""
    out: list[str] = []
    blocks = re.findall(r"^```(?:bash|sh)\n(.*?)^```", text, re.S | re.M)
    indented = re.findall(
        r"(?:^\n)((?:^    (?:dflash-advise|dflash-train|python)[^\n]*\n(?:^        [^\n]*\n)*)+)", text, re.M
    )
    for block in blocks + indented:
        joined = re.sub(r"\\\n\s*", "", block)
        for line in joined.splitlines():
            line = re.sub(r"\s+#\s.*$", "", line.strip())
            if line and not line.startswith("#"):
                out.append(line)
    return out


def substitute(cmd: str, scratch: Path = Path(".")) -> str:
    if "--follow" in cmd:
        cmd = re.sub(r"\bLOG\b", ENDED, cmd)
    for pat, rep in SUBSTITUTIONS:
        cmd = re.sub(pat, rep.replace("{scratch}", str(scratch)), cmd)
    return cmd


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def _scratch(tmp_path: Path) -> Path:
    for name in ("fixtures", "docs", "examples", "benchmarks"):
        (tmp_path / name).symlink_to(ROOT / name)
    return tmp_path


def _env() -> dict[str, str]:
    return dict(os.environ, PY=sys.executable, PYTHONPATH=str(ROOT), COLUMNS="100", NO_COLOR="1", TERM="dumb")


def _run(cmd: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", PRELUDE + cmd], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600
    )


def test_the_parser_finds_the_commands_readers_see():
    readme = shell_commands((ROOT / "README.md").read_text())
    assert readme[0].startswith("python3 -m pip install -e . && dflash-advise fixtures/")
    assert any(c.startswith("dflash-train --emulate run.jsonl") for c in readme)
    inst = shell_commands((ROOT / "docs" / "instrumenting.md").read_text())
    assert "python examples/instrumented_loop.py --out runs/demo" in inst
    tb = next(c for c in inst if "import-tb" in c)
    assert "--map q.hs=queues/hs_depth" in tb and "\\" not in tb  # continuations joined
    assert substitute("dflash-advise LOG --follow") == f"dflash-advise {ENDED} --follow"
    assert (
        substitute("dflash-advise check LOG --x [--metric gpu_util]")
        == f"dflash-advise check {LOG} --x --metric gpu_util"
    )


# a path of this repository as documents name it (not the tail of a longer path or address)
REPO_PATH = re.compile(
    r"(?<![\w/.-])(?:advisor|trainer|benchmarks|notebooks|examples|docs|tests|fuzz|fixtures)"
    r"/[\w./*-]*\w"
)


def test_every_repository_path_a_document_names_exists():
    """README, every page under docs/ and the example gate and workflow name only files that exist
    (docs/gate.example.toml sent readers to advisor/check.py, which had moved to advisor/cli/)."""
    docs = [
        ROOT / "README.md",
        *sorted((ROOT / "docs").rglob("*.md")),
        *sorted((ROOT / "docs").glob("*.toml")),
        *sorted((ROOT / "docs").glob("*.yml")),
    ]
    named = {(doc.name, p) for doc in docs for p in REPO_PATH.findall(doc.read_text())}
    assert len(named) > 20 and ("gate.example.toml", "advisor/cli/check.py") in named
    missing = sorted((doc, p) for doc, p in named if not glob.glob(str(ROOT / p)))
    assert not missing, missing


def test_install_lines_name_what_exists():
    """The install and test lines are not run here; what they name must exist."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for cmd in shell_commands((ROOT / "README.md").read_text()):
        if "pip install" in cmd:
            for name in re.findall(r"-c (\S+)", cmd):
                assert (ROOT / name).is_file(), cmd
            for group in re.findall(r"\.\[([^\]]+)\]", cmd):
                assert set(group.split(",")) <= set(extras), cmd


def config_commands(text: str) -> list[str]:
    """The commands of an example config or workflow (docs/*.toml, docs/*.yml): the indented lines,
    or indented comment lines, that start with ``dflash-advise``, without a trailing comment."""
    return [m.strip() for m in re.findall(r"^(?:#[ \t]{2,}|[ \t]+)(dflash-advise [^#\n]*)", text, re.MULTILINE)]


EXAMPLES = [*sorted((ROOT / "docs").glob("*.toml")), *sorted((ROOT / "docs").glob("*.yml"))]


def test_the_examples_commands_are_found():
    gate = config_commands((ROOT / "docs" / "gate.example.toml").read_text())
    assert gate == [
        "dflash-advise check docs/gate.example.toml",
        "dflash-advise check docs/gate.example.toml --markdown",
    ]
    ci = config_commands((ROOT / "docs" / "ci-example.yml").read_text())
    assert ci == ["dflash-advise check gate.toml --markdown > advice.md 2> advice.err"]


@pytest.mark.slow
@pytest.mark.parametrize("doc", EXAMPLES, ids=lambda p: p.name)
def test_every_command_of_the_example_gate_and_workflow_runs(doc, tmp_path):
    cmds = config_commands(doc.read_text())
    assert cmds, f"{doc.name} shows no command"
    _run_in_order(doc, cmds, _scratch(tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_shell_command_of_the_doc_runs(doc, tmp_path):
    _run_in_order(doc, shell_commands(doc.read_text()), _scratch(tmp_path))


def _run_in_order(doc: Path, cmds: list[str], cwd: Path) -> None:
    for cmd in cmds:
        parts = [p.strip() for p in cmd.split("&&")]
        runnable = " && ".join(p for p in parts if not any(x in p for x in NOT_RUN))
        if not runnable:
            continue
        line = substitute(runnable, cwd)
        r = _run(line, cwd)
        gate = " check " in f" {line} "
        assert r.returncode in ((0, 1) if gate else (0,)), f"{doc.name}: `{line}` exited {r.returncode}:\n{r.stderr}"
        assert "Traceback" not in r.stderr, f"{doc.name}: `{line}`:\n{r.stderr}"
        if gate:  # a gate's exit code is its verdict, and says so (in the file stdout went to, if any)
            out = re.search(r"(?<![0-9&])> (\S+)", line)
            said = (cwd / out.group(1)).read_text() if out else r.stdout
            assert ("PASS" if r.returncode == 0 else "FAIL") in said, line
        if line.startswith("dflash-advise --version"):
            assert r.stdout.startswith("dflash-advise "), r.stdout
        if "dflash-train --emulate" in line:
            # the README's source ran one drafter (no sync to resample): emulated without sync, said in one line
            assert "without weight sync" in r.stderr and r.stderr.count("\n") == 2, r.stderr
        if "-o " in line or "--out " in line:
            target = re.search(r"(?:-o|--out) (\S+)", line).group(1)
            assert (cwd / target).exists(), f"{line} wrote no {target}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_python_blocks_run_or_compile(doc, tmp_path):
    cwd = _scratch(tmp_path)
    for i, block in enumerate(python_blocks(doc.read_text())):
        code = block.replace('"run.jsonl"', f'"{LOG}"')
        compile(code, f"{doc.name}:block{i}", "exec")
        if doc.name in ("instrumenting.md", "deployed.md"):
            continue  # snippets of the reader's own loop (q_hs, train_step, the engine): compiled only;
            # examples/instrumented_loop.py runs the pattern whole
        r = subprocess.run(
            [sys.executable, "-c", code], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=300
        )
        assert r.returncode == 0, f"{doc.name} block {i}:\n{r.stderr}"
        if "iter_errors" in code:
            assert r.stdout == "", r.stdout  # the fixture validates against the schema
