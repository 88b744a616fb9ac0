"""Tensor-parallel target engines (trainer/tp.py): every rank's output equals the unsharded
model's, through the plan alone and through the leader/follower protocol of TargetCompute (gloo,
two CPU processes, small model)."""

from __future__ import annotations

import multiprocessing as mp
import socket

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed.tensor.parallel")

from trainer.config import PRESETS, ConfigError, TargetSpec, check_divisible, make_config  # noqa: E402
from trainer.handoff import import_tensors  # noqa: E402
from trainer.models import TargetBackbone  # noqa: E402
from trainer.tp import COL_PROJ, ROW_PROJ, join_group, leave_group, shard_backbone, tp_plan  # noqa: E402

SPEC = TargetSpec(64, 3, 4, 2, 16, 96, 512)  # small: 4 heads, 2 kv heads, ffn 96 split over 2 ranks
ATOL = 2e-5


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ids(seed: int, seqs: int = 3, length: int = 40) -> torch.Tensor:
    return torch.randint(0, SPEC.vocab, (seqs, length), generator=torch.Generator().manual_seed(seed))


def _plan_rank(rank: int, port: int, out) -> None:
    try:
        torch.set_num_threads(1)
        ref = TargetBackbone(SPEC, torch.device("cpu"), torch.float32, 5)
        bb = TargetBackbone(SPEC, torch.device("cpu"), torch.float32, 5)
        mesh = join_group(rank, 2, port, torch.device("cpu"))
        shard_backbone(bb.model, mesh, SPEC.layers)
        local = bb.model.layers[0].self_attn.q_proj.weight.to_local().shape
        diffs = []
        for seed in (1, 2):
            taps, final = bb.forward(_ids(seed))
            rtaps, rfinal = ref.forward(_ids(seed))
            diffs.append(max(float((taps - rtaps).abs().max()), float((final - rfinal).abs().max())))
        leave_group()
        out.put((rank, tuple(local), max(diffs), float(rtaps.abs().max())))
    except BaseException as e:  # noqa: BLE001
        out.put((rank, "error", repr(e), 0.0))


def _spawn(target, *args):
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    port = _port()
    procs = [ctx.Process(target=target, args=(r, port, out, *args)) for r in range(2)]
    for p in procs:
        p.start()
    got = sorted(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(30)
    return got


def test_every_rank_of_the_sharded_backbone_equals_the_whole_model():
    got = _spawn(_plan_rank)
    for rank, local, diff, scale in got:
        assert local != "error", diff
        # q_proj is split by output rows: each rank holds half the query heads
        assert local == (SPEC.heads * SPEC.head_dim // 2, SPEC.hidden)
        assert scale > 0.1 and diff <= ATOL, (rank, diff)


def _compute_rank(rank: int, port: int, out) -> None:
    from trainer.compute import TargetCompute

    try:
        torch.set_num_threads(1)
        cfg = make_config(targets=1, drafters=1, out="x.jsonl", model="tiny", target_tp=2, seed=3)
        tc = TargetCompute(cfg, torch.device("cpu"), tp_rank=rank, tp_port=port)
        if rank == 0:
            items = [
                {
                    "batch": b,
                    "tokens": 120,
                    "seqs": 3,
                    "ids": _ids(b, 3, 40).numpy() % cfg.preset.target.vocab,
                    "lens": np.full(3, 40),
                }
                for b in range(3)
            ]
            taps = []
            for item in items:
                hs, _ = import_tensors(tc.run(item).out["hs"], torch.device("cpu"))
                taps.append(hs["taps"].clone())
            tc.close()
            ref = TargetCompute(
                make_config(targets=1, drafters=1, out="x.jsonl", model="tiny", seed=3), torch.device("cpu")
            )
            diffs = [
                float((t - import_tensors(ref.run(i).out["hs"], torch.device("cpu"))[0]["taps"]).abs().max())
                for t, i in zip(taps, items)
            ]
            out.put((rank, len(items), max(diffs)))
        else:
            n = tc.follow()
            tc.close()
            out.put((rank, n, 0.0))
    except BaseException as e:  # noqa: BLE001
        out.put((rank, -1, repr(e)))


def test_leader_and_follower_run_each_batch_and_the_leader_hands_off_the_whole_models_states():
    (r0, n0, diff), (r1, n1, _) = _spawn(_compute_rank)
    assert n0 == 3, diff
    assert n1 == 3  # the follower ran every broadcast batch, then left on the stop header
    assert diff <= ATOL


def test_the_plan_shards_every_projection_of_every_layer():
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    plan = tp_plan(2)
    assert len(plan) == 2 * (len(COL_PROJ) + len(ROW_PROJ))
    assert isinstance(plan["layers.1.self_attn.q_proj"], ColwiseParallel)
    assert isinstance(plan["layers.0.mlp.down_proj"], RowwiseParallel)


def test_a_target_that_does_not_split_is_refused_with_its_field():
    assert check_divisible(PRESETS["tiny"].target, 2) is None
    assert "heads (4) is not a multiple of 3" in check_divisible(PRESETS["tiny"].target, 3)
    with pytest.raises(ConfigError, match="target_tp: the target's heads"):
        make_config(targets=1, drafters=1, out="x.jsonl", model="tiny", target_tp=3)
    with pytest.raises(ConfigError, match="target_tp: must be a whole number"):
        make_config(targets=1, drafters=1, out="x.jsonl", target_tp=0)


def test_gpus_count_every_rank_and_roles_count_engines():
    cfg = make_config(targets=3, drafters=2, out="x.jsonl", target_tp=2)
    assert cfg.gpus == 8 and cfg.engines == {"target": 3, "drafter": 2} and cfg.processes == 8
    assert cfg.gpus_per_worker == {"target": 2, "drafter": 1}
