"""Lesson 07, step 1 of 3 — find the operation that dominates a step, and fix it.

`block(x, weights)` below is one block of a small sequence model: a layer
norm, a causal "prefix mean" mixer (each position sees the mean of every
position up to and including it), a linear layer on both, a GELU and the
residual. x is B×S×D float32 (4×256×32 in the check). It gives the right
answer, and it is slow.

1. Profile it. Run this file (`python exercises/find_bottleneck.py`): it
   prints torch.profiler's table for one step, sorted by CPU total time.
   `gpulab check find_bottleneck` shows the same table for your current code.
2. Name the operator that dominates the step: set BOTTLENECK to its name as
   the table spells it ("aten::..."). Which column tells you? Read the
   lesson's note on self and total time.
3. Fix the step so that operator no longer dominates: same output, several
   times faster.

Contract (the grader checks all of it):
  * BOTTLENECK is a string: the operator your code calls that takes most of
    the original step's time.
  * `block(x, weights)` returns a B×S×D float32 tensor on x's device equal to
    the original's (to 1e-4), for every x the check draws (fresh data on
    every call), without writing into x or the weights. `weights` is a dict:
    "norm.weight", "norm.bias" (D,), "mix.weight" (D×2D), "mix.bias" (D,).
  * The judge times your step (its own clock, around the sandbox's calls)
    and the original (in its own process): yours must be at least 2× faster.
  * In a profile of three calls of your step, the operator you named must take
    under 20% of the step's CPU time.
  * torch only, in eager mode (no torch.compile, no CUDA graphs): this is
    about reading a profile, not about a compiler.

Grade: pass or fail, no letter.
"""

import time

import torch
import torch.nn.functional as F

# TODO: the name of the operator that dominates the step, as torch.profiler
#       names it (for example "aten::addmm").
BOTTLENECK = ""


def prefix_mean(h):
    """out[:, t] = the mean of h[:, 0], ..., h[:, t]."""
    return torch.stack([h[:, : t + 1].mean(dim=1) for t in range(h.shape[1])], dim=1)


def block(x, weights):
    h = F.layer_norm(x, (x.shape[-1],), weights["norm.weight"], weights["norm.bias"])
    context = prefix_mean(h)
    u = F.linear(torch.cat([h, context], dim=-1), weights["mix.weight"], weights["mix.bias"])
    return x + F.gelu(u)


def example(seed=0, B=4, S=256, D=32, device="cpu"):
    """Inputs like the check's: (x, weights)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, S, D, generator=g)
    weights = {
        "norm.weight": 1 + 0.1 * torch.randn(D, generator=g),
        "norm.bias": 0.1 * torch.randn(D, generator=g),
        "mix.weight": torch.randn(D, 2 * D, generator=g) / (2 * D) ** 0.5,
        "mix.bias": 0.1 * torch.randn(D, generator=g),
    }
    return x.to(device), {k: v.to(device) for k, v in weights.items()}


if __name__ == "__main__":
    from torch.profiler import ProfilerActivity, profile

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        torch.set_num_threads(1)  # as in the check
    x, weights = example(device=device)
    for _ in range(3):  # warm up: the first calls pay for start-up
        block(x, weights)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        block(x, weights)
        if device == "cuda":
            torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=12))
    start = time.perf_counter()
    for _ in range(10):
        block(x, weights)
    if device == "cuda":
        torch.cuda.synchronize()
    print(f"one step: {(time.perf_counter() - start) / 10 * 1e3:.2f} ms on the {device}")
