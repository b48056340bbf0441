"""Lesson 06's model step, as the starter gives it, and its inputs.

`original_step` is the meaning a learner's rewrite must keep; the judge runs
it on inputs drawn here (gpulab.judge.graders.graph_breaks).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

# The step's weights and norms by name, and its three arguments (x, lengths, p).
Params = dict[str, torch.Tensor]
StepInputs = tuple[torch.Tensor, torch.Tensor, Params]

CAP = 4.0
# (batch, seq, dim, public seed, input RMS, all rows full length, label)
CASES = [
    (2, 8, 16, 1, 1.0, False, "RMS 1: not rescaled"),
    (2, 8, 16, 2, 8.0, False, "RMS 8: rescaled"),
    (3, 5, 24, 3, 1.0, False, "RMS 1: not rescaled"),
    (3, 5, 24, 4, 6.0, False, "RMS 6: rescaled"),
    (1, 2, 8, 5, 1.0, False, "smallest"),
    (4, 16, 32, 6, 10.0, True, "no padding, rescaled"),
    (2, 8, 16, 7, 1.0, False, "second draw"),
]
TIMING_SHAPES = [(2, 64, 128), (8, 256, 256)]


def rms_norm(x: torch.Tensor, g: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g


def original_step(x: torch.Tensor, lengths: torch.Tensor, p: Params) -> torch.Tensor:
    """The starter's step, minus its print: the meaning the learner must keep."""
    B, S, D = x.shape
    rms = x.pow(2).mean().sqrt()
    if rms > CAP:
        x = x * (CAP / rms)
    h = rms_norm(x, p["norm1"])
    q, k, v = h @ p["wq"], h @ p["wk"], h @ p["wv"]
    scores = q @ k.transpose(1, 2)
    temp = scores.std().item()
    scores = scores / max(temp, 1.0)
    mask = torch.zeros(B, S, dtype=torch.bool, device=x.device)
    for b, n in enumerate(lengths.tolist()):
        mask[b, n:] = True
    scores = scores.masked_fill(mask[:, None, :], float("-inf"))
    attn = torch.softmax(scores, dim=-1)
    x = x + (attn @ v) @ p["wo"]
    h = rms_norm(x, p["norm2"]) @ p["w1"]
    top = max(1, h.numel() // 100)  # not `k`: that is the attention's keys
    hi = np.partition(h.detach().cpu().numpy().ravel(), -top)[-top]
    h = F.gelu(h.clamp(max=float(hi)))
    return x + h @ p["w2"]


def make_inputs(
    batch: int,
    seq: int,
    dim: int,
    seed: int,
    *,
    rms: float = 1.0,
    full: bool = False,
    device: str = "cpu",
) -> StepInputs:
    """x scaled to an exact RMS (so the branch side is known), lengths, params."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(batch, seq, dim, generator=g)
    x = x * (rms / x.pow(2).mean().sqrt())
    if full:
        lengths = torch.full((batch,), seq, dtype=torch.int64)
    else:
        lengths = torch.randint(1, seq + 1, (batch,), generator=g)
    p: Params = {}
    for name in ("wq", "wk", "wv", "wo"):
        p[name] = torch.randn(dim, dim, generator=g) / math.sqrt(dim)
    p["w1"] = torch.randn(dim, 4 * dim, generator=g) / math.sqrt(dim)
    p["w2"] = torch.randn(4 * dim, dim, generator=g) / math.sqrt(4 * dim)
    p["norm1"] = 1 + 0.1 * torch.randn(dim, generator=g)
    p["norm2"] = 1 + 0.1 * torch.randn(dim, generator=g)
    return x.to(device), lengths.to(device), {k: v.to(device) for k, v in p.items()}


def clone_inputs(args: StepInputs) -> StepInputs:
    x, lengths, p = args
    return x.clone(), lengths.clone(), {k: v.clone() for k, v in p.items()}


def step_flops(b: int, s: int, d: int) -> float:
    """Matmul FLOPs of one step: four D×D projections, QK^T and PV, the MLP."""
    return 2 * b * s * d * d * 4 + 2 * 2 * b * s * s * d + 2 * 2 * b * s * d * 4 * d
