"""`dflash-advise`: parse, call the library, render, set the exit code. Nothing else lives here.

Exit codes (the CLI contract, README.md): 0 ok / gate passes; 1 the gate fails; 2 the input is unusable
(one line on stderr naming file, line and field; never a traceback). Only typer, the
standard library and the advisor's option defaults (`advisor.settings`, `advisor.errors`: no
numpy) are imported at module level so that ``--help`` stays fast. The commands are private:
typer calls them, and their parameters, one per option, are the command line itself.
"""

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, get_origin

import typer

from advisor import __version__
from advisor.errors import SettingsError, internal_error
from advisor.settings import (
    DEFAULT_FOLLOW_INTERVAL_S,
    DEFAULT_HS_CAP,
    DEFAULT_MIN_EFFICIENCY,
    DEFAULT_RESTART_COST_H,
    DEFAULT_SETTLE_TOL,
    DEFAULT_TOKENS_PER_BATCH,
    Options,
    as_capacity,
    check_counts,
    check_role_names,
    option_fields,
    option_kind,
)

if TYPE_CHECKING:
    from advisor.records import Run

# The advisor's linear algebra is tiny or one long reduction: an OpenBLAS thread pool gains nothing
# there, and its idle workers busy-wait after each call on the cores the parse and the fit use
# (~0.25 s of CPU on a 1M-line log). Set before numpy loads; a user's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

FOLLOW_ONLY = ("interval_s", "max_wait_s", "settle_tol")  # the Options fields that only --follow reads
COMMANDS = ("advise", "check", "plot", "what-if", "import-tb", "summarize")
TOP_LEVEL = ("--help", "-h", "--version", "-V")
# click's usage error and its base, from whichever click typer uses (typer >= 0.25 ships its own)
USAGE_ERROR, CLICK_ERROR = typer.BadParameter.__mro__[1:3]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="How to split GPUs between the targets and drafters of an async drafter-training pipeline. "
    "`dflash-advise LOG...` is short for `dflash-advise advise LOG...`.",
)


