"""Lesson 06, step 1 of 3 — torch.compile: take the graph breaks out of a step.

`step(x, lengths, params)` below is one single-head, pre-norm transformer
block, written the way research code often is: it works in eager mode, but
TorchDynamo cannot capture it as one graph. Every graph break splits the
step into pieces that Inductor compiles separately, with Python running in
between (and, on a GPU, often a device-to-host copy that stalls the stream).

Your job: rewrite `step` so that Dynamo captures it as ONE graph, while it
computes the same thing.

Contract (the grader checks all of it):
  * Inputs: x is B×S×D float32; lengths is a B-long int64 tensor of valid
    lengths (1..S; key positions >= length are padding); params is a dict of
    float32 tensors: wq, wk, wv, wo (D×D), w1 (D×4D), w2 (4D×D), norm1, norm2 (D).
  * Output: a B×S×D float32 tensor equal to the original step's (to 1e-5
    relative) on fresh inputs, including inputs whose RMS is above CAP (the
    rescale happens) and below it (it does not). Don't write into the inputs.
  * Zero graph breaks: the grader traces your step with Dynamo and then
    compiles it with fullgraph=True, which fails on any break at all.
  * No shortcuts: leave `step` undecorated (no torch.compiler.disable, no
    torch.compile: the grader compiles it); the graph must contain the real
    ops (no allow_in_graph / custom-op wrapper around the old code); and
    torch._dynamo.config stays at its defaults (the grader undoes changes).

There are five causes of breaks, of five different kinds (Dynamo logs seven
breaks: the NumPy line's result breaks twice more on the line after it).
Find them yourself:

    python exercises/graph_breaks.py                 # runs torch._dynamo.explain
    TORCH_LOGS=graph_breaks python exercises/graph_breaks.py

or run `gpulab check graph_breaks`, which names each break's line and reason.

Grade: pass or fail, no letter. On a GPU the check also times the original
step, yours, and the two compile modes, for you to compare (not graded).
"""

import math

import numpy as np
import torch
import torch.nn.functional as F

CAP = 4.0


def rms_norm(x, g, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g


def step(x, lengths, p):
    # TODO: rewrite this step so that Dynamo reports zero graph breaks,
    #       keeping its output exactly what it is now.
    B, S, D = x.shape
    print(f"step: batch={B} seq={S}")

    # Guard against activation spikes: rescale the batch if its RMS is too big.
    rms = x.pow(2).mean().sqrt()
    if rms > CAP:
        x = x * (CAP / rms)

    # Attention, with a temperature taken from the scores' own spread.
    h = rms_norm(x, p["norm1"])
    q, k, v = h @ p["wq"], h @ p["wk"], h @ p["wv"]
    scores = q @ k.transpose(1, 2)
    temp = scores.std().item()
    scores = scores / max(temp, 1.0)

    # Padding mask: key positions at or past each row's length are hidden.
    mask = torch.zeros(B, S, dtype=torch.bool, device=x.device)
    for b, n in enumerate(lengths.tolist()):
        mask[b, n:] = True
    scores = scores.masked_fill(mask[:, None, :], float("-inf"))
    attn = torch.softmax(scores, dim=-1)
    x = x + (attn @ v) @ p["wo"]

    # MLP, with activations clipped at their top 1% (the k-th largest value).
    h = rms_norm(x, p["norm2"]) @ p["w1"]
    k = max(1, h.numel() // 100)
    hi = np.partition(h.detach().cpu().numpy().ravel(), -k)[-k]
    h = F.gelu(h.clamp(max=float(hi)))
    return x + h @ p["w2"]


def example_inputs(batch=2, seq=8, dim=16, rms=8.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, seq, dim, generator=g)
    x = x * (rms / x.pow(2).mean().sqrt())
    lengths = torch.randint(1, seq + 1, (batch,), generator=g)
    p = {n: torch.randn(dim, dim, generator=g) / math.sqrt(dim) for n in ("wq", "wk", "wv", "wo")}
    p["w1"] = torch.randn(dim, 4 * dim, generator=g) / math.sqrt(dim)
    p["w2"] = torch.randn(4 * dim, dim, generator=g) / math.sqrt(4 * dim)
    p["norm1"] = 1 + 0.1 * torch.randn(dim, generator=g)
    p["norm2"] = 1 + 0.1 * torch.randn(dim, generator=g)
    return x, lengths, p


if __name__ == "__main__":
    import torch._dynamo

    report = torch._dynamo.explain(step)(*example_inputs())
    print(f"graphs: {report.graph_count}  graph breaks: {report.graph_break_count}  "
          f"ops: {report.op_count}")
    for reason in report.break_reasons:
        frame = reason.user_stack[-1] if reason.user_stack else None
        where = f"line {frame.lineno}: {frame.line}" if frame else "?"
        print(f"- {where}\n    {reason.reason.splitlines()[0]}")
    print("(explain can miss a break that comes before the first op; "
          "`gpulab check graph_breaks` does not)")
