"""`dflash-train`: the command line of the trainer (typer only; the work is in `trainer.run`).

Exit codes: 0 the run finished (end reason done); 1 a worker or the loader failed (reason
error); 130 interrupted by SIGINT/SIGTERM (reason interrupted); 2 invalid settings (a one-line
message naming the setting, no log written).
"""
from __future__ import annotations

import os
import sys
from typing import Optional

import typer

CRASH_ENV = "DFLASH_TRAIN_CRASH"   # test hook: "role:index:step[:exit]" makes that worker fail

app = typer.Typer(add_completion=False, help="Async DFlash drafter training pipeline that writes a rate log "
                  "(schema v1), or an emulation of one from a measured log.")


@app.command()
def train(
    targets: int = typer.Option(1, "--targets", help="target worker processes (N)"),
    drafters: int = typer.Option(1, "--drafters", help="drafter worker processes (M)"),
    device: str = typer.Option("cpu", "--device", help="cpu or cuda (roles spread over the visible GPUs)"),
    out: str = typer.Option("run.jsonl", "--out", help="path of the JSONL rate log"),
    steps: Optional[int] = typer.Option(None, "--steps", help="stop after this many drafter steps (all drafters)"),
    seed: int = typer.Option(0, "--seed", help="seed of corpus, batching, models and emulation draws"),
    token_budget: Optional[int] = typer.Option(None, "--token-budget",
                                               help="padded tokens per batch [cpu 2048, cuda 32768]"),
    pre_queue_depth: int = typer.Option(50, "--pre-queue-depth", help="capacity of each target's prefetch queue"),
    hs_queue_depth: int = typer.Option(20, "--hs-queue-depth", help="capacity of the hidden-state queue"),
    sync_every: int = typer.Option(10, "--sync-every", help="drafter steps between weight syncs when M > 1 (0: never)"),
    rates_every: Optional[float] = typer.Option(None, "--rates-every", help="seconds between rates snapshots "
                                                "[cpu 2, cuda 10]"),
    samples: Optional[int] = typer.Option(None, "--samples", help="corpus size [cpu 4000, cuda 50000]"),
    epochs: int = typer.Option(1, "--epochs", help="passes over the corpus"),
    model: Optional[str] = typer.Option(None, "--model", help="model preset: tiny, 234m, 1b [cpu tiny, cuda 1b]"),
    lr: Optional[float] = typer.Option(None, "--lr", help="AdamW learning rate of the drafter [cpu 1e-3, cuda 3e-4]"),
    handoff: str = typer.Option("auto", "--handoff", help="hidden-state handoff: auto (shared memory / CUDA "
                                "IPC) or host (through shared host memory)"),
    run_name: Optional[str] = typer.Option(None, "--run-name", help="the header's run name"),
    progress: Optional[bool] = typer.Option(None, "--progress/--no-progress",
                                            help="live progress line [on when stdout and stderr are terminals]"),
    emulate: Optional[str] = typer.Option(None, "--emulate", help="emulate from this measured log"),
    time_scale: float = typer.Option(1.0, "--time-scale", help="emulation: wall seconds per emulated second"),
    sync_s: Optional[float] = typer.Option(None, "--sync-s", help="emulation: sync duration when the source "
                                           "log ran one drafter"),
    stop_grace: float = typer.Option(10.0, "--stop-grace", help="seconds workers get to stop before being killed"),
) -> None:
    from .config import ConfigError, make_config

    try:
        cfg = make_config(targets=targets, drafters=drafters, device=device, out=out, steps=steps, seed=seed,
                          token_budget=token_budget, pre_queue_depth=pre_queue_depth, hs_queue_depth=hs_queue_depth,
                          sync_every=sync_every, rates_every_s=rates_every, samples=samples, epochs=epochs,
                          model=model, lr=lr, handoff=handoff, run_name=run_name, progress=progress,
                          emulate=emulate, time_scale=time_scale, sync_s=sync_s, stop_grace_s=stop_grace,
                          crash=os.environ.get(CRASH_ENV) or None)
        from .run import run

        result = run(cfg)
    except ConfigError as e:
        print(f"dflash-train: invalid setting {e}", file=sys.stderr)
        raise typer.Exit(2)
    if result.reason == "done":
        print(f"dflash-train: done: {result.drafter_steps} drafter steps, log {result.log_path} "
              f"({result.lines} lines)", file=sys.stderr)
    elif result.reason == "interrupted":
        print(f"dflash-train: interrupted after {result.drafter_steps} drafter steps; log {result.log_path}",
              file=sys.stderr)
    raise typer.Exit(result.exit_code)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
