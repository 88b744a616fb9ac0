"""Solo service times: each role's compute alone on one device, no pipeline, no contention.

    python -m trainer.bench --device cuda --model 1b --batches 20

Builds one target and one drafter in this process, takes the run's first batches (same corpus,
same batching), and times, after ``warmup`` batches and with the device synchronised:
- target: backbone forward + anchor gather (what a target worker's busy time holds, minus the
  export of the hidden states);
- drafter: forward, teacher logits, soft-KL, backward, AdamW step (a drafter's busy time minus
  the import of the hidden states).
In a pipeline whose workers share a GPU, busy times also hold the other workers' kernels; this
gives the uncontended baseline to compare them with. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m trainer.bench")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--model", default=None)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--token-budget", type=int, default=None)
    args = ap.parse_args(argv)

    import torch
    import torch.nn.functional as F

    from .batching import BatchPlan
    from .clock import device_sync
    from .config import make_config
    from .corpus import SyntheticCorpus
    from .models import BlockDrafter, TargetBackbone, choose_anchors, gather_teacher_hidden, soft_kl, verifier_head

    cfg = make_config(
        targets=1, drafters=1, out="-", device=args.device, model=args.model, token_budget=args.token_budget
    )
    dev = torch.device("cuda:0" if args.device == "cuda" else "cpu")
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    tspec, dspec = cfg.preset.target, cfg.preset.drafter
    target = TargetBackbone(tspec, dev, dtype, cfg.seed)
    torch.manual_seed(1)
    drafter = BlockDrafter(dspec, tspec).to(dev)
    head = verifier_head(tspec, cfg.seed, dev, dtype)
    opt = torch.optim.AdamW(drafter.parameters(), lr=cfg.lr)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=dev.type == "cuda")
    plan = BatchPlan(
        SyntheticCorpus(cfg.samples, tspec.vocab, cfg.token_budget, cfg.seed),
        cfg.token_budget,
        1,
        cfg.seed,
        args.warmup + args.batches,
    )
    t_busy, d_busy, tokens = [], [], []
    for k, pb in enumerate(plan):
        item = plan.materialise(pb)
        device_sync(dev)
        t0 = time.perf_counter()
        ids = torch.from_numpy(item["ids"]).to(dev, dtype=torch.long)
        taps, final = target.forward(ids)
        anchors = torch.from_numpy(
            choose_anchors(item["lens"], dspec.block, dspec.anchor_share, cfg.seed, item["batch"])
        ).to(dev)
        with torch.no_grad():
            teacher_h = gather_teacher_hidden(final, anchors, dspec.block)
        del final
        device_sync(dev)
        t1 = time.perf_counter()
        with autocast:
            h = drafter(taps, ids, anchors)
            loss = soft_kl(F.linear(h, head.to(h.dtype)), F.linear(teacher_h, head).detach())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(drafter.parameters(), cfg.grad_clip)
        opt.step()
        loss.item()
        device_sync(dev)
        t2 = time.perf_counter()
        if k >= args.warmup:
            t_busy.append(t1 - t0)
            d_busy.append(t2 - t1)
            tokens.append(item["tokens"])
    res = {
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "model": cfg.model,
        "token_budget": cfg.token_budget,
        "batches": len(t_busy),
        "tokens_mean": float(np.mean(tokens)),
        "target_busy_s_mean": float(np.mean(t_busy)),
        "target_busy_s_p50": float(np.median(t_busy)),
        "drafter_busy_s_mean": float(np.mean(d_busy)),
        "drafter_busy_s_p50": float(np.median(d_busy)),
        "drafter_params": sum(p.numel() for p in drafter.parameters()),
        "target_busy_ms": [round(x * 1e3, 1) for x in t_busy],
        "drafter_busy_ms": [round(x * 1e3, 1) for x in d_busy],
    }
    if dev.type == "cuda":
        res["peak_mem_bytes_both_roles"] = int(torch.cuda.max_memory_allocated(dev))
    print(json.dumps(res))
    return res


if __name__ == "__main__":
    main()
