"""A plain torch producer/consumer pipeline, instrumented with `advisor.instrument`.

    python examples/instrumented_loop.py --out runs/demo          # about 35 s on a 2-core CPU
    dflash-advise runs/demo                                       # advice on the run

Shape (the one the advisor models): P producer processes ("target") run a frozen model over
token batches and put its hidden states into one bounded queue (q_hs); C consumer processes
("drafter") take them and train a small model on them. Everything is torch.multiprocessing on
CPU; the corpus is random token ids, so nothing is downloaded.

Where the calls go (see docs/instrumenting.md):
- the launcher builds the run header once, stamps its start time (``t0_unix``) when every worker
  is ready, and hands it to the workers;
- each worker opens its own file ``OUT/<role>-<worker>.jsonl`` and times each step with
  ``with log.step(...) as s:``: the consumer's ``q.get()`` from an empty queue inside
  ``s.waiting()`` (starved; taking a batch that was already there is busy), the producer's
  ``q.put()`` inside ``s.blocking()`` (held by a full queue), the rest is busy;
- workers add each step to shared counters; the launcher's own log (``OUT/coordinator.jsonl``)
  turns them into pool-wide ``rates`` snapshots, with the queue depth;
- every file ends with an ``end`` line: done, error (with the exception) or interrupted (SIGTERM).
"""

from __future__ import annotations

import argparse
import os
import queue
import sys
import time
from pathlib import Path

import torch
import torch.multiprocessing as mp
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from advisor.instrument import RateLog, RateMeter, Snapshots  # noqa: E402
from advisor.records import EndReason, Queue, Run  # noqa: E402

PRODUCER, CONSUMER = "target", "drafter"
TIME_LIMIT_MSG = "time limit (--seconds)"


class Block(nn.Module):
    """A pre-norm residual MLP block: per-token cost, so step time grows with tokens per batch."""

    def __init__(self, d: int):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class Target(nn.Module):
    """The frozen model: token ids -> hidden states."""

    def __init__(self, vocab: int, d: int, layers: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.Sequential(*[Block(d) for _ in range(layers)])

    def forward(self, ids):
        return self.blocks(self.embed(ids))


class Drafter(nn.Module):
    """The trained model: hidden states -> next-token logits."""

    def __init__(self, vocab: int, d: int, layers: int):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(d) for _ in range(layers)])
        self.head = nn.Linear(d, vocab)

    def forward(self, h):
        return self.head(self.blocks(h))


def token_batch(gen: torch.Generator, budget: int, vocab: int) -> tuple[torch.Tensor, int]:
    """Pack sequences of random length (64..512 tokens) up to ``budget`` tokens, like a token-budget
    batcher: batches differ in token count. Returns the ids and the number of sequences."""
    lens: list[int] = []
    while True:
        n = int(torch.randint(64, 513, (1,), generator=gen))
        if sum(lens) + n > budget:
            break
        lens.append(n)
    return torch.randint(0, vocab, (sum(lens),), generator=gen), len(lens)


def _waiting_items(q) -> int:
    """Items in a multiprocessing queue (approximate), or 0 where the platform cannot tell (macOS)."""
    try:
        return q.qsize()
    except NotImplementedError:
        return 0


def _count(counters, busy_s: float, tokens: int) -> None:
    batches, busy, toks = counters
    with batches.get_lock():
        batches.value += 1
        busy.value += busy_s
        toks.value += tokens


def _ready(ready, go) -> None:
    """Report the model built, then wait for the launcher's start signal."""
    with ready.get_lock():
        ready.value += 1
    go.wait()


def producer(worker: int, args, header_base: Run, t0, ready, go, stop, hs_q, counters) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)  # every producer holds the same frozen weights
    model = Target(args.vocab, args.hidden, args.target_layers).eval().requires_grad_(False)
    gen = torch.Generator().manual_seed(1000 + worker)
    _ready(ready, go)
    header = header_base.stamped(t0.value)
    with RateLog.open(args.out, header, role=PRODUCER, worker=worker, handle_sigterm=True) as log:
        batch = 0
        while not stop.is_set():
            ids, seqs = token_batch(gen, args.token_budget, args.vocab)
            with log.step(tokens=len(ids), seqs=seqs, batch=worker * 10**6 + batch) as s:
                with torch.no_grad():
                    hidden = model(ids).contiguous()
                with s.blocking():  # a full q_hs holds the producer here
                    while not stop.is_set():
                        try:
                            hs_q.put((hidden, ids), timeout=0.05)
                            break
                        except queue.Full:
                            continue
                    else:
                        s.cancel()  # stopped before the hand-off: no batch done
            if s.record is not None:
                _count(counters, s.record.busy, s.record.tokens)
            batch += 1
        log.end(EndReason.INTERRUPTED, TIME_LIMIT_MSG)  # stopped by the launcher's timer, input left
    hs_q.cancel_join_thread()  # at shutdown, do not wait to flush batches nobody will take


