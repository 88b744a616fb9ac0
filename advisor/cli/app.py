"""`dflash-advise`: parse, call the library, render, set the exit code. Nothing else lives here.

Exit codes (the CLI contract, README.md): 0 ok / gate passes; 1 the gate fails; 2 the input is unusable
(one line on stderr naming file, line and field; never a traceback). Only typer, the
standard library and the advisor's option defaults (`advisor.settings`, `advisor.errors`: no
numpy) are imported at module level so that ``--help`` stays fast.
"""
from __future__ import annotations

import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from advisor import __version__
from advisor.errors import LogError, SettingsError
from advisor.settings import (DEFAULT_FOLLOW_INTERVAL_S, DEFAULT_HS_CAP, DEFAULT_MIN_EFFICIENCY,
                              DEFAULT_RESTART_COST_H, DEFAULT_TOKENS_PER_BATCH, MAX_GPUS_PER_WORKER,
                              MIN_FOLLOW_INTERVAL_S, MIN_GPUS, as_capacity, check_limits, parse_role_map)

# The advisor's linear algebra is tiny or one long reduction: an OpenBLAS thread pool gains nothing
# there, and its idle workers busy-wait after each call on the cores the parse and the fit use
# (~0.25 s of CPU on a 1M-line log). Set before numpy loads; a user's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

COMMANDS = ("advise", "check", "plot", "what-if", "import-tb", "summarize")
TOP_LEVEL = ("--help", "-h", "--version", "-V")

app = typer.Typer(
    add_completion=False, no_args_is_help=True, rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="How to split GPUs between the targets and drafters of an async drafter-training pipeline. "
         "`dflash-advise LOG...` is short for `dflash-advise advise LOG...`.")


