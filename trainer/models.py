"""The two models: a frozen Qwen3-shaped target backbone and a DFlash-style block drafter.

Target: ``transformers.Qwen3Model`` built from a config (random init, seeded, no download), run
as a backbone only (no lm_head over all tokens). Forward hooks capture the outputs of the
preset's tap layers; the final normed hidden state is gathered only at the anchor blocks.

Anchors: per batch, A = max(1, round(tokens * anchor_share / (B - 1))) positions a are drawn
without replacement among positions with a + B - 1 < length of their sequence (seeded by the
batch id). Block k of anchor a holds slot 0 = the known token x[a] and slots 1..B-1 = a mask
token; slot j must predict x[a + j], whose verifier distribution is the target's next-token
distribution at position a + j - 1. So the teacher logits are lm_head(final_hidden[a .. a+B-2]):
A * (B - 1) positions, 1/16 of the tokens by default (2048 of 32768).

Drafter (per layer: RMSNorm, attention, RMSNorm, SwiGLU):
    ctx   = in_proj(concat of the tapped hidden states)              over all tokens  [seqs, L, D]
    win   = ctx at positions a-W+1 .. a (masked before the sequence start)             [A, W, D]
    h     = embed([x[a], MASK, ..., MASK])                                             [A, B, D]
    attention: queries = the block; keys/values = (window, block); the block attends to all of
    its own slots (parallel, not causal) and to the window; RoPE with absolute positions.
    logits = lm_head(out_proj(norm(h[:, 1:])))   with the target's frozen lm_head     [A, B-1, V]
Loss: soft KL(teacher || student) = sum_v p_t (log p_t - log p_s), mean over the A*(B-1)
positions, teacher at temperature 1.

The verifier head is a seeded matrix (std = 4 / sqrt(hidden), so teacher logits have a
standard deviation near 4 and the teacher distributions are peaked, not uniform) that every
drafter builds identically; targets never need it.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .config import DrafterSpec, TargetSpec

VERIFIER_LOGIT_STD = 4.0
ROPE_THETA = 10000.0


def target_config(spec: TargetSpec):
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=spec.vocab,
        hidden_size=spec.hidden,
        intermediate_size=spec.ffn,
        num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads,
        num_key_value_heads=spec.kv_heads,
        head_dim=spec.head_dim,
        max_position_embeddings=1 << 17,
        tie_word_embeddings=False,
        attn_implementation="sdpa",
        use_cache=False,
    )


class TargetBackbone:
    """A frozen Qwen3 backbone that returns (taps [seqs, L, taps*H], final hidden [seqs, L, H])."""

    def __init__(self, spec: TargetSpec, device: torch.device, dtype: torch.dtype, seed: int):
        from transformers import Qwen3Model

        torch.manual_seed(seed)
        with torch.device(device):
            model = Qwen3Model(target_config(spec))
        self.model = model.to(dtype).eval().requires_grad_(False)
        self.spec = spec
        self.device = device
        self._captured: dict[int, torch.Tensor] = {}
        for i in spec.tap_layers:
            self.model.layers[i].register_forward_hook(self._hook(i))

    def _hook(self, i: int):
        def keep(_module, _inputs, output):
            # decoder layers return a tensor in transformers 5, a tuple in older versions
            self._captured[i] = output[0] if isinstance(output, tuple) else output

        return keep

    @torch.no_grad()
    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self._captured.clear()
        out = self.model(input_ids=ids, use_cache=False)
        taps = torch.cat([self._captured[i] for i in self.spec.tap_layers], dim=-1)
        self._captured.clear()
        return taps, out.last_hidden_state


def choose_anchors(lens: np.ndarray, block: int, anchor_share: float, seed: int, batch: int) -> np.ndarray:
    """[A, 2] int64 (sequence row, anchor position) for one batch; see the module docstring."""
    valid = np.maximum(lens.astype(np.int64) - block + 1, 0)  # anchors a in [0, len - B]
    total_valid = int(valid.sum())
    if total_valid == 0:
        raise ValueError(f"no sequence of the batch is longer than the drafter block ({block})")
    want = max(1, int(round(int(lens.sum()) * anchor_share / (block - 1))))
    a = min(want, total_valid)
    rng = np.random.default_rng([seed, 0xA0, batch])
    flat = np.sort(rng.choice(total_valid, size=a, replace=False))
    starts = np.concatenate(([0], np.cumsum(valid)[:-1]))
    row = np.searchsorted(starts, flat, side="right") - 1
    return np.stack([row, flat - starts[row]], axis=1).astype(np.int64)


def gather_teacher_hidden(final: torch.Tensor, anchors: torch.Tensor, block: int) -> torch.Tensor:
    """Final hidden states at positions a .. a+B-2 of each anchor: [A, B-1, H]."""
    pos = anchors[:, 1:2] + torch.arange(block - 1, device=final.device)
    return final[anchors[:, 0:1], pos]


def verifier_head(spec: TargetSpec, seed: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """The target's frozen lm_head weight [V, H]; the same on every process for a seed."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + 17)
    w = torch.randn(spec.vocab, spec.hidden, generator=g) * (VERIFIER_LOGIT_STD / math.sqrt(spec.hidden))
    return w.to(device=device, dtype=dtype)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight.to(x.dtype)


