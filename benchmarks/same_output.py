"""Is the CLI's output unchanged? Runs a fixed battery of `dflash-advise` commands over every
fixture and sweep log and records, per command, its exit code, stdout and stderr; then compares
two such records byte for byte. Made for refactors that must not change behaviour.

    python3 benchmarks/same_output.py record /tmp/before     # on the old code
    python3 benchmarks/same_output.py record /tmp/after      # on the new code
    python3 benchmarks/same_output.py compare /tmp/before /tmp/after

The battery: every log alone (--json), pairs of logs of one sweep, --gpus 64, --token-budget,
--roles, --hs-cap, --exact, --next-run, text and markdown renderings, what-if from bare numbers,
the CI gate, summaries (summarize, then advise from them), the TensorBoard import and bad input.
Commands run as separate processes (`python -m advisor ...`), several at once.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"


def _logs() -> tuple[list[Path], dict[str, list[Path]]]:
    top = sorted(p for p in FIX.glob("*.jsonl"))
    sweeps = {d.name: sorted(d.glob("*.jsonl.gz")) for d in sorted((FIX / "sweep").iterdir()) if d.is_dir()}
    return top, sweeps


def battery(scratch: Path) -> list[tuple[str, list[str]]]:
    """(name, argv) pairs; argv after `python -m advisor`. `scratch` holds files commands write."""
    top, sweeps = _logs()
    rel = lambda p: str(p.relative_to(ROOT))  # noqa: E731
    cases: list[tuple[str, list[str]]] = []
    every = top + [p for ps in sweeps.values() for p in ps]
    for p in every:
        cases.append((f"json:{rel(p)}", [rel(p), "--json"]))
    for p in top:
        for fmt in ("text", "markdown"):
            cases.append((f"{fmt}:{rel(p)}", [rel(p), "--format", fmt]))
        cases.append((f"gpus64:{rel(p)}", [rel(p), "--gpus", "64", "--json"]))
        cases.append((f"tb16384:{rel(p)}", [rel(p), "--token-budget", "16384", "--json"]))
        cases.append((f"hscap4:{rel(p)}", [rel(p), "--hs-cap", "4", "--json"]))
        cases.append((f"next:{rel(p)}", [rel(p), "--next-run", "--restart-cost", "3", "--json"]))
        cases.append((f"exact:{rel(p)}", [rel(p), "--exact", "--json"]))
    for name, ps in sweeps.items():
        r0 = [p for p in ps if "-r0" in p.name] or ps
        for a, b in zip(r0, r0[1:]):
            cases.append((f"pair:{rel(a)}+{rel(b)}", [rel(a), rel(b), "--json"]))
        if len(r0) > 2:
            cases.append((f"pair-text:{name}", [rel(r0[0]), rel(r0[-1])]))
        first = r0[0]
        cases.append((f"gpus64:{rel(first)}", [rel(first), "--gpus", "64", "--json"]))
        cases.append((f"text:{rel(first)}", [rel(first)]))
        cases.append((f"exact:{rel(first)}", [rel(first), "--exact", "--json"]))
        cases.append((f"tb:{rel(first)}", [rel(first), "--token-budget", "8192", "--json"]))
    ref = "fixtures/reference-7x1.jsonl"
    for roles in ("target=6,drafter=2", "target=5,drafter=3", "target=1,drafter=7"):
        cases.append((f"roles:{roles}", [ref, "--roles", roles, "--json"]))
        cases.append((f"roles-text:{roles}", [ref, "--roles", roles]))
    for gpus in ("2", "16", "64", "1024"):
        cases.append((f"gpus:{gpus}", [ref, "--gpus", gpus]))
    wi = ["what-if", "--targets", "7", "--drafters", "1", "--target-bps", "0.92", "--drafter-bps", "0.86"]
    cases.append(("what-if:text", wi))
    cases.append(("what-if:json", wi + ["--json"]))
    cases.append(("what-if:markdown", wi + ["--markdown"]))
    cases.append(("what-if:gpus16", wi + ["--gpus", "16", "--json"]))
    cases.append(
        (
            "what-if:sync",
            [
                "what-if",
                "--targets",
                "5",
                "--drafters",
                "3",
                "--target-bps",
                "0.7",
                "--drafter-bps",
                "2.5",
                "--sync-every",
                "1",
                "--sync-s",
                "0.04",
            ],
        )
    )
    cases.append(("what-if:scv", wi + ["--scv", "1.5", "--hs-cap", "2", "--next-run"]))
    cases.append(
        ("what-if:bad", ["what-if", "--targets", "7", "--drafters", "1", "--target-bps", "0", "--drafter-bps", "0.86"])
    )
    cases.append(("check:text", ["check", "docs/gate.example.toml"]))
    cases.append(("check:json", ["check", "docs/gate.example.toml", "--json"]))
    cases.append(("check:markdown", ["check", "docs/gate.example.toml", "--markdown"]))
    cases.append(("check:fail", ["check", "docs/gate.example.toml", "--min-efficiency", "0.99"]))
    cases.append(("check:log", ["check", ref, "--roles", "target=6,drafter=2", "--metric", "gpu_util"]))
    cases.append(("check:rates", ["check", "fixtures/reference-7x1-rates.jsonl", "--json"]))
    ded = [rel(p) for p in sweeps.get("ded16", []) if "-r0" in p.name][:2]
    if len(ded) == 2:
        s1, s2 = str(scratch / "ded16-a.json"), str(scratch / "ded16-b.json")
        cases.append(("summarize:a", ["summarize", ded[0], "-o", s1, "-j", "1"]))
        cases.append(("summarize:b", ["summarize", ded[1], "-o", s2, "-j", "1"]))
        # advising from the summaries runs after they exist: see record()
        cases.append(("after:summary-advise", [s1, "--json"]))
        cases.append(("after:summary-text", [s1]))
        cases.append(("after:summary-pair", [s1, s2, "--json"]))
    tb = str(scratch / "tb.jsonl")
    tb_map = [
        "target.bps=pipeline/target_bps",
        "drafter.bps=pipeline/drafter_bps",
        "target.cap_bps=pipeline/target_capacity_bps",
        "drafter.cap_bps=pipeline/drafter_capacity_bps",
        "tok_s=pipeline/tokens_per_s",
        "q.hs=queues/hs_depth",
        "done=progress/done",
        "eta_s=progress/eta_s",
    ]
    cases.append(
        (
            "import-tb",
            [
                "import-tb",
                "fixtures/tensorboard",
                "-o",
                tb,
                "--roles",
                "target=7,drafter=1",
                "--gpus",
                "8",
                "--queue",
                "hs:drafter:20",
                "--samples",
                "902000",
                "--epochs",
                "6",
                *[x for m in tb_map for x in ("--map", m)],
            ],
        )
    )
    cases.append(("after:import-tb-advise", [tb, "--json"]))
    for name, argv in (
        ("bad:missing", ["no-such.jsonl"]),
        ("bad:roles", [ref, "--roles", "target=9"]),
        ("bad:gpus", [ref, "--gpus", "100000"]),
        ("bad:option", [ref, "--nope"]),
        ("help", ["--help"]),
        ("help:what-if", ["what-if", "--help"]),
    ):
        cases.append((name, argv))
    return cases


def _run(argv: list[str]) -> dict:
    env = dict(os.environ, COLUMNS="100", NO_COLOR="1", TERM="dumb")
    p = subprocess.run([sys.executable, "-m", "advisor", *argv], cwd=ROOT, capture_output=True, env=env, timeout=600)
    return {
        "rc": p.returncode,
        "stdout": p.stdout.decode("utf-8", "replace"),
        "stderr": p.stderr.decode("utf-8", "replace"),
    }


def _picked(cases: list, only: str | None, every: int) -> list:
    """The cases whose name matches `only` (a regex), then every `every`-th: a quicker battery.
    Advising from summaries stays in when the summaries it reads are made."""
    kept = [c for c in cases if not c[0].startswith("after:") and (only is None or re.search(only, c[0]))]
    kept = kept[::every]
    if any(n.startswith("summarize:") for n, _ in kept):
        kept += [c for c in cases if c[0].startswith("after:")]
    return kept


def record(out: Path, jobs: int, only: str | None = None, every: int = 1) -> None:
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="same-output-"))
    cases = _picked(battery(scratch), only, every)
    first = [(n, a) for n, a in cases if not n.startswith("after:")]
    later = [(n, a) for n, a in cases if n.startswith("after:")]
    results: dict[str, dict] = {}
    with ThreadPoolExecutor(jobs) as pool:
        for (name, _argv), res in zip(first, pool.map(lambda c: _run(c[1]), first)):
            results[name] = res
            print(f"{res['rc']} {name}", file=sys.stderr)
        for (name, _argv), res in zip(later, pool.map(lambda c: _run(c[1]), later)):
            results[name] = res
            print(f"{res['rc']} {name}", file=sys.stderr)
    for res in results.values():  # the scratch path differs between records
        for k in ("stdout", "stderr"):
            res[k] = res[k].replace(str(scratch), "<scratch>")
    (out / "outputs.json").write_text(json.dumps(results, indent=1, sort_keys=True))
    digest = hashlib.sha256(json.dumps(results, sort_keys=True).encode()).hexdigest()
    print(f"{len(results)} commands recorded in {out / 'outputs.json'} (sha256 {digest[:16]})")


def compare(a: Path, b: Path, subset: bool = False) -> int:
    ra = json.loads((a / "outputs.json").read_text())
    rb = json.loads((b / "outputs.json").read_text())
    if subset:  # compare only the commands both records ran
        ra = {k: v for k, v in ra.items() if k in rb}
        rb = {k: v for k, v in rb.items() if k in ra}
    bad = 0
    for name in sorted(set(ra) | set(rb)):
        if name not in ra or name not in rb:
            print(f"only in {'first' if name in ra else 'second'}: {name}")
            bad += 1
            continue
        for k in ("rc", "stdout", "stderr"):
            if ra[name][k] != rb[name][k]:
                bad += 1
                print(f"DIFFERS: {name} ({k})")
                if k != "rc":
                    diff = difflib.unified_diff(
                        ra[name][k].splitlines(), rb[name][k].splitlines(), "before", "after", lineterm="", n=1
                    )
                    print("\n".join(list(diff)[:30]))
                else:
                    print(f"  {ra[name][k]} -> {rb[name][k]}")
    print(f"{len(ra)} commands compared: {'all identical' if not bad else f'{bad} differences'}")
    return 1 if bad else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("out", type=Path)
    r.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    r.add_argument("--only", help="record only the commands whose name matches this regex")
    r.add_argument("--every", type=int, default=1, help="record every n-th command (after --only)")
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    c.add_argument("--subset", action="store_true", help="compare only the commands both records hold")
    args = ap.parse_args()
    if args.cmd == "record":
        record(args.out, args.jobs, args.only, args.every)
    else:
        sys.exit(compare(args.a, args.b, args.subset))


if __name__ == "__main__":
    main()