class Format(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dflash-advise {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(version: Annotated[bool, typer.Option("--version", "-V", callback=_version, is_eager=True,
                                                help="Print the version and exit.")] = False) -> None:
    """How to split GPUs between the targets and drafters of an async drafter-training pipeline."""

Logs = Annotated[list[Path], typer.Argument(help="Rate log(s), .jsonl or .jsonl.gz; several logs of one job "
                                                 "(e.g. at different splits) are fitted together.",
                                            show_default=False)]
Gpus = Annotated[Optional[int], typer.Option("--gpus", min=MIN_GPUS, help="GPUs to split (default: the log header's).")]
AsJson = Annotated[bool, typer.Option("--json", help="Short for --format json: machine-readable (schema 1).")]
AsMarkdown = Annotated[bool, typer.Option("--markdown", help="Short for --format markdown, e.g. for a pull-request "
                                                             "comment.")]
FormatOpt = Annotated[Optional[Format], typer.Option("--format", "-f", help="Output format.", show_default="text")]
RestartCost = Annotated[float, typer.Option("--restart-cost", min=0.0,
                                            help="Hours a restart costs (reload, warm-up); weighed against the "
                                                 "ETA gain of a switch.")]
HsCap = Annotated[Optional[int], typer.Option("--hs-cap", min=0, help="Project with this q_hs depth (batches) "
                                                                     "instead of the log's.")]
TokenBudget = Annotated[Optional[int], typer.Option("--token-budget", min=1,
                                                    help="Project with this batch token budget instead.")]
RolesOpt = Annotated[Optional[str], typer.Option("--roles", help="Split to judge, e.g. target=6,drafter=2; must "
                                                                  "sum to the GPUs split (default: the observed one).")]
NextRun = Annotated[bool, typer.Option("--next-run", help="Advise the split for the job's next run (no restart cost); "
                                                          "implied when the log has ended.")]


GpusPerWorker = Annotated[Optional[str], typer.Option(
    "--gpus-per-worker", help="GPUs one engine of a role holds, e.g. target=2 (TP-2 targets); roles not named: the "
                              "log's (1 if it says none). Splits are enumerated in engines.")]
EngineScaling = Annotated[Optional[str], typer.Option(
    "--engine-scaling", help="With --gpus-per-worker unlike the log's: the per-GPU rate ratio of the new engine size "
                             "to the logged one, e.g. target=0.9 (1: linear). An assumption you give.")]
GpusPerNode = Annotated[Optional[int], typer.Option("--gpus-per-node", min=1, help="GPUs of one node (default: "
                                                    "the log's; none: one node holds all).")]
LinkGBs = Annotated[Optional[float], typer.Option("--link-gbytes-s", help="Inter-node link bandwidth, GB/s (1e9 "
                                                  "bytes/s), one per node pair direction (default: measured from the "
                                                  "log's xfer, else its header's link_bytes_s).")]


def _engine_options(gpus_per_worker: str | None, engine_scaling: str | None, gpus_per_node: int | None,
                    link_gbytes_s: float | None) -> dict:
    """The engine and node options given, as `advise` takes them (those not given: the log's)."""
    given = dict(gpus_per_worker=gpus_per_worker, engine_scaling=engine_scaling, gpus_per_node=gpus_per_node,
                 link_gbytes_s=link_gbytes_s)
    return {k: v for k, v in given.items() if v is not None}


def _die(msg: str, code: int = 2) -> None:
    typer.echo(f"dflash-advise: {msg}", err=True)
    raise typer.Exit(code)


MAX_ROLE_DIGITS = 4   # counts beyond 9999 GPUs are not a split anyone means


def _parse_roles(text: str | None) -> dict[str, int] | None:
    if text is None:
        return None
    out: dict[str, int] = {}
    for part in text.split(","):
        name, eq, n = (x.strip() for x in part.partition("="))
        if not eq or not name:
            _die(f"--roles: expected role=count pairs like target=6,drafter=2, got {part.strip()!r} in {text!r}")
        if not n.isdigit() or len(n) > MAX_ROLE_DIGITS or int(n) < 1:
            _die(f"--roles: the count of {name!r} must be a whole number from 1 to 9999, got {n!r}")
        if name in out:
            _die(f"--roles: {name!r} is given twice in {text!r}")
        out[name] = int(n)
    return out


def _format(as_json: bool, as_markdown: bool, fmt: Format | None = None) -> str:
    chosen = {f for f, on in (("json", as_json), ("markdown", as_markdown), (fmt.value if fmt else None, fmt))
              if on and f}
    if len(chosen) > 1:
        _die(f"output formats {', '.join(sorted(chosen))} exclude each other; give one")
    return chosen.pop() if chosen else "text"


BIG_INPUT_BYTES = 20 << 20   # above this, say on a terminal what is being read


def _inputs(paths: list[Path]) -> str:
    return ", ".join(str(p) for p in paths) or "no input"


def _internal(e: BaseException, inputs: str) -> None:
    """Exit 2 with one line: an unexpected exception is a bug, never a verdict (1) nor a traceback."""
    what = " ".join(f"{type(e).__name__}: {e}".split())
    _die(f"internal error while reading {inputs}: {what[:300]} (a bug in dflash-advise; please report it)")


def _check_limits(**options) -> None:
    """Exit 2 on options past `advisor.settings`' limits, before any log is read."""
    try:
        check_limits(**options)
    except SettingsError as e:
        _die(str(e))


def _advise(logs: list[Path], **kw):
    from advisor.advice import advise
    return advise(logs, **kw)


def _advise_or_die(logs: list[Path], **kw):
    _check_limits(gpus=kw.get("gpus"), roles=kw.get("roles"), hs_cap=kw.get("hs_cap"))
    size = 0
    for p in logs:
        try:
            size += p.stat().st_size if p.is_file() else 0
        except OSError:
            pass   # the loader names what is wrong with it
    status = sys.stderr.isatty() and size > BIG_INPUT_BYTES
    if status:
        typer.echo(f"reading {size / 2**20:.0f} MiB of logs ({len(logs)} file{'s' if len(logs) > 1 else ''})...",
                   err=True, nl=False)
    try:
        return _advise(logs, **kw)
    except LogError as e:
        _die(str(e))
    except ValueError as e:
        _die(str(e))
    except (typer.Exit, KeyboardInterrupt):
        raise
    except Exception as e:
        _internal(e, _inputs(logs))
    finally:
        if status:
            typer.echo("\r\x1b[K", err=True, nl=False)   # erase the status line


@app.command("advise", short_help="Advice for the run(s): the table of splits, the verdict and its reasons.")
def advise_cmd(logs: Logs, gpus: Gpus = None, fmt: FormatOpt = None, as_json: AsJson = False,
               as_markdown: AsMarkdown = False, restart_cost: RestartCost = DEFAULT_RESTART_COST_H, hs_cap: HsCap = None,
               token_budget: TokenBudget = None, roles: RolesOpt = None, next_run: NextRun = False,
               exact: Annotated[bool, typer.Option("--exact", help="Also simulate every split exactly from the "
                                                                   "log's own step times (slower).")] = False,
               follow: Annotated[bool, typer.Option("--follow", help="Re-read a growing log and refresh the "
                                                                     "report until its 'end' event or Ctrl-C.")] = False,
               interval: Annotated[float, typer.Option(
                   "--interval", min=MIN_FOLLOW_INTERVAL_S,
                   help="Seconds between refreshes with --follow.")] = DEFAULT_FOLLOW_INTERVAL_S,
               max_wait: Annotated[Optional[float], typer.Option(
                   "--max-wait", min=0.0, help="With --follow: give up (exit 2) if a log is still missing after "
                                               "this many seconds (default: wait).")] = None,
               gpus_per_worker: GpusPerWorker = None, engine_scaling: EngineScaling = None,
               gpus_per_node: GpusPerNode = None, link_gbytes_s: LinkGBs = None) -> None:
    """Advice for the run(s): the table of splits, the verdict and its reasons."""
    fmt = _format(as_json, as_markdown, fmt)
    kw = dict(gpus=gpus, roles=_parse_roles(roles), hs_cap=hs_cap, token_budget=token_budget,
              restart_cost_h=restart_cost, next_run=next_run, exact=exact)
    kw.update(_engine_options(gpus_per_worker, engine_scaling, gpus_per_node, link_gbytes_s))
    if follow:
        from advisor.cli.follow import follow_logs
        raise typer.Exit(follow_logs(logs, fmt=fmt, interval_s=interval, max_wait_s=max_wait, **kw))
    adv = _advise_or_die(logs, **kw)     # (first: it reads the logs while the modules import)
    from advisor.present.text import render
    typer.echo(render(adv, fmt), nl=False)


@app.command("check", short_help="CI gate on a planned split: exit 0 pass, 1 fail, 2 unusable input.")
def check_cmd(source: Annotated[list[Path], typer.Argument(help="A TOML config naming the planned split and "
                                                                 "profile log(s), or rate log(s).",
                                                            show_default=False)],
              min_efficiency: Annotated[Optional[float], typer.Option(
                  "--min-efficiency", min=0.0, max=1.0,
                  help=f"Fail below this (default: the config's, else {DEFAULT_MIN_EFFICIENCY:g}).")] = None,
              metric: Annotated[Optional[str], typer.Option(
                  "--metric", help="efficiency or gpu_util (default: the config's, else efficiency).")] = None,
              roles: RolesOpt = None, gpus: Gpus = None, as_json: AsJson = False,
              as_markdown: AsMarkdown = False, gpus_per_worker: GpusPerWorker = None,
              engine_scaling: EngineScaling = None, gpus_per_node: GpusPerNode = None,
              link_gbytes_s: LinkGBs = None) -> None:
    """CI gate: exit 0 if the planned split's predicted metric meets the threshold, 1 if not, 2 if unusable."""
    from advisor.cli.check import run_check
    from advisor.present.text import render
    fmt = _format(as_json, as_markdown)
    planned = _parse_roles(roles)
    _check_limits(gpus=gpus, roles=planned)
    try:
        adv = run_check(source, min_value=min_efficiency, metric=metric, roles=planned, gpus=gpus,
                        engines=_engine_options(gpus_per_worker, engine_scaling, gpus_per_node, link_gbytes_s))
    except (LogError, ValueError) as e:
        _die(str(e))
    except (typer.Exit, KeyboardInterrupt):
        raise
    except Exception as e:   # a crash is "unusable" (2), never "the split fails" (1)
        _internal(e, _inputs(source))
    g = adv.gate
    if fmt == "text":
        verdict = "PASS" if g["passed"] else "FAIL"
        split = "-".join(str(v) for v in g["roles"].values())
        typer.echo(f"{verdict}: split {split} ({'-'.join(g['roles'])}) predicted {g['metric']} {g['value']:.3f} "
                   f"{'>=' if g['passed'] else '<'} {g['threshold']:.3f}; {g['bps']:.3g} b/s, "
                   f"bottleneck {g['bottleneck']}")
    else:
        try:
            text = render(adv, fmt)
        except Exception as e:
            _internal(e, _inputs(source))
        typer.echo(text, nl=False)
    raise typer.Exit(0 if g["passed"] else 1)


@app.command("plot", short_help="One figure: the splits, efficiency, rates over time and q_hs.")
def plot_cmd(logs: Logs, out: Annotated[Path, typer.Option(
                 "-o", "--out", help="File to write; its extension picks the format (.png, .pdf, .svg, ...). "
                                     "A directory gets advice.png.")] = Path("advice.png"),
             gpus: Gpus = None, min_efficiency: Annotated[float, typer.Option(
                 "--min-efficiency", min=0.0, max=1.0, help="Gate threshold drawn on the efficiency panel.")] = DEFAULT_MIN_EFFICIENCY,
             ) -> None:
    """One figure: tok/s per split, efficiency and gpu_util, rates over time, q_hs occupancy."""
    from advisor.present.plots import figure_path, plot_advice, save_figure
    try:   # before the logs are read: a bad -o fails at once
        path = figure_path(out)
    except ValueError as e:
        _die(str(e))
    adv = _advise_or_die(logs, gpus=gpus)
    fig = plot_advice(adv, min_efficiency=min_efficiency)
    try:
        path = save_figure(fig, path)
    except OSError as e:
        _die(f"{path}: cannot write the figure: {e.strerror or e}")
    # to a device or pipe (/dev/stdout) the figure is the output: the note goes to stderr
    typer.echo(f"wrote {path}", err=not path.is_file())


@app.command("what-if", short_help="Advice from bare numbers: worker counts and pool capacities.")
def what_if_cmd(targets: Annotated[int, typer.Option("--targets", min=1, help="Target GPUs now.")],
                drafters: Annotated[int, typer.Option("--drafters", min=1, help="Drafter GPUs now.")],
                target_bps: Annotated[str, typer.Option("--target-bps", help="Capacity of all targets together, "
                                                        "batches/s: a value (0.92), a range (0.88..0.95) or a lower "
                                                        "bound ('>=0.9').")],
                drafter_bps: Annotated[str, typer.Option("--drafter-bps", help="Capacity of all drafters together, "
                                                         "batches/s: a value, a range (lo..hi) or a lower bound "
                                                         "('>=x').")],
                hs_cap: Annotated[int, typer.Option("--hs-cap", min=0, help="q_hs depth (batches).")] = DEFAULT_HS_CAP,
                tokens_per_batch: Annotated[float, typer.Option("--tokens-per-batch", min=1.0,
                                                                help="Mean tokens per batch (for tok/s).")] = DEFAULT_TOKENS_PER_BATCH,
                scv: Annotated[Optional[float], typer.Option("--scv", min=0.0, help="Step-time variability "
                                                                                     "(squared CV).")] = None,
                sync_every: Annotated[int, typer.Option("--sync-every", min=0, help="Drafter steps per sync.")] = 0,
                gpus_per_worker: GpusPerWorker = None,
                sync_s: Annotated[float, typer.Option("--sync-s", min=0.0, help="Seconds per sync at this "
                                                                                 "drafter count.")] = 0.0,
                gpus: Gpus = None, next_run: NextRun = False, fmt: FormatOpt = None, as_json: AsJson = False,
                as_markdown: AsMarkdown = False) -> None:
    """Advice from bare numbers: worker counts and pool capacities in batches/s (for example --targets 7
    --drafters 1 --target-bps 0.92 --drafter-bps 0.86)."""
    import math

    from advisor.advice import advise_numbers
    from advisor.present.text import render
    fmt = _format(as_json, as_markdown, fmt)
    _check_limits(counts={"--targets": targets, "--drafters": drafters}, gpus=gpus,
                  roles={"target": targets, "drafter": drafters})
    try:
        caps = {"target": as_capacity("--target-bps", target_bps), "drafter": as_capacity("--drafter-bps", drafter_bps)}
    except SettingsError as e:
        _die(str(e))
    for name, v in (("--scv", scv), ("--sync-s", sync_s), ("--tokens-per-batch", tokens_per_batch)):
        if v is not None and not math.isfinite(v):
            _die(f"{name}: must be a finite number, got {v}")
    _check_limits(hs_cap=hs_cap, sync_every=sync_every)
    try:
        adv = advise_numbers({"target": targets, "drafter": drafters},
                             caps, gpus=gpus, hs_cap=hs_cap, scv=scv,
                             sync_every=sync_every, sync_s=sync_s, tokens_per_batch=tokens_per_batch,
                             next_run=next_run, gpus_per_worker=gpus_per_worker)
    except ValueError as e:
        _die(str(e))
    typer.echo(render(adv, fmt), nl=False)


def _warn_lines(seen: list) -> None:
    for w in seen:
        typer.echo(f"dflash-advise: warning: {' '.join(str(w.message).split())}", err=True)


@app.command("import-tb", short_help="A rate log from TensorBoard scalars.")
def import_tb_cmd(
        events: Annotated[list[Path], typer.Argument(help="TensorBoard event files, directories searched for "
                                                          "*tfevents* files, or .csv histories exported from wandb "
                                                          "or MLflow.", show_default=False)],
        out: Annotated[Path, typer.Option("-o", "--out", help="Rate log to write (.jsonl).")],
        roles: Annotated[str, typer.Option("--roles", help="Workers per role in pipeline order, producer first, "
                                                           "e.g. target=7,drafter=1.", show_default=False)],
        mapping: Annotated[Optional[list[str]], typer.Option(
            "--map", help="KEY=TAG: which scalar tag holds a rates field; KEY is ROLE.bps, ROLE.cap_bps, tok_s, "
                          "eta_s, done or q.QUEUE. Repeat it. With --stack it adds to (or replaces) the stack's "
                          "fields.", show_default=False)] = None,
        stack: Annotated[Optional[str], typer.Option(
            "--stack", help="Read the metrics this stack logs by name: torchspec, specforge or speculators "
                            "(docs/stacks/).")] = None,
        queue: Annotated[Optional[list[str]], typer.Option("--queue", help="NAME:ROLE:CAP, e.g. hs:drafter:20 "
                                                                           "(repeatable).")] = None,
        gpus: Annotated[Optional[int], typer.Option("--gpus", min=MIN_GPUS, help="GPUs of the job (default: the sum "
                                                                          "of --roles).")] = None,
        token_budget: Annotated[Optional[int], typer.Option("--token-budget", min=1,
                                                            help="Tokens per batch at most.")] = None,
        samples: Annotated[Optional[int], typer.Option("--samples", min=0, help="Samples per epoch (ETA).")] = None,
        epochs: Annotated[Optional[float], typer.Option("--epochs", min=0.0, help="Epochs (ETA).")] = None,
        run_name: Annotated[Optional[str], typer.Option("--run-name", help="Run name (default: the first "
                                                                             "argument's name).")] = None,
        ended: Annotated[bool, typer.Option("--ended", help="The job has finished: advise for the next run.")] = False,
        gpus_per_worker: GpusPerWorker = None,
        gpus_per_node: GpusPerNode = None,
) -> None:
    """Rate log from TensorBoard scalars or exported histories: per-role throughput/capacity mapped to rates events."""
    import warnings

    from advisor.stacks import import_stack
    from advisor.tbimport import import_tensorboard, parse_queue, parse_roles
    if stack is None and not mapping:
        _die("import-tb: give --stack NAME (torchspec, specforge, speculators) or --map KEY=TAG")
    with warnings.catch_warnings(record=True) as seen:   # each said in one line, not as Python prints them
        warnings.simplefilter("always")
        try:
            role_map = parse_roles(roles)
            queues = [parse_queue(q, list(role_map)) for q in queue or []]
            k = parse_role_map("--gpus-per-worker", gpus_per_worker, tuple(role_map)[::len(role_map) - 1],
                               whole=True, lo=1, hi=MAX_GPUS_PER_WORKER) if gpus_per_worker else None
            header = dict(roles=role_map, run=run_name, gpus=gpus, queues=queues, token_budget=token_budget,
                          samples=samples, epochs=epochs, ended=ended)
            if stack is None and not any(str(p).lower().endswith(".csv") for p in events):
                path, n = import_tensorboard(events, out, mapping=mapping or [], gpus_per_worker=k,
                                             gpus_per_node=gpus_per_node, **header)
            else:
                path, n = import_stack(events, out, stack=stack, mapping=mapping or [], **header)
        except (LogError, ValueError) as e:
            _warn_lines(seen)
            _die(str(e))
    _warn_lines(seen)
    typer.echo(f"wrote {path}: {n} rates snapshots; now run: dflash-advise {path}")


@app.command("summarize", short_help="Reduce logs of one run to one mergeable summary.")
def summarize_cmd(logs: Annotated[list[Path], typer.Argument(
                      help="Rate logs (e.g. the per-rank files of one run) and/or summaries to merge.",
                      show_default=False)],
                  out: Annotated[Path, typer.Option("--out", "-o", help="The summary file to write (JSON).")],
                  jobs: Annotated[Optional[int], typer.Option(
                      "--jobs", "-j", min=1, help="Ignored (kept for old scripts): polars reads with every core.")] = None) -> None:
    """Reduce logs of one run to one mergeable summary (bounded memory); advise from it with `dflash-advise S.json`.

    Summaries merge: `summarize S1.json S2.json -o S.json` gives the summary of the logs behind
    S1 and S2, so each node can summarize its own ranks' logs and one machine merges the results.
    """
    from advisor.ingest.load import summarize_paths
    try:
        summ = summarize_paths(logs)
        summ.write(out)
    except LogError as e:
        _die(str(e))
    except OSError as e:
        _die(f"{out}: cannot be written ({e.strerror or e})")
    except (typer.Exit, KeyboardInterrupt):
        raise
    except Exception as e:
        _internal(e, _inputs(logs))
    n = sum(summ.n_steps(r) for r in summ.roles)
    typer.echo(f"{out}: {len(summ.paths)} file(s), {summ.n_lines} lines, {n} steps"
               f"{' (sampled)' if summ.sampled else ''}", err=True)


def route(argv: list[str]) -> list[str]:
    """Make `advise` the default command: `dflash-advise LOG` == `dflash-advise advise LOG`."""
    if argv and argv[0] not in COMMANDS and argv[0] not in TOP_LEVEL:
        return ["advise", *argv]
    return argv


def _one_line_usage(e, args: list[str]) -> str:
    """A click usage error as one line, with where to look (and the '--' hint for a file named '-x')."""
    msg = " ".join(e.format_message().split())
    bad = next((a for a in args if a.startswith("-") and os.path.exists(a)), None)
    if bad and "No such option" in msg:
        return f"{msg} ({bad!r} is a file: write ./{bad} or put -- before it)"
    where = getattr(getattr(e, "ctx", None), "command_path", None) or "dflash-advise"
    return f"{msg} (see '{where} --help')"


def _click_kinds() -> dict[str, tuple[type, ...]]:
    """click's exception classes: typer >= 0.25 ships its own copy of click, older ones use click's."""
    import importlib
    kinds: dict[str, list[type]] = {"help": [], "usage": [], "click": [], "abort": []}
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            m = importlib.import_module(name)
        except ImportError:
            continue
        for kind, cls in (("help", "NoArgsIsHelpError"), ("usage", "UsageError"), ("click", "ClickException"),
                          ("abort", "Abort")):
            if isinstance(getattr(m, cls, None), type):
                kinds[kind].append(getattr(m, cls))
    return {k: tuple(v) for k, v in kinds.items()}


def main(argv: list[str] | None = None) -> None:
    """The `dflash-advise` entry point.

    Runs the app outside click's standalone mode so that every way out is ours: a usage error
    is one line (exit 2), Ctrl-C is 130, and any unexpected exception, anywhere, is exit 2 with
    one line naming the input and calling it a bug: never a traceback, and never exit 1, which a
    CI gate reads as "the split fails".
    """
    args = route(list(sys.argv[1:] if argv is None else argv))
    inputs = [a for a in args[1:] if not a.startswith("-") and os.path.lexists(a)]
    try:
        code = app(args=args, prog_name="dflash-advise", standalone_mode=False)
    except KeyboardInterrupt:
        typer.echo("dflash-advise: interrupted", err=True)
        code = 130
    except MemoryError:
        typer.echo(f"dflash-advise: out of memory while reading {', '.join(inputs) or 'the input'}; give a part "
                   f"of the log (the header line and its steady part)", err=True)
        code = 2
    except Exception as e:
        kinds = _click_kinds()
        if isinstance(e, kinds["help"]):
            e.show()
            code = 2
        elif isinstance(e, kinds["usage"]):
            typer.echo(f"dflash-advise: {_one_line_usage(e, args)}", err=True)
            code = 2
        elif isinstance(e, kinds["click"]):
            typer.echo(f"dflash-advise: {' '.join(e.format_message().split())}", err=True)
            code = 2
        elif isinstance(e, kinds["abort"]):
            typer.echo("dflash-advise: interrupted", err=True)
            code = 130
        else:
            msg = " ".join(f"{type(e).__name__}: {e}".split())[:300]
            typer.echo(f"dflash-advise: internal error while reading {', '.join(inputs) or 'no input'}: {msg} "
                       f"(a bug in dflash-advise; please report it)", err=True)
            code = 2
    sys.exit(code if isinstance(code, int) else 0)


def script() -> None:
    """The ``dflash-advise`` console script and ``python -m advisor``."""
    main()


if __name__ == "__main__":
    script()