def rope(x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of x [A, heads, T, d] at integer positions pos [A, T]."""
    d = x.shape[-1]
    inv = ROPE_THETA ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    ang = pos.to(torch.float32)[:, None, :, None] * inv  # [A, 1, T, d/2]
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class DrafterLayer(nn.Module):
    def __init__(self, spec: DrafterSpec):
        super().__init__()
        d, self.heads, self.hd = spec.hidden, spec.heads, spec.head_dim
        self.norm_h = RMSNorm(d)
        self.norm_ctx = RMSNorm(d)
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, d, bias=False)
        self.v = nn.Linear(d, d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.norm_mlp = RMSNorm(d)
        self.gate = nn.Linear(d, spec.ffn, bias=False)
        self.up = nn.Linear(d, spec.ffn, bias=False)
        self.down = nn.Linear(spec.ffn, d, bias=False)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(x.shape[0], x.shape[1], self.heads, self.hd).transpose(1, 2)

    def forward(self, h, ctx, pos_h, pos_ctx, ctx_valid):
        x = self.norm_h(h)
        kv_in = torch.cat([self.norm_ctx(ctx), x], dim=1)
        pos_kv = torch.cat([pos_ctx, pos_h], dim=1)
        q = rope(self._split(self.q(x)), pos_h)
        k = rope(self._split(self.k(kv_in)), pos_kv)
        v = self._split(self.v(kv_in))
        keep = torch.cat([ctx_valid, torch.ones_like(pos_h, dtype=torch.bool)], dim=1)[:, None, None, :]
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        h = h + self.o(att.transpose(1, 2).reshape(h.shape))
        m = self.norm_mlp(h)
        return h + self.down(F.silu(self.gate(m)) * self.up(m))


class BlockDrafter(nn.Module):
    """DFlash-style drafter: predicts B-1 masked tokens of a block in parallel from target taps."""

    def __init__(self, spec: DrafterSpec, target: TargetSpec):
        super().__init__()
        self.spec = spec
        self.mask_id = target.vocab
        self.embed = nn.Embedding(target.vocab + 1, spec.hidden)
        self.in_proj = nn.Linear(target.taps * target.hidden, spec.hidden, bias=False)
        self.layers = nn.ModuleList(DrafterLayer(spec) for _ in range(spec.layers))
        self.norm_out = RMSNorm(spec.hidden)
        self.out_proj = nn.Linear(spec.hidden, target.hidden, bias=False)
        nn.init.normal_(self.embed.weight, std=0.02)

    def forward(self, taps: torch.Tensor, ids: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
        """Drafter hidden states (target width) for block slots 1..B-1: [A, B-1, H_target]."""
        B, W = self.spec.block, self.spec.window
        rows, pos_a = anchors[:, 0], anchors[:, 1]
        ctx = self.in_proj(taps)  # bf16 taps meet fp32 weights only under autocast (CUDA)
        win_pos = pos_a[:, None] - W + 1 + torch.arange(W, device=ctx.device)
        valid = win_pos >= 0
        win = ctx[rows[:, None], win_pos.clamp(min=0)]
        blk_pos = pos_a[:, None] + torch.arange(B, device=ctx.device)
        blk_ids = torch.full((len(rows), B), self.mask_id, dtype=torch.long, device=ctx.device)
        blk_ids[:, 0] = ids[rows, pos_a]
        h = self.embed(blk_ids)
        for layer in self.layers:
            h = layer(h, win, blk_pos, win_pos, valid)
        return self.out_proj(self.norm_out(h[:, 1:]))


def soft_kl(student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """Mean over positions of KL(softmax(teacher) || softmax(student)), in nats."""
    s = F.log_softmax(student_logits.float().flatten(0, -2), dim=-1)
    t = F.log_softmax(teacher_logits.float().flatten(0, -2), dim=-1)
    return F.kl_div(s, t, log_target=True, reduction="batchmean")


def count_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