def consumer(worker: int, args, header_base: Run, t0, ready, go, stop, hs_q, counters) -> None:
    # ``stop`` here is the consumers' own event, set before the producers': a tensor taken off q_hs
    # is mapped through its producer's process (torch shares memory by file descriptor), so every
    # producer must outlive the last get

    torch.set_num_threads(1)
    torch.manual_seed(worker)
    model = Drafter(args.vocab, args.hidden, args.drafter_layers)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    _ready(ready, go)
    header = header_base.stamped(t0.value)
    with RateLog.open(args.out, header, role=CONSUMER, worker=worker, handle_sigterm=True) as log:
        while not stop.is_set():
            with log.step() as s:
                try:
                    if _waiting_items(hs_q) > 0:
                        # a batch is there: receiving it (unpickling, mapping its shared memory) is
                        # this worker's own work, so it counts as busy, not as starved
                        hidden, ids = hs_q.get(timeout=1.0)
                    else:
                        with s.waiting():  # an empty q_hs starves the consumer here
                            hidden, ids = hs_q.get(timeout=0.1)
                except queue.Empty:
                    s.cancel()
                    continue
                s.tokens = len(ids)
                logits = model(hidden[:-1])
                loss = nn.functional.cross_entropy(logits, ids[1:])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                s.loss = round(loss.item(), 4)  # .item() also waits for the device: busy ends here
            _count(counters, s.record.busy, s.record.tokens)
        log.end(EndReason.INTERRUPTED, TIME_LIMIT_MSG)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="run directory to write (one file per process)")
    ap.add_argument("--producers", type=int, default=2, help="target (producer) processes")
    ap.add_argument("--consumers", type=int, default=1, help="drafter (consumer) processes")
    ap.add_argument("--seconds", type=float, default=25.0, help="how long to run after start-up")
    ap.add_argument("--hs-cap", type=int, default=8, help="depth of the hidden-state queue")
    ap.add_argument("--token-budget", type=int, default=1024, help="tokens per batch (at most)")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--target-layers", type=int, default=6)
    ap.add_argument("--drafter-layers", type=int, default=1)
    ap.add_argument("--rates-every", type=float, default=2.0, help="seconds between rates snapshots")
    args = ap.parse_args(argv)
    if args.producers < 1 or args.consumers < 1:
        ap.error("--producers and --consumers must be >= 1")
    args.out.mkdir(parents=True, exist_ok=True)
    stale = sorted(args.out.glob("*.jsonl"))
    if stale:
        ap.error(f"{args.out} already holds logs ({stale[0].name}, ...): use a fresh directory per run")

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    header = Run(
        run=f"instrumented-loop-{args.producers}x{args.consumers}",
        roles={PRODUCER: args.producers, CONSUMER: args.consumers},
        queues=[Queue(name="hs", feeds=CONSUMER, cap=args.hs_cap)],
        token_budget=args.token_budget,
        hardware=f"CPU, {cores} cores, shared by all workers",
        target_model=f"mlp-d{args.hidden}-l{args.target_layers} (frozen, random init)",
        drafter_model=f"mlp-d{args.hidden}-l{args.drafter_layers}",
        hs_bytes_per_token=4 * args.hidden,
        # the workers share this host's cores: say so, and how many (docs/log-schema.md)
        extra={"device": "cpu", "cores": cores},
    )
    ctx = mp.get_context("spawn")
    hs_q = ctx.Queue(maxsize=args.hs_cap)
    go, stop, stop_consumers = ctx.Event(), ctx.Event(), ctx.Event()
    t0, ready = ctx.Value("d", 0.0), ctx.Value("i", 0)
    counters = {r: (ctx.Value("l", 0), ctx.Value("d", 0.0), ctx.Value("l", 0)) for r in header.roles}
    procs = [
        ctx.Process(
            target=producer,
            args=(i, args, header, t0, ready, go, stop, hs_q, counters[PRODUCER]),
            name=f"{PRODUCER}-{i}",
        )
        for i in range(args.producers)
    ]
    procs += [
        ctx.Process(
            target=consumer,
            args=(i, args, header, t0, ready, go, stop_consumers, hs_q, counters[CONSUMER]),
            name=f"{CONSUMER}-{i}",
        )
        for i in range(args.consumers)
    ]
    for p in procs:
        p.start()
    while ready.value < len(procs):  # start the clock when every model is built
        dead = [p for p in procs if not p.is_alive()]
        if dead:
            stop.set()
            stop_consumers.set()
            for p in procs:
                p.terminate()
            print(f"worker {dead[0].name} failed while starting (exit code {dead[0].exitcode})", file=sys.stderr)
            return 1
        time.sleep(0.05)
    started = time.monotonic()
    t0.value = time.time()  # the run starts now: every file converts its clock against this
    go.set()

    def depths():
        try:
            return {"hs": hs_q.qsize()}
        except NotImplementedError:  # macOS has no qsize on multiprocessing queues: leave q out
            return None

    meter = RateMeter(header)
    status = 0
    with RateLog.open(
        args.out,
        header.stamped(t0.value),
        name="coordinator",
        snapshots=Snapshots(every_s=args.rates_every, meter=meter, queue_depths=depths),
        handle_sigterm=True,
    ) as log:
        try:
            while time.monotonic() - started < args.seconds:
                time.sleep(0.05)
                for role, (b, busy, tok) in counters.items():
                    meter.set_totals(role, batches=b.value, busy_s=busy.value, tokens=tok.value)
                log.tick()
                dead = [p for p in procs if not p.is_alive()]
                if dead:
                    raise RuntimeError(f"worker {dead[0].name} exited early (exit code {dead[0].exitcode})")
            # a time limit, not the end of the input: the schema's "interrupted" (docs/log-schema.md),
            # so the advisor keeps the tail of the run rather than cutting it as a final drain
            log.end(EndReason.INTERRUPTED, TIME_LIMIT_MSG)
        finally:
            # consumers first, then producers: a batch still in flight is mapped from its producer
            stop_consumers.set()
            consumers_first = procs[args.producers :] + procs[: args.producers]
            for i, p in enumerate(consumers_first):
                if i == args.consumers:
                    stop.set()
                p.join(timeout=30)
                if p.is_alive():
                    p.terminate()
                    p.join()
                if p.exitcode:
                    status = 1
    print(f"wrote {len(list(args.out.glob('*.jsonl')))} logs to {args.out}; now run: dflash-advise {args.out}")
    return status


if __name__ == "__main__":
    sys.exit(main())
