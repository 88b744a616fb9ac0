"""Real compute of one batch, per role. Each `run` leaves the device synchronised, so the
worker's clock reading after it closes an honest compute interval.

Target: input ids (broadcast to the other ranks of a tensor-parallel engine, `trainer.tp`) -> backbone forward (bf16 on
CUDA, fp32 on CPU, no autograd) -> taps and the
teacher hidden states at the anchor blocks -> exported for the drafter (shared memory / CUDA
IPC, see `handoff`). The export is part of the target's busy time and is also reported alone
as ``xfer``.

Drafter: import the hidden states (``xfer``), drafter forward under bf16 autocast on CUDA,
teacher logits = frozen lm_head at the anchor blocks (no grad), soft-KL, backward, AdamW step,
``loss.item()`` (which synchronises). Parameters stay fp32 (AdamW on bf16 weights would stall);
the global gradient norm is clipped at ``grad_clip`` (1.0).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from .clock import device_sync
from .config import TrainConfig
from .handoff import export_tensors, import_tensors
from .models import (
    BlockDrafter,
    TargetBackbone,
    choose_anchors,
    count_params,
    gather_teacher_hidden,
    soft_kl,
    verifier_head,
)
from .tp import broadcast_batch, broadcast_stop, join_group, leave_group, shard_backbone


@dataclass
class StepResult:
    out: dict | None  # message for the next queue (targets), None for drafters
    loss: float | None = None
    extra: dict = field(default_factory=dict)  # extra step fields: xfer (s), mem (bytes)


def _peak_mem(device: torch.device) -> dict:
    return {"mem": int(torch.cuda.max_memory_allocated(device))} if device.type == "cuda" else {}


class TargetCompute:
    """One target engine's rank: the whole backbone (``tp_size`` 1) or its share of a
    tensor-parallel group (`trainer.tp`); rank 0 is the one that runs batches with `run`, the
    others `follow` it."""

    def __init__(self, cfg: TrainConfig, device: torch.device, tp_rank: int = 0, tp_port: int = 0):
        self.cfg = cfg
        self.device = device
        self.spec = cfg.preset.target
        self.dspec = cfg.preset.drafter
        self.tp_size, self.tp_rank = cfg.target_tp, tp_rank
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
        self.backbone = TargetBackbone(self.spec, device, dtype, cfg.seed)
        self.params = count_params(self.backbone.model)  # the whole engine's, before sharding
        if self.tp_size > 1:
            mesh = join_group(tp_rank, self.tp_size, tp_port, device)
            shard_backbone(self.backbone.model, mesh, self.spec.layers)
        self.mode = cfg.handoff
        self.hs_bytes_per_token = self.spec.taps * self.spec.hidden * (2 if dtype == torch.bfloat16 else 4)

    def info(self) -> dict:
        out = {"params": self.params, "hs_bytes_per_token": self.hs_bytes_per_token}
        if self.tp_size > 1:
            out["tp_size"] = self.tp_size
        return out

    def follow(self) -> int:
        """A follower rank: run the forward of every batch the leader broadcasts, until stop;
        returns the batches run."""
        n = 0
        while (got := broadcast_batch(None, 0, self.device)) is not None:
            self.backbone.forward(got[0])
            n += 1
        return n

    def close(self) -> None:
        """The leader releases its followers (between two forwards) and every rank leaves the group."""
        if self.tp_size > 1:
            if self.tp_rank == 0:
                broadcast_stop(self.device)
            leave_group()

    def run(self, item: dict) -> StepResult:
        ids = torch.from_numpy(item["ids"]).to(self.device, dtype=torch.long)
        if self.tp_size > 1:
            broadcast_batch(ids, int(item["batch"]), self.device)
        taps, final = self.backbone.forward(ids)
        anchors_np = choose_anchors(
            item["lens"], self.dspec.block, self.dspec.anchor_share, self.cfg.seed, item["batch"]
        )
        anchors = torch.from_numpy(anchors_np).to(self.device)
        with torch.no_grad():
            teacher_h = gather_teacher_hidden(final, anchors, self.dspec.block)
        del final
        device_sync(self.device)
        blob, export_s = export_tensors({"taps": taps, "teacher_h": teacher_h}, self.mode)
        msg = {
            "batch": item["batch"],
            "tokens": item["tokens"],
            "seqs": item["seqs"],
            "ids": item["ids"],
            "anchors": anchors_np,
            "hs": blob,
        }
        return StepResult(out=msg, extra={"xfer": export_s, **_peak_mem(self.device)})


class DrafterCompute:
    def __init__(self, cfg: TrainConfig, device: torch.device):
        self.cfg = cfg
        self.device = device
        tspec, dspec = cfg.preset.target, cfg.preset.drafter
        torch.manual_seed(cfg.seed * 7919 + 1)  # every rank starts from the same weights
        self.model = BlockDrafter(dspec, tspec).to(device)
        self.head = verifier_head(tspec, cfg.seed, device, torch.bfloat16 if device.type == "cuda" else torch.float32)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr, weight_decay=0.0)
        self.autocast = (
            torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else contextlib.nullcontext()
        )

    def info(self) -> dict:
        return {"params": count_params(self.model), "frozen_head_params": int(self.head.numel())}

    def parameters(self) -> list[torch.Tensor]:
        return [p.data for p in self.model.parameters()]

    def run(self, msg: dict) -> StepResult:
        hs, import_s = import_tensors(msg["hs"], self.device)
        ids = torch.from_numpy(msg["ids"]).to(self.device, dtype=torch.long)
        anchors = torch.from_numpy(np.ascontiguousarray(msg["anchors"])).to(self.device)
        with self.autocast:
            student_h = self.model(hs["taps"], ids, anchors)
            student = F.linear(student_h, self.head.to(student_h.dtype))
            with torch.no_grad():
                teacher = F.linear(hs["teacher_h"], self.head)
            loss = soft_kl(student, teacher)
        del hs  # releases the producer's shared buffers as early as possible
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.opt.step()
        loss_v = float(loss.item())
        device_sync(self.device)
        return StepResult(out=None, loss=loss_v, extra={"xfer": import_s, **_peak_mem(self.device)})
