"""`dflash-train`: the command line of the trainer (typer only; the work is in `trainer.run`).

Exit codes: 0 the run finished (end reason done) or reached --time-limit; 1 a worker or the loader failed, or the log
could not be written (reason error); 130 interrupted by SIGINT, SIGTERM or SIGHUP (reason
interrupted); 2 unusable input: an invalid setting, an output path that cannot take the log, or
an --emulate source the advisor cannot read (one line on stderr, no worker started). With
--probe (`trainer.probe`): 0 when every segment ran, else the code of the segment that did not
(1 or 130), 2 for a bad split list or one that does not fit the GPUs. Only typer,
the standard library and `trainer.config` (no torch) are imported at module level, so that
``--help`` and ``--version`` stay fast.
"""

from __future__ import annotations

import os
import sys
from enum import Enum
from typing import Annotated

import typer

from .config import DEVICES, HANDOFFS, PRESETS

CRASH_ENV = "DFLASH_TRAIN_CRASH"  # test hook: "role:index:step[:exit]" makes that worker fail

Device = Enum("Device", {d: d for d in DEVICES}, type=str)
Model = Enum("Model", {m: m for m in PRESETS}, type=str)
Handoff = Enum("Handoff", {h: h for h in HANDOFFS}, type=str)

# config field -> the option that sets it, so that a message names what the user typed
OPTION_OF = {
    "hs_queue_depth": "--hs-cap",
    "rates_every_s": "--rates-every",
    "stop_grace_s": "--stop-grace",
    "sync_s": "--sync-s",
    "crash": CRASH_ENV,
    "run_name": "--run-name",
    "start_timeout_s": "start_timeout_s",
    "grad_clip": "grad_clip",
    "time_limit_s": "--time-limit",
    "probe": "--probe",
    "probe_seconds": "--probe-seconds",
    "probe_rounds": "--probe-rounds",
}

app = typer.Typer(
    add_completion=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Async DFlash drafter training pipeline (N target processes -> q_hs -> M drafter processes) "
    "that writes a rate log for dflash-advise, or an emulation of one from a measured log.",
)


def _say(text: str) -> None:
    try:
        print(text, file=sys.stderr, flush=True)
    except OSError:  # stderr was a terminal that went away
        pass


def _die(msg: str, code: int = 2) -> None:
    _say(f"dflash-train: {msg}")
    raise typer.Exit(code)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("dflash-advisor")
        except PackageNotFoundError:
            v = "unknown (not installed)"
        typer.echo(f"dflash-train {v}")
        raise typer.Exit(0)


def _option(field: str) -> str:
    return OPTION_OF.get(field, "--" + field.replace("_", "-"))