class Format(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dflash-advise {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", "-V", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """How to split GPUs between the targets and drafters of an async drafter-training pipeline."""


Logs = Annotated[
    list[Path],
    typer.Argument(
        help="Rate log(s), .jsonl or .jsonl.gz; several logs of one job "
        "(e.g. at different splits) are fitted together.",
        show_default=False,
    ),
]
AsJson = Annotated[bool, typer.Option("--json", help="Short for --format json: machine-readable (schema 1).")]
AsMarkdown = Annotated[
    bool, typer.Option("--markdown", help="Short for --format markdown, e.g. for a pull-request comment.")
]
FormatOpt = Annotated[Format | None, typer.Option("--format", "-f", help="Output format.", show_default="text")]


def opt(name: str, **over: Any) -> Any:
    """The type of the command-line option of `Options` field ``name``: an ``Annotated`` type whose
    ``typer.Option`` carries the field's flag, help and the limits click checks; ``over`` replaces
    what the field's `advisor.settings.Flag` says (a command's own ``help``)."""
    f = option_fields()[name]
    flag, kind = f.metadata["flag"], option_kind(name)
    limits: dict[str, Any] = {}
    if get_origin(kind) is Mapping:
        kind = str  # role=value text
    elif flag.lo is not None and not flag.lo_open:
        limits["min"] = flag.lo
    if flag.click_hi:
        limits["max"] = flag.hi
    if f.default is None:
        kind = kind | None
    return Annotated[kind, typer.Option(flag.name, **{"help": flag.help, **limits, **over})]


def options_of(params: Mapping[str, Any]) -> Options:
    """The `Options` of a command's parameters (those named after its fields); on an unusable
    option, exit 2 with one line naming it."""
    try:
        return Options(**{name: v for name, v in params.items() if name in option_fields()})
    except SettingsError as e:
        _die(str(e))


def _die(msg: str, code: int = 2) -> None:
    typer.echo(f"dflash-advise: {msg}", err=True)
    raise typer.Exit(code)


def _format(as_json: bool, as_markdown: bool, fmt: Format | None = None) -> str:
    chosen = {
        f for f, on in (("json", as_json), ("markdown", as_markdown), (fmt.value if fmt else None, fmt)) if on and f
    }
    if len(chosen) > 1:
        _die(f"output formats {', '.join(sorted(chosen))} exclude each other; give one")
    return chosen.pop() if chosen else "text"


@contextlib.contextmanager
def _or_die(inputs: list[Path]) -> Iterator[None]:
    """Unusable input (`LogError`, `ValueError`): exit 2 with its one line; any other exception too,
    named a bug, never a traceback nor exit 1, which a CI gate reads as "the split fails"."""
    try:
        yield
    except ValueError as e:
        _die(str(e))
    except (typer.Exit, KeyboardInterrupt):
        raise
    except Exception as e:
        _die(internal_error(e, inputs))


BIG_INPUT_BYTES = 20 << 20  # above this, say on a terminal what is being read


def _advise_or_die(logs: list[Path], options: Options):
    size = sum(os.path.getsize(p) for p in logs if os.path.isfile(p))  # an odd path: the loader names it
    status = sys.stderr.isatty() and size > BIG_INPUT_BYTES
    if status:
        typer.echo(
            f"reading {size / 2**20:.0f} MiB of logs ({len(logs)} file{'s' if len(logs) > 1 else ''})...",
            err=True,
            nl=False,
        )
    try:
        with _or_die(logs):
            from advisor.advice import advise

            return advise(logs, options)
    finally:
        if status:
            typer.echo("\r\x1b[K", err=True, nl=False)  # erase the status line


@app.command("advise", short_help="Advice for the run(s): the table of splits, the verdict and its reasons.")
def _advise_cmd(
    logs: Logs,
    gpus: opt("gpus") = None,
    fmt: FormatOpt = None,
    as_json: AsJson = False,
    as_markdown: AsMarkdown = False,
    restart_cost_h: opt("restart_cost_h") = DEFAULT_RESTART_COST_H,
    job_hours: opt("job_hours") = None,
    hs_cap: opt("hs_cap") = None,
    token_budget: opt("token_budget") = None,
    roles: opt("roles") = None,
    next_run: opt("next_run") = False,
    exact: opt("exact") = False,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            help="Re-read a growing log and refresh the report until its 'end' event or Ctrl-C; each refresh "
            "shows the verdict's odds and whether they have settled (--settle-tol).",
        ),
    ] = False,
    interval_s: opt("interval_s") = DEFAULT_FOLLOW_INTERVAL_S,
    max_wait_s: opt("max_wait_s") = None,
    settle_tol: opt("settle_tol") = DEFAULT_SETTLE_TOL,
    gpus_per_worker: opt("gpus_per_worker") = None,
    engine_scaling: opt("engine_scaling") = None,
    gpus_per_node: opt("gpus_per_node") = None,
    link_gbytes_s: opt("link_gbytes_s") = None,
) -> None:
    """Advice for the run(s): the table of splits, the verdict and its reasons."""
    fmt = _format(as_json, as_markdown, fmt)
    options = options_of(locals())
    idle = [f for f in FOLLOW_ONLY if f in options.given()] if not follow else []
    if idle:
        _die(f"{option_fields()[idle[0]].metadata['flag'].name} applies only with --follow")
    if follow:
        from advisor.cli.follow import follow_logs

        raise typer.Exit(follow_logs(logs, options, fmt=fmt))
    adv = _advise_or_die(logs, options)  # (first: it reads the logs while the modules import)
    from advisor.present.text import render

    typer.echo(render(adv, fmt), nl=False)


@app.command("check", short_help="CI gate on a planned split: exit 0 pass, 1 fail, 2 unusable input.")
def _check_cmd(
    source: Annotated[
        list[Path],
        typer.Argument(
            help="A TOML config naming the planned split and profile log(s), or rate log(s).", show_default=False
        ),
    ],
    min_efficiency: opt("min_efficiency") = None,
    min_gpu_util: opt("min_gpu_util") = None,
    metric: opt("metric") = None,
    min_confidence: opt("min_confidence") = None,
    roles: opt("roles") = None,
    gpus: opt("gpus") = None,
    as_json: AsJson = False,
    as_markdown: AsMarkdown = False,
    gpus_per_worker: opt("gpus_per_worker") = None,
    engine_scaling: opt("engine_scaling") = None,
    gpus_per_node: opt("gpus_per_node") = None,
    link_gbytes_s: opt("link_gbytes_s") = None,
) -> None:
    """CI gate: exit 0 if the planned split's predicted metric meets the threshold (and, with
    --min-confidence, it is at least that likely within 2% of the best split), 1 if not, 2 if unusable."""
    import warnings

    from advisor.cli.check import run_check
    from advisor.present.text import gate_line, render

    fmt = _format(as_json, as_markdown)
    options = options_of(locals())
    with _or_die(source), warnings.catch_warnings(record=True) as seen:  # every warning, one line each, if it passes
        warnings.simplefilter("always")
        adv = run_check(source, options)
    _warn_lines(seen)
    with _or_die(source):
        text = gate_line(adv.gate) + "\n" if fmt == "text" else render(adv, fmt)
    typer.echo(text, nl=False)
    raise typer.Exit(0 if adv.gate["passed"] else 1)


@app.command("plot", short_help="One figure: the splits, efficiency, rates over time and q_hs.")
def _plot_cmd(
    logs: Logs,
    out: Annotated[
        Path,
        typer.Option(
            "-o",
            "--out",
            help="File to write; its extension picks the format (.png, .pdf, .svg, ...). A directory gets advice.png.",
        ),
    ] = Path("advice.png"),
    gpus: opt("gpus") = None,
    min_efficiency: opt(
        "min_efficiency", help="Gate threshold drawn on the efficiency panel."
    ) = DEFAULT_MIN_EFFICIENCY,
    gpus_per_node: opt("gpus_per_node") = None,
    link_gbytes_s: opt("link_gbytes_s") = None,
) -> None:
    """One figure: tok/s per split, efficiency and gpu_util, rates over time, q_hs occupancy."""
    from advisor.present.plots import figure_path, plot_advice, save_figure

    try:  # before the logs are read: a bad -o fails at once
        path = figure_path(out)
    except ValueError as e:
        _die(str(e))
    options = options_of(locals())
    adv = _advise_or_die(logs, options)
    fig = plot_advice(adv, min_efficiency=options.min_efficiency)
    try:
        path = save_figure(fig, path)
    except OSError as e:
        _die(f"{path}: cannot write the figure: {e.strerror or e}")
    # to a device or pipe (/dev/stdout) the figure is the output: the note goes to stderr
    typer.echo(f"wrote {path}", err=not path.is_file())


@app.command("what-if", short_help="Advice from bare numbers: worker counts and pool capacities.")
def _what_if_cmd(
    targets: Annotated[int, typer.Option("--targets", min=1, help="Target GPUs now.")],
    drafters: Annotated[int, typer.Option("--drafters", min=1, help="Drafter GPUs now.")],
    target_bps: Annotated[
        str,
        typer.Option(
            "--target-bps",
            help="Capacity of all targets together, batches/s: a value (0.92), a range (0.88..0.95) or a lower "
            "bound ('>=0.9').",
        ),
    ],
    drafter_bps: Annotated[
        str,
        typer.Option(
            "--drafter-bps",
            help="Capacity of all drafters together, batches/s: a value, a range (lo..hi) or a lower bound ('>=x').",
        ),
    ],
    hs_cap: opt("hs_cap", help="q_hs depth (batches).") = DEFAULT_HS_CAP,
    tokens_per_batch: opt("tokens_per_batch") = DEFAULT_TOKENS_PER_BATCH,
    scv: opt("scv") = None,
    sync_every: opt("sync_every") = 0,
    gpus_per_worker: opt("gpus_per_worker") = None,
    sync_s: opt("sync_s") = 0.0,
    gpus: opt("gpus") = None,
    gpus_per_node: opt("gpus_per_node", help="GPUs of one node (default: one node holds all --gpus).") = None,
    link_gbytes_s: opt(
        "link_gbytes_s",
        help="Inter-node link bandwidth, GB/s (1e9 bytes/s), one per node pair direction (default: unknown, taken "
        "as free); with --hs-bytes-per-token.",
    ) = None,
    hs_bytes_per_token: opt("hs_bytes_per_token") = None,
    next_run: opt("next_run") = False,
    restart_cost_h: opt("restart_cost_h") = DEFAULT_RESTART_COST_H,
    job_hours: opt("job_hours") = None,
    fmt: FormatOpt = None,
    as_json: AsJson = False,
    as_markdown: AsMarkdown = False,
) -> None:
    """Advice from bare numbers: worker counts and pool capacities in batches/s (for example --targets 7
    --drafters 1 --target-bps 0.92 --drafter-bps 0.86)."""
    from advisor.advice import advise_numbers
    from advisor.present.text import render

    fmt = _format(as_json, as_markdown, fmt)
    with _or_die([]):
        check_counts({"--targets": targets, "--drafters": drafters})
        options = options_of(locals())
        if options.sync_s > 0 and not options.sync_every:
            _die("--sync-s needs --sync-every (drafter steps per sync): without it there is no sync")
        caps = {"target": as_capacity("--target-bps", target_bps), "drafter": as_capacity("--drafter-bps", drafter_bps)}
        adv = advise_numbers({"target": targets, "drafter": drafters}, caps, options)
    typer.echo(render(adv, fmt), nl=False)


def _warn_lines(seen: list) -> None:
    for w in seen:
        typer.echo(f"dflash-advise: warning: {' '.join(str(w.message).split())}", err=True)


def _tb_header(run: str, roles: str, queues: list[str] | None, options: Options, **counts: Any) -> "Run":
    """The imported log's `advisor.records.Run` header from import-tb's --roles, --queue, counts
    and the shared engine options."""
    from advisor.records import Run
    from advisor.tbimport import parse_queue, parse_roles

    role_map = parse_roles(roles)
    k = check_role_names("--gpus-per-worker", options.gpus_per_worker, tuple(role_map)[:: len(role_map) - 1]) or None
    return Run(
        run=run,
        roles=role_map,
        gpus=options.gpus,
        queues=[parse_queue(q, list(role_map)) for q in queues or []],
        gpus_per_worker=k,
        gpus_per_node=options.gpus_per_node,
        **counts,
    )


@app.command("import-tb", short_help="A rate log from TensorBoard scalars.")
def _import_tb_cmd(
    events: Annotated[
        list[Path],
        typer.Argument(
            help="TensorBoard event files, directories searched for *tfevents* files, or .csv histories exported "
            "from wandb or MLflow.",
            show_default=False,
        ),
    ],
    out: Annotated[Path, typer.Option("-o", "--out", help="Rate log to write (.jsonl).")],
    role_counts: Annotated[
        str,
        typer.Option(
            "--roles",
            help="Workers per role in pipeline order, producer first, e.g. target=7,drafter=1.",
            show_default=False,
        ),
    ],
    mapping: Annotated[
        list[str] | None,
        typer.Option(
            "--map",
            help="KEY=TAG: which scalar tag holds a rates field; KEY is ROLE.bps, ROLE.cap_bps, tok_s, "
            "eta_s, done or q.QUEUE. Repeat it. With --stack it adds to (or replaces) the stack's fields.",
            show_default=False,
        ),
    ] = None,
    stack: Annotated[
        str | None,
        typer.Option(
            "--stack",
            help="Read the metrics this stack logs by name: torchspec, specforge or speculators (docs/stacks/).",
        ),
    ] = None,
    queue: Annotated[
        list[str] | None, typer.Option("--queue", help="NAME:ROLE:CAP, e.g. hs:drafter:20 (repeatable).")
    ] = None,
    gpus: opt("gpus", help="GPUs of the job (default: the sum of --roles).") = None,
    budget: Annotated[int | None, typer.Option("--token-budget", min=1, help="Tokens per batch at most.")] = None,
    samples: Annotated[int | None, typer.Option("--samples", min=0, help="Samples per epoch (ETA).")] = None,
    epochs: Annotated[float | None, typer.Option("--epochs", min=0.0, help="Epochs (ETA).")] = None,
    run_name: Annotated[
        str | None, typer.Option("--run-name", help="Run name (default: the first argument's name).")
    ] = None,
    ended: Annotated[bool, typer.Option("--ended", help="The job has finished: advise for the next run.")] = False,
    gpus_per_worker: opt("gpus_per_worker") = None,
    gpus_per_node: opt("gpus_per_node") = None,
) -> None:
    """Rate log from TensorBoard scalars or exported histories: per-role throughput/capacity mapped to rates events."""
    import warnings

    from advisor.stacks import import_stack

    if stack is None and not mapping:
        _die("import-tb: give --stack NAME (torchspec, specforge, speculators) or --map KEY=TAG")
    options = options_of(locals())
    counts = {"token_budget": budget, "samples": samples, "epochs": epochs}
    with warnings.catch_warnings(record=True) as seen:  # each said in one line, not as Python prints them
        warnings.simplefilter("always")
        try:
            header = _tb_header(run_name or Path(events[0]).name, role_counts, queue, options, **counts)
            path, n = import_stack(events, out, header, stack=stack, mapping=mapping or [], ended=ended)
        except ValueError as e:
            _warn_lines(seen)
            _die(str(e))
    _warn_lines(seen)
    typer.echo(f"wrote {path}: {n} rates snapshots; now run: dflash-advise {path}")


@app.command("summarize", short_help="Reduce logs of one run to one mergeable summary.")
def _summarize_cmd(
    logs: Annotated[
        list[Path],
        typer.Argument(
            help="Rate logs (e.g. the per-rank files of one run) and/or summaries to merge.", show_default=False
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="The summary file to write (JSON).")],
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", "-j", min=1, help="Threads to read with (default: every core)."),
    ] = None,
) -> None:
    """Reduce logs of one run to one mergeable summary (bounded memory); advise from it with `dflash-advise S.json`.

    Summaries merge: `summarize S1.json S2.json -o S.json` gives the summary of the logs behind
    S1 and S2, so each node can summarize its own ranks' logs and one machine merges the results.
    """
    if jobs is not None:
        _polars_threads(jobs)
    from advisor.ingest.load import summarize_paths

    with _or_die(logs):
        try:
            summ = summarize_paths(logs)
            summ.write(out)
        except OSError as e:
            _die(f"{out}: cannot be written ({e.strerror or e})")
    n = sum(summ.n_steps(r) for r in summ.roles)
    typer.echo(
        f"{out}: {len(summ.paths)} file(s), {summ.n_lines} lines, {n} steps{' (sampled)' if summ.sampled else ''}",
        err=True,
    )


def _polars_threads(jobs: int) -> None:
    """Read with ``jobs`` threads: polars sizes its pool from POLARS_MAX_THREADS once, when it is
    first imported, so the cap is set before that (a pool already made is said, not resized)."""
    if "polars" not in sys.modules:
        os.environ["POLARS_MAX_THREADS"] = str(jobs)
        return
    import polars as pl

    if pl.thread_pool_size() != jobs:
        typer.echo(
            f"dflash-advise: warning: -j {jobs} not applied: polars already reads with {pl.thread_pool_size()} threads",
            err=True,
        )


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
    except (KeyboardInterrupt, typer.Abort):  # typer's Abort: an end of input at a prompt
        typer.echo("dflash-advise: interrupted", err=True)
        code = 130
    except MemoryError:
        typer.echo(
            f"dflash-advise: out of memory while reading {', '.join(inputs) or 'the input'}; give a part "
            f"of the log (the header line and its steady part)",
            err=True,
        )
        code = 2
    except Exception as e:
        code = 2
        if type(e).__name__ == "NoArgsIsHelpError":  # click >= 8.2: the help, as click shows it
            e.show()
        elif isinstance(e, USAGE_ERROR):
            typer.echo(f"dflash-advise: {_one_line_usage(e, args)}", err=True)
        else:
            msg = " ".join(e.format_message().split()) if isinstance(e, CLICK_ERROR) else internal_error(e, inputs)
            typer.echo(f"dflash-advise: {msg}", err=True)
    sys.exit(code if isinstance(code, int) else 0)


def script() -> None:
    """The ``dflash-advise`` console script and ``python -m advisor``."""
    main()


if __name__ == "__main__":
    script()
