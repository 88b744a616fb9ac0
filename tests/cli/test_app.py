"""The CLI: one test per exit path (0 ok/pass, 1 gate fails, 2 unusable input), and a cheap --help."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from advisor.cli.app import COMMANDS, app, route

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures"


def invoke(*args):
    return runner.invoke(app, route([str(a) for a in args]))


def test_default_command_text(reference):
    r = invoke(reference)
    assert r.exit_code == 0, r.output
    assert "STAY with 7-1" in r.output and ">*  7-1" in r.output


def test_json_output(reference):
    r = invoke(reference, "--json")
    assert r.exit_code == 0
    j = json.loads(r.stdout)
    assert j["recommendation"]["roles"] == {"target": 7, "drafter": 1}


def test_markdown_output(reference):
    r = invoke(reference, "--markdown")
    assert r.exit_code == 0
    assert r.output.startswith("### dflash-advise") and "| **7-1** |" in r.output


def test_json_and_markdown_conflict(reference):
    r = invoke(reference, "--json", "--markdown")
    assert r.exit_code == 2
    assert invoke(reference, "--format", "json", "--markdown").exit_code == 2


def test_format_option_equals_flags(reference):
    assert invoke(reference, "--format", "json").stdout == invoke(reference, "--json").stdout
    assert invoke(reference, "-f", "markdown").stdout == invoke(reference, "--markdown").stdout


def test_version_and_short_help():
    from advisor import __version__

    r = invoke("--version")
    assert r.exit_code == 0 and r.stdout.strip() == f"dflash-advise {__version__}"
    assert invoke("-h").exit_code == 0 and "what-if" in invoke("-h").stdout
    out = subprocess.run([sys.executable, "-m", "advisor", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and __version__ in out.stdout


def test_roles_not_summing_to_gpus_exit_2(reference):
    r = invoke(reference, "--roles", "target=6,drafter=3")
    assert r.exit_code == 2 and "is 9 GPUs, but 8 are split" in r.stderr and r.stderr.count("\n") == 1
    r = invoke(reference, "--roles", "target=6")
    assert r.exit_code == 2 and "--roles drafter: is missing" in r.stderr
    r = invoke(reference, "--roles", "target=6,target=2")
    assert r.exit_code == 2 and "twice" in r.stderr


def test_next_run_flag(reference):
    j = json.loads(invoke(reference, "--json", "--next-run").stdout)
    assert j["recommendation"]["verdict"] == "next-run" and j["recommendation"]["settings"]["next_run"] is True


def test_unusable_input_one_line_no_traceback(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"ev":"run","v":1,"t":0,"roles":{"target":1,"drafter":1}}\n{"ev":"step","t":1,"role":"target",'
        '"worker":0,"tokens":5,"busy":"slow"}\n'
    )
    r = invoke(bad)
    assert r.exit_code == 2
    err = r.stderr.strip()
    assert err.count("\n") == 0 and f"{bad}:2: field 'busy'" in err and "Traceback" not in r.output


def test_missing_file_exit_2(tmp_path):
    r = invoke(tmp_path / "none.jsonl")
    assert r.exit_code == 2 and "no such file" in r.stderr


def test_bad_roles_option_exit_2(reference):
    assert invoke(reference, "--roles", "target=x").exit_code == 2


def test_token_budget_and_hs_cap_what_ifs(reference):
    base = json.loads(invoke(reference, "--json").stdout)
    half = json.loads(invoke(reference, "--json", "--token-budget", "16384").stdout)
    # half the tokens per batch: more batches/s, tok/s of the drafter-bound split about the same or lower
    assert half["splits"][0]["bps"] > 1.5 * base["splits"][0]["bps"]
    shallow = json.loads(invoke(reference, "--json", "--hs-cap", "0").stdout)
    assert shallow["splits"][0]["bps"] <= base["splits"][0]["bps"]


def test_token_budget_on_a_log_without_tokens_or_budget_exits_2(tmp_path, reference_rates):
    from conftest import one_line_error, rates_without_tokens

    path = rates_without_tokens(reference_rates, tmp_path / "r.jsonl", budget=False)
    assert invoke(path).exit_code == 0
    one_line_error(invoke(path, "--token-budget", "16384"), "--token-budget", "no tokens", "token_budget")


def test_check_passes(reference):
    r = invoke("check", reference, "--min-efficiency", "0.9")
    assert r.exit_code == 0 and r.output.startswith("PASS")


def test_check_fails(reference):
    r = invoke("check", reference, "--roles", "target=6,drafter=2", "--min-efficiency", "0.9")
    assert r.exit_code == 1 and r.output.startswith("FAIL")


@pytest.mark.parametrize(
    "args, code",
    [
        (["--json"], 0),
        (["check", "--roles", "target=6,drafter=2", "--min-efficiency", "0.9"], 1),
        (["--roles", "target=9,drafter=9"], 2),
    ],
)
def test_the_script_ends_with_mains_code_and_output(reference, args, code):
    """`script` (the console script) gives the exit code and every byte of the output that `main`
    gives, also where stdout is a closed pipe."""
    argv = ([args[0]] if args[0] == "check" else []) + [str(reference)] + [a for a in args if a != "check"]

    def command(entry: str) -> list[str]:
        return [
            sys.executable,
            "-c",
            f"import sys; from advisor.cli.app import {entry}; sys.argv = ['dflash-advise', *sys.argv[1:]]; {entry}()",
            *argv,
        ]

    runs = {
        entry: subprocess.run(command(entry), capture_output=True, text=True, cwd=ROOT) for entry in ("main", "script")
    }
    assert runs["script"].returncode == runs["main"].returncode == code
    assert runs["script"].stdout == runs["main"].stdout and runs["script"].stderr == runs["main"].stderr
    if code == 0:
        assert json.loads(runs["script"].stdout)["splits"]
    ends = {}
    for entry in ("main", "script"):  # stdout a pipe that nobody reads: closed at once
        closed = subprocess.Popen(command(entry), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
        closed.stdout.close()
        ends[entry] = (closed.stderr.read(), closed.wait())
    assert ends["script"] == ends["main"] and b"Traceback" not in ends["script"][0]


def test_check_gpu_util_metric(reference):
    r = invoke("check", reference, "--metric", "gpu_util", "--min-gpu-util", "0.99")
    assert r.exit_code == 1 and "gpu_util" in r.output


def test_check_never_passes_unreadable_input(tmp_path):
    p = tmp_path / "junk.jsonl"
    p.write_bytes(b"\x00\x01\x02 not a log\n")
    r = invoke("check", p, "--min-efficiency", "0.0")
    assert r.exit_code == 2


def test_check_split_of_wrong_size_exit_2(reference):
    r = invoke("check", reference, "--roles", "target=6,drafter=1", "--gpus", "8")
    assert r.exit_code == 2 and "GPUs" in r.stderr


def test_check_markdown_has_gate(reference):
    r = invoke("check", reference, "--markdown")
    assert r.exit_code == 0 and r.output.startswith("**PASS**: gate on 7-1: efficiency")


def test_what_if_reference_numbers():
    r = invoke(
        "what-if",
        "--targets",
        "7",
        "--drafters",
        "1",
        "--target-bps",
        "0.92",
        "--drafter-bps",
        "0.86",
        "--hs-cap",
        "20",
        "--tokens-per-batch",
        "30000",
        "--json",
    )
    assert r.exit_code == 0
    j = json.loads(r.stdout)
    assert j["recommendation"]["roles"] == {"target": 7, "drafter": 1}
    six_two = next(s for s in j["splits"] if s["roles"] == {"target": 6, "drafter": 2})
    assert six_two["bps"] == pytest.approx(6 / 7 * 0.92, abs=0.005)
    assert six_two["tok_s"] == pytest.approx(six_two["bps"] * 30000, rel=1e-3)


def test_what_if_invalid_numbers_exit_2():
    r = invoke("what-if", "--targets", "7", "--drafters", "1", "--target-bps", "0", "--drafter-bps", "0.86")
    assert r.exit_code == 2 and "--target-bps" in r.stderr and "> 0" in r.stderr


@pytest.mark.parametrize(
    "flag, value", [("--target-bps", "1e-320"), ("--drafter-bps", "5e-324"), ("--target-bps", "1e12")]
)
def test_what_if_capacity_past_the_limits_exit_2_naming_it(flag, value):
    """5e-324 batches/s divided by zero in the chain (found by fuzzing: fuzz/corpus/what_if/tiny)."""
    args = {"--target-bps": "0.92", "--drafter-bps": "0.86", flag: value}
    r = invoke("what-if", "--targets", "7", "--drafters", "1", *[x for kv in args.items() for x in kv])
    assert r.exit_code == 2, r.output
    assert r.stderr.count("\n") == 1 and f"{flag}: must be from 1e-09 to 1e+09 batches per second" in r.stderr


def test_usage_error_exit_2():
    assert invoke("what-if", "--targets", "7").exit_code == 2


def test_help_does_not_import_heavy_modules():
    code = (
        "import sys; from advisor.cli.app import main; sys.argv=['dflash-advise','--help']\n"
        "try:\n main()\nexcept SystemExit: pass\n"
        "heavy=[m for m in ('pandas','scipy','matplotlib','torch','numpy','polars') if m in sys.modules]\n"
        "print('HEAVY', heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "HEAVY []" in out and "check" in out and "what-if" in out


@pytest.mark.parametrize("jobs", [1, 3])
def test_summarize_jobs_sets_the_reading_threads(reference, tmp_path, jobs):
    """``summarize -j N`` reads with N threads: polars' pool, sized once at its import, holds N."""
    out = tmp_path / "s.json"
    code = (
        "import sys; from advisor.cli.app import main\n"
        f"try:\n main(['summarize', {str(reference)!r}, '-o', {str(out)!r}, '-j', '{jobs}'])\n"
        "except SystemExit as e: print('EXIT', e.code)\n"
        "import polars; print('THREADS', polars.thread_pool_size())"
    )
    env = {k: v for k, v in os.environ.items() if k != "POLARS_MAX_THREADS"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    assert f"EXIT 0\nTHREADS {jobs}\n" in r.stdout, r.stderr
    assert json.loads(out.read_text())["dflash_summary"]


def test_summarize_jobs_below_one_exit_2(reference, tmp_path):
    r = invoke("summarize", reference, "-o", tmp_path / "s.json", "-j", "0")
    assert r.exit_code == 2 and "-j" in r.stderr


@pytest.mark.parametrize(("flag", "value"), [("--interval", "7"), ("--max-wait", "30"), ("--settle-tol", "0.1")])
def test_follow_options_without_follow_exit_2(reference, flag, value):
    """An option only --follow reads is an error without it, not silently dropped."""
    r = invoke(str(reference), flag, value, "--json")
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.strip() == f"dflash-advise: {flag} applies only with --follow"


def test_sync_s_without_sync_every_exit_2():
    r = invoke(
        "what-if", "--targets", "7", "--drafters", "1", "--target-bps", "0.92", "--drafter-bps", "0.86", "--sync-s", "1"
    )
    assert r.exit_code == 2 and "--sync-s" in r.stderr and "--sync-every" in r.stderr


def test_plot_unsupported_format_exit_2(reference, tmp_path):
    r = invoke("plot", reference, "-o", tmp_path / "a.xyz")
    assert r.exit_code == 2 and "a.xyz" in r.stderr


def test_follow_gives_up_on_missing_file(tmp_path):
    r = invoke(tmp_path / "never.jsonl", "--follow", "--interval", "0.1", "--max-wait", "0.3")
    assert r.exit_code == 2


def test_token_budget_outside_logged_range_is_a_caveat(reference):
    j = json.loads(invoke(reference, "--json", "--token-budget", "8192").stdout)
    assert any("extrapolated" in w for w in j["warnings"])
    j = json.loads(invoke(reference, "--json", "--token-budget", "32000").stdout)
    assert not any("extrapolated" in w for w in j["warnings"])


def test_a_live_log_keeps_its_warning_and_its_advice(reference, tmp_path):
    """A log cut mid-line (still being written): the warning of the read reaches the report, once,
    and the advice is the library's."""
    import warnings

    from advisor.advice import advise
    from advisor.present.text import render

    p = tmp_path / "live.jsonl"
    p.write_bytes(reference.read_bytes() + b'{"ev": "step", "t": 99')
    r = invoke(p, "--json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert sum("last line is incomplete" in w for w in got["warnings"]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert got == json.loads(render(advise([p]), "json"))


def test_errors_surface_in_argument_order(reference, tmp_path):
    """A bad line in a log: exit 2, one line naming file, line and field; an error of an argument
    before it (a folder with no log) comes first."""
    bad = tmp_path / "bad.jsonl"
    lines = reference.read_text().splitlines(keepends=True)
    lines[5] = lines[5].replace('"busy":', '"busy": -1, "x":', 1)
    bad.write_text("".join(lines))
    r = invoke(bad, reference, "--json")
    assert r.exit_code == 2 and r.stdout == "" and r.stderr.count("\n") == 1
    assert f"{bad}:6: field 'busy'" in r.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    r = invoke(empty, bad, "--json")
    assert r.exit_code == 2 and str(empty) in r.stderr and "no .jsonl" in r.stderr


def test_option_defaults_and_limits_are_the_options():
    """The CLI re-types no default: each command's option of an `Options` field has that field's
    flag, default, least value and help (advisor.settings), and every command takes its fields."""
    import inspect

    import typer.main

    from advisor import settings
    from advisor.fit.pipeline import fit_from_numbers

    commands = typer.main.get_command(app).commands

    def param(cmd, name):
        return next(p for p in commands[cmd].params if p.name == name)

    seen = 0
    fields = settings.option_fields()
    for cmd, command in commands.items():
        for p in command.params:
            if p.name not in fields:
                continue
            f = fields[p.name]
            flag = f.metadata["flag"]
            assert p.opts == [flag.name], (cmd, p.name)
            own = {("what-if", "hs_cap"): settings.DEFAULT_HS_CAP, ("plot", "min_efficiency"): 0.9}
            assert p.default == own.get((cmd, p.name), f.default), (cmd, p.name)
            if (
                flag.lo is not None
                and p.name not in ("roles", "gpus_per_worker", "engine_scaling")
                and not flag.lo_open
            ):
                assert p.min == flag.lo, (cmd, p.name)
            seen += 1
    assert seen >= 30
    assert param("advise", "restart_cost_h").default == settings.DEFAULT_RESTART_COST_H
    assert param("advise", "interval_s").min == settings.MIN_FOLLOW_INTERVAL_S
    assert param("what-if", "hs_cap").default == settings.DEFAULT_HS_CAP
    assert param("plot", "min_efficiency").default == settings.DEFAULT_MIN_EFFICIENCY
    assert f"else {settings.DEFAULT_MIN_EFFICIENCY:g})" in param("check", "min_efficiency").help
    for cmd in ("advise", "check", "plot", "what-if", "import-tb"):
        assert param(cmd, "gpus").min == settings.MIN_GPUS, cmd
    # the library's own defaults for the same options
    assert settings.Options().tokens_per_batch == settings.DEFAULT_TOKENS_PER_BATCH
    assert settings.Options().interval_s == settings.DEFAULT_FOLLOW_INTERVAL_S
    fit = fit_from_numbers({"target": 7, "drafter": 1}, {"target": 0.92, "drafter": 0.86})
    assert (fit.hs_cap, fit.tokens_mean) == (settings.DEFAULT_HS_CAP, settings.DEFAULT_TOKENS_PER_BATCH)
    assert inspect.signature(fit_from_numbers).parameters["pre_cap"].default == settings.DEFAULT_PRE_CAP


@pytest.mark.parametrize(
    "args, message",
    [
        (["LOG", "--hs-cap", "10001"], "--hs-cap: 10001 is more than the limit 10000"),
        (["LOG", "--gpus", "4097"], "--gpus: 4097 is more than the limit 4096"),
        (
            [
                "what-if",
                "--targets",
                "7",
                "--drafters",
                "1",
                "--target-bps",
                "1",
                "--drafter-bps",
                "1",
                "--hs-cap",
                "10001",
            ],
            "--hs-cap: 10001 is more than the limit 10000",
        ),
        (
            ["what-if", "--targets", "4097", "--drafters", "1", "--target-bps", "1", "--drafter-bps", "1"],
            "--targets: 4097 is more than the limit 4096",
        ),
    ],
)
def test_limits_are_the_settings_checked_before_reading(tmp_path, args, message):
    """Past settings' limits: exit 2 naming the option, before the log is read (here it does not exist)."""
    r = invoke(*[tmp_path / "never.jsonl" if a == "LOG" else a for a in args])
    assert r.exit_code == 2 and r.stderr == f"dflash-advise: {message}\n"


def test_help_is_whole_sentences():
    """`-h` lists each command with a whole sentence (click cuts a docstring at its first '.', which
    left "Advice from bare numbers, e.g."), and no line ends cut with '...'."""
    r = CliRunner().invoke(app, ["-h"], env={"COLUMNS": "200"})
    assert r.exit_code == 0
    entries: list[str] = []
    for line in r.stdout.split("Commands:")[1].strip().splitlines():  # wrapped lines continue an entry
        if line.startswith("  ") and line.split()[0] in COMMANDS or not entries:
            entries.append(line.strip())
        else:
            entries[-1] += " " + line.strip()
    assert [e.split()[0] for e in entries] == list(COMMANDS)
    for entry in entries:
        text = entry.split(None, 1)[1]
        assert text.endswith(".") and not text.endswith("e.g.") and "..." not in text, entry
    r = CliRunner().invoke(app, ["what-if", "-h"], env={"COLUMNS": "200"})
    assert "(for example --targets 7 --drafters 1 --target-bps 0.92 --drafter-bps 0.86)." in " ".join(r.stdout.split())


def test_logs_at_two_splits_say_which_g_and_every_observed_split():
    """Two logs that ran different G: the headline says which G (and where it came from) and every
    observed split with its measured rate; a split the table lacks is said; no empty heading."""
    logs = [str(FIX / "h200-1x1.jsonl"), str(FIX / "h200-1x2.jsonl")]
    out = CliRunner().invoke(app, route(logs)).stdout
    first = out.splitlines()[0]
    assert "2 GPUs (the first log's; the logs ran 2 and 3: --gpus G projects another), observed 1-1, 1-2" in first
    assert f"observed at 1-2 ({logs[1]}): 3.622 b/s" in out
    assert "1-2 is not a split of 2 GPUs" in out
    assert "The verdict holds unless:\n\n" not in out and not out.rstrip().endswith(":")
    for title in ("The verdict holds unless:", "Queue:", "Caveats:"):  # a heading is followed by an item
        assert all(out.split(title)[i].startswith("\n- ") for i in range(1, out.count(title) + 1)), title
    out3 = CliRunner().invoke(app, route(logs + ["--gpus", "3"])).stdout
    assert out3.splitlines()[0].startswith("run h200-1x1: 3 GPUs (--gpus; the logs ran 2 and 3), observed 1-1, 1-2 ")
    assert "1-1 is not a split of 3 GPUs" in out3 and f"observed at 1-2 ({logs[1]}): 3.622 b/s" in out3
    js = json.loads(CliRunner().invoke(app, route(logs + ["--gpus", "3", "--json"])).stdout)
    row = next(s for s in js["splits"] if s["observed"])
    assert row["roles"] == {"target": 1, "drafter": 2} and f"{row['observed_bps']:.4g}" == "3.622"


def test_what_if_takes_a_range_and_a_bound():
    r = invoke(
        "what-if", "--targets", "1", "--drafters", "7", "--target-bps", "52..57", "--drafter-bps", ">=50.1", "--json"
    )
    assert r.exit_code == 0, r.output
    j = json.loads(r.stdout)
    assert j["capacity_basis"] == {
        "target": {"kind": "given", "low_bps": 52.0, "high_bps": 57.0},
        "drafter": {"kind": "bound", "low_bps": 50.1, "high_bps": None},
    }
    # issue 34: no job to weigh a probe against, so an action with its odds. The bound leaves 2-6
    # ahead wherever the trainers have a sixth more room, as roles that kept up mostly had
    # (BENCHMARKS.md 19.13): 2-6 carries the larger expected rate, 1-7 the larger odds, and the
    # pick is stated below even odds
    rec = j["recommendation"]
    assert rec["verdict"] == "switch" and rec["roles"] == {"target": 2, "drafter": 6} and rec["close_call"] is False
    assert 0.2 < rec["p_best"] < 0.5 and rec["probe"]["worth_it"] is False
    one_seven = next(s for s in j["splits"] if s["roles"] == {"target": 1, "drafter": 7})
    assert rec["p_best"] < one_seven["p_best"] < 0.8


@pytest.mark.parametrize("bad", ["fast", "1..0.5", ">0.9"])
def test_what_if_capacity_parse_errors_name_the_option_and_the_forms(bad):
    r = invoke("what-if", "--targets", "7", "--drafters", "1", "--target-bps", "0.92", "--drafter-bps", bad)
    assert r.exit_code == 2 and r.stderr.startswith("dflash-advise: --drafter-bps")
    assert "0.88..0.95" in r.stderr or "upper end" in r.stderr


@pytest.mark.parametrize("end,drained", [("interrupted", False), (None, False), ("done", True)])
def test_a_slower_tail_is_a_drain_only_when_the_input_ran_out(write_log, end, drained):
    """End to end: an interrupted or live log keeps its slower last 40% (said in the caveats);
    a finished one drops it as the final drain."""
    import random

    from conftest import HEADER, step

    rng = random.Random(3)
    lines, t = [HEADER], 0.0
    for i in range(1000):
        t += (0.1 if i < 600 else 0.115) * rng.uniform(0.97, 1.03)
        lines.append(step(round(t, 6), "drafter", 0, busy=0.09))
        if i % 2:
            lines.append(step(round(t, 6), "target", i // 2 % 2, busy=0.15))
    if end:
        lines.append({"ev": "end", "t": t + 0.01, "reason": end})
    r = invoke(write_log(lines))
    assert r.exit_code == 0, r.output
    assert ("as the final drain" in r.output) == drained
    assert ("kept in the window, not cut as a drain" in r.output) == (not drained)


def test_what_if_names_the_specforge_qwen_pick_with_its_odds():
    """Issue 34: SpecForge's Qwen3.8-27B DFlash2 recipe on 8xH200 (4 + 4: 2.25 prompts/s per capture
    server, 3.7 samples/s per trainer rank; measured 5+3 10.65, 4+4 9.05) said CANNOT TELL; it names
    5-3, the measured best, with its odds, and the headline's numbers are the JSON's."""
    args = (
        "what-if",
        "--targets",
        "4",
        "--drafters",
        "4",
        "--target-bps",
        "9.0",
        "--drafter-bps",
        "14.8",
        "--next-run",
    )
    r = invoke(*args)
    assert r.exit_code == 0, r.output
    assert "CANNOT TELL" not in r.stdout
    j = json.loads(invoke(*args, "--json").stdout)
    rec = j["recommendation"]
    assert rec["verdict"] == "next-run" and rec["action"] == "next-run" and rec["roles"] == {"target": 5, "drafter": 3}
    assert rec["p_best"] >= 0.8 and rec["expected_gain_pct"] > 0 and rec["close_call"] is False
    assert rec["probe"] is None or rec["probe"]["worth_it"] is False
    title = (
        f"NEXT RUN: 5-3, ~{100 * rec['p_best']:.0f}% likely the best, "
        f"expected +{rec['expected_gain_pct']:.1f}% over 4-4"
    )
    assert title in r.stdout.splitlines()
    assert max(j["splits"], key=lambda s: s["p_best"])["roles"] == rec["roles"]


# ---------------------------------------------------------------- issue 50 item 5: node flags


TWO_NODES = ("--gpus", "16", "--gpus-per-node", "8", "--link-gbytes-s", "0.8")
SEVEN_ONE = ("what-if", "--targets", "7", "--drafters", "1", "--target-bps", "0.92", "--drafter-bps", "0.86")


def test_what_if_projects_a_two_node_case_from_bare_numbers():
    """`what-if --gpus-per-node 8 --link-gbytes-s 0.8` was "No such option": now the splits are
    placed on two nodes of 8. 15-1 leaves a node of targets alone, so their hidden states cross the
    0.8 GB/s link (61,440 bytes per token, 31,200 tokens per batch: 2.4 s a batch) and the link
    holds it down, where one node-local pipeline of 7-1 per node (14-2) sends none across."""
    r = invoke(*SEVEN_ONE, *TWO_NODES, "--hs-bytes-per-token", "61440", "--tokens-per-batch", "31200", "--json")
    assert r.exit_code == 0, r.output
    j = json.loads(r.stdout)
    s = j["recommendation"]["settings"]
    assert s["gpus_per_node"] == 8 and s["link_bytes_s"] == pytest.approx(0.8e9)
    rows = {f"{x['roles']['target']}-{x['roles']['drafter']}": x for x in j["splits"]}
    assert j["recommendation"]["roles"] == {"target": 14, "drafter": 2} and rows["14-2"]["layout"] == "node-local"
    lone = rows["15-1"]["link"]
    assert lone["util"] > 0.3 and lone["crossing_share"] > 0.5
    assert rows["15-1"]["bps"] <= 1 / (61440 * 31200 / 0.8e9 * lone["crossing_share"]) * 1.001
    # without the bytes a batch sends the link carries nothing: said, and how to give them named
    free = json.loads(invoke(*SEVEN_ONE, *TWO_NODES, "--json").stdout)
    assert any("no --hs-bytes-per-token was given" in w for w in free["warnings"])
    free_lone = next(x for x in free["splits"] if x["roles"]["drafter"] == 1)
    assert rows["15-1"]["bps"] < 0.6 * free_lone["bps"]


def test_what_if_node_flags_are_checked():
    r = invoke(*SEVEN_ONE, "--gpus", "16", "--gpus-per-node", "6")
    assert r.exit_code == 2 and "--gpus-per-node" in r.stderr and "16 GPUs are not whole nodes of 6" in r.stderr
    r = invoke(*SEVEN_ONE, *TWO_NODES, "--hs-bytes-per-token", "0")
    assert r.exit_code == 2 and "--hs-bytes-per-token" in r.stderr


def test_plot_takes_the_node_flags(reference, tmp_path, monkeypatch):
    """`plot --gpus-per-node 8` was "No such option": the figure is drawn from the advice across two nodes."""
    import advisor.present.plots as plots

    seen = []
    draw = plots.plot_advice
    monkeypatch.setattr(plots, "plot_advice", lambda adv, **kw: seen.append(adv) or draw(adv, **kw))
    out = tmp_path / "two-nodes.png"
    r = invoke("plot", reference, *TWO_NODES, "-o", out)
    assert r.exit_code == 0, r.output
    assert out.stat().st_size > 0 and f"wrote {out}" in r.output
    (adv,) = seen
    assert adv.settings.nodes == 2 and adv.settings.link_bytes_s == pytest.approx(0.8e9)
    assert adv.rows["15-1"].link.link_util > 0.3  # the lone drafter's node gets the other node's batches


def test_ctrl_c_during_the_advice_exits_130_without_a_traceback(reference, monkeypatch, capfd):
    """Ctrl-C while the advice runs exits 130 (the shell's code for it), never the internal
    error's exit 2 nor a traceback."""
    import advisor.advice
    from advisor.cli.app import main

    def stop(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(advisor.advice, "advise", stop)
    with pytest.raises(SystemExit) as e:
        main([str(reference)])
    assert e.value.code == 130
    assert "Traceback" not in capfd.readouterr().err


def test_an_abort_from_typer_is_an_interrupt_not_a_bug(reference, monkeypatch, capfd):
    """typer turns an end of input (EOFError) into its Abort: one line, exit 130 (it was
    reported as an internal error, exit 2)."""
    import typer.core

    from advisor.cli import app as cli_app

    def abort(**_k):
        raise typer.core.Abort()

    monkeypatch.setattr(cli_app, "app", abort)
    with pytest.raises(SystemExit) as e:
        cli_app.main([str(reference)])
    assert e.value.code == 130
    assert capfd.readouterr().err.strip() == "dflash-advise: interrupted"