@app.command()
def train(
    targets: Annotated[int | None, typer.Option("--targets", help="Target worker processes (N; default 1).")] = None,
    drafters: Annotated[int | None, typer.Option("--drafters", help="Drafter worker processes (M; default 1).")] = None,
    device: Annotated[
        Device,
        typer.Option("--device", help="Where workers compute; with cuda, roles are spread over the visible GPUs."),
    ] = Device.cpu,
    out: Annotated[
        str | None,
        typer.Option(
            "--out",
            "-o",
            help="JSONL rate log to write (refused if it exists, "
            "unless --force; default run.jsonl); with --probe "
            "a directory (default probe).",
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing --out file.")] = False,
    steps: Annotated[
        int | None,
        typer.Option(
            "--steps", help="Stop after this many drafter steps, all drafters together (default: the whole plan)."
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of corpus, batching, models and emulation draws.")] = 0,
    token_budget: Annotated[
        int | None,
        typer.Option("--token-budget", help="Batch token budget, padded (default: cpu 2048, cuda 32768)."),
    ] = None,
    pre_queue_depth: Annotated[
        int, typer.Option("--pre-queue-depth", help="q_pre depth (batches): capacity of each target's prefetch queue.")
    ] = 50,
    hs_queue_depth: Annotated[
        int,
        typer.Option("--hs-cap", "--hs-queue-depth", help="q_hs depth (batches): capacity of the hidden-state queue."),
    ] = 20,
    sync_every: Annotated[int, typer.Option("--sync-every", help="Drafter steps per sync when M > 1 (0: never).")] = 10,
    rates_every: Annotated[
        float | None,
        typer.Option("--rates-every", help="Seconds between rates snapshots (default: cpu 2, cuda 10)."),
    ] = None,
    samples: Annotated[
        int | None, typer.Option("--samples", help="Corpus size (default: cpu 4000, cuda 50000).")
    ] = None,
    epochs: Annotated[int, typer.Option("--epochs", help="Passes over the corpus.")] = 1,
    model: Annotated[Model | None, typer.Option("--model", help="Model preset (default: cpu tiny, cuda 1b).")] = None,
    lr: Annotated[
        float | None, typer.Option("--lr", help="AdamW learning rate of the drafter (default: cpu 1e-3, cuda 3e-4).")
    ] = None,
    handoff: Annotated[
        Handoff,
        typer.Option(
            "--handoff", help="Hidden-state handoff: auto (shared memory / CUDA IPC) or host (shared host memory)."
        ),
    ] = Handoff.auto,
    run_name: Annotated[str | None, typer.Option("--run-name", help="The header's run name.")] = None,
    progress: Annotated[
        bool | None,
        typer.Option(
            "--progress/--no-progress", help="Live progress line (default: on when stdout and stderr are terminals)."
        ),
    ] = None,
    emulate: Annotated[
        str | None, typer.Option("--emulate", help="Emulate from this measured rate log instead of computing.")
    ] = None,
    time_scale: Annotated[
        float, typer.Option("--time-scale", help="Emulation: wall seconds per emulated second.")
    ] = 1.0,
    sync_s: Annotated[
        float | None,
        typer.Option("--sync-s", help="Emulation: seconds per sync, when the source log ran one drafter."),
    ] = None,
    target_tp: Annotated[
        int,
        typer.Option(
            "--target-tp",
            help="GPUs (processes) per target engine, running "
            "the target with tensor parallelism; --targets "
            "counts engines.",
        ),
    ] = 1,
    gpus_per_node: Annotated[
        int | None,
        typer.Option("--gpus-per-node", help="Emulation: GPUs per node; engines are placed on nodes (--placement)."),
    ] = None,
    link_bytes_s: Annotated[
        float | None,
        typer.Option(
            "--link-bytes-s",
            help="Emulation: bandwidth (bytes/s) of the one link between nodes, shared by every cross-node hand-off.",
        ),
    ] = None,
    placement: Annotated[
        str | None,
        typer.Option(
            "--placement",
            help="Emulation: node of each engine, e.g. 'target=0,0,1;drafter=1,1' (default: fill "
            "node 0, then node 1, ..., targets first).",
        ),
    ] = None,
    stop_grace: Annotated[
        float, typer.Option("--stop-grace", help="Seconds workers get to stop before being killed.")
    ] = 10.0,
    probe: Annotated[
        str | None,
        typer.Option(
            "--probe",
            help="Probe these splits, e.g. 5-3,4-4 (targets-drafters, one G): short runs in alternating "
            "order A B A B, one log each in the --out directory, for 'dflash-advise DIR'.",
        ),
    ] = None,
    probe_seconds: Annotated[
        float,
        typer.Option(
            "--probe-seconds", help="Probe: seconds of each segment, from its header (emulated seconds in emulation)."
        ),
    ] = 120.0,
    probe_rounds: Annotated[int, typer.Option("--probe-rounds", help="Probe: rounds; each runs every split once.")] = 2,
    time_limit: Annotated[
        float | None,
        typer.Option(
            "--time-limit",
            help="Stop after this many seconds from the header (the log ends 'interrupted', exit code 0).",
        ),
    ] = None,
    version: Annotated[
        bool | None,
        typer.Option("--version", "-V", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = None,
) -> None:
    """Run the pipeline and write its rate log (or, with --probe, a directory of short runs)."""
    from .config import ConfigError, make_config
    from .logwriter import OutputError

    splits = None
    try:
        if probe is not None:
            splits = _probe_splits(probe, targets, drafters, target_tp)
            targets, drafters = splits[0]
            out = out if out is not None else "probe"
        cfg = make_config(
            targets=targets if targets is not None else 1,
            drafters=drafters if drafters is not None else 1,
            device=device.value,
            out=out if out is not None else "run.jsonl",
            steps=steps,
            seed=seed,
            time_limit_s=time_limit,
            token_budget=token_budget,
            pre_queue_depth=pre_queue_depth,
            hs_queue_depth=hs_queue_depth,
            sync_every=sync_every,
            rates_every_s=rates_every,
            samples=samples,
            epochs=epochs,
            model=model.value if model is not None else None,
            lr=lr,
            handoff=handoff.value,
            run_name=run_name,
            progress=progress,
            emulate=emulate,
            time_scale=time_scale,
            sync_s=sync_s,
            stop_grace_s=stop_grace,
            force=force,
            target_tp=target_tp,
            gpus_per_node=gpus_per_node,
            link_bytes_s=link_bytes_s,
            placement=placement,
            crash=os.environ.get(CRASH_ENV) or None,
        )
        from .run import SourceError, run

        if splits is not None:
            from .probe import ProbePlan, run_probe

            plan = ProbePlan(splits=splits, seconds=probe_seconds, rounds=probe_rounds)
            _check_probe(plan, cfg)
            raise typer.Exit(run_probe(cfg, plan, cfg.out, _say).exit_code)
        result = run(cfg)
    except ConfigError as e:
        _die(f"{_option(e.field)}: {str(e).split(': ', 1)[1]}")
    except (OutputError, SourceError) as e:
        _die(str(e))
    if result.reason == "done":
        _say(f"dflash-train: done: {result.drafter_steps} drafter steps, log {result.log_path} ({result.lines} lines)")
    elif result.timed_out:
        _say(
            f"dflash-train: time limit: {result.drafter_steps} drafter steps in {result.seconds:.1f} s, log "
            f"{result.log_path} ({result.lines} lines)"
        )
    elif result.reason == "interrupted":
        _say(f"dflash-train: interrupted after {result.drafter_steps} drafter steps; log {result.log_path}")
    raise typer.Exit(result.exit_code)


def _probe_splits(text: str, targets: int | None, drafters: int | None, target_tp: int) -> tuple:
    """The --probe splits; ConfigError where --targets or --drafters is given too (the probe sets them)."""
    from .config import ConfigError
    from .probe import parse_splits

    if targets is not None or drafters is not None:
        raise ConfigError("probe", "sets the split of each segment: leave out --targets and --drafters")
    return parse_splits(text, target_tp)


def _check_probe(plan, cfg) -> None:
    """The probe's checks that need the devices: CUDA GPUs visible (not for CPU or emulation)."""
    from .probe import check_plan

    visible = None
    if cfg.device == "cuda" and not cfg.emulated:
        import torch

        visible = torch.cuda.device_count()
    check_plan(plan, cfg, visible)


def _usage_line(e: Exception) -> str:
    """A click usage error as one line that names the flag and, for a choice, the valid values
    (click prints a three-line box; every other bad flag here is one line)."""
    msg = " ".join(e.format_message().split()).replace("Value error, ", "")
    return f"{msg} (see 'dflash-train --help')"


def main(argv: list[str] | None = None) -> None:
    """The `dflash-train` entry point: usage errors in one line (exit 2), like `dflash-advise`'s."""
    import importlib

    usage: list[type] = []
    aborts: list[type] = []
    for name in ("typer._click.exceptions", "click.exceptions"):  # typer >= 0.25 ships its own click
        try:
            m = importlib.import_module(name)
        except ImportError:
            continue
        usage += [c for c in (getattr(m, "UsageError", None),) if isinstance(c, type)]
        aborts += [c for c in (getattr(m, "Abort", None),) if isinstance(c, type)]
    try:
        code = app(args=sys.argv[1:] if argv is None else argv, prog_name="dflash-train", standalone_mode=False)
    except tuple(usage) as e:
        if type(e).__name__ == "NoArgsIsHelpError":
            raise
        _say(f"dflash-train: {_usage_line(e)}")
        code = 2
    except tuple(aborts):
        _say("dflash-train: interrupted")
        code = 130
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
