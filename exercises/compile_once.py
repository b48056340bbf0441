"""Lesson 06 — torch.compile deep dive: compile once, for every request.

`step(x, lengths, temperature)` below is the attention read-out of a small
serving loop. Requests arrive one at a time, each a batch of different size:

  * x: B×S×D float32, with B from 2 to 8, S from 2 to 64 and D = 32;
  * lengths: a Python list of B ints, the valid positions of each row (1..S;
    positions at or past a row's length are padding);
  * temperature: a Python float between 0.5 and 2.

The step has no graph break, yet torch.compile traces it again and again:
every guard that fails on a new request is a **recompile** (seconds of
compile on a GPU, for a step that runs in microseconds). Your job: make the
compiled step compile ONCE for the whole stream, and return the same output.

Contract (the grader checks all of it):
  * `compile_step(backend)` returns the callable the check calls on every
    request, as `run(x, lengths, temperature)`, with the types above; it must
    return a B×S×D float32 tensor equal to this file's `step` (to 1e-4),
    including rows past their length (zero). Don't write into the inputs.
  * Pass `backend` to torch.compile (the check's backend counts the graphs
    compiled and every call into them; on a GPU it is Inductor).
  * Exactly one graph compiled over the whole stream, and every request runs
    it exactly once: no recompile, no graph break, no request run eagerly.
  * torch._dynamo.config stays at its defaults (the grader undoes changes).
    The tools are torch.compile's own arguments (`dynamic=...`),
    `torch._dynamo.mark_dynamic`, and what you pass into the compiled step.

There are four reasons it recompiles, of four kinds. Find them yourself:

    TORCH_LOGS=recompiles python exercises/compile_once.py

or run `gpulab check compile_once`, which shows each recompile with the
request that caused it and the guard that failed.

Grade: pass or fail, no letter.
"""

import math

import torch

SLOPE = 0.125  # distance penalty per position (an ALiBi-style bias)
_BIAS: dict[int, torch.Tensor] = {}  # seq len -> S×S bias, built once per length


def distance_bias(S, device):
    if S not in _BIAS:
        pos = torch.arange(S, dtype=torch.float32)
        _BIAS[S] = -SLOPE * (pos[None, :] - pos[:, None]).abs()
    return _BIAS[S].to(device)


def step(x, lengths, temperature):
    B, S, D = x.shape
    # valid[b, j]: position j of row b is a real token, not padding.
    lens = torch.tensor(lengths, device=x.device)
    valid = torch.arange(S, device=x.device)[None, :] < lens[:, None]
    scores = x @ x.transpose(1, 2) / (temperature * math.sqrt(D)) + distance_bias(S, x.device)
    scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    out = torch.softmax(scores, dim=-1) @ x
    return out * valid[..., None]  # padded rows are zero


def compile_step(backend):
    # TODO: make this compile once for every request of the stream.
    return torch.compile(step, backend=backend)


def example_stream(seed=0):
    """Requests like the check's: (x, lengths, temperature), shapes varying."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for B, S in [(4, 16), (4, 16), (2, 16), (4, 40), (3, 7), (8, 64)]:
        x = torch.randn(B, S, 32, generator=g)
        lengths = torch.randint(1, S + 1, (B,), generator=g).tolist()
        out.append((x, lengths, 0.5 + 1.5 * torch.rand((), generator=g).item()))
    return out


if __name__ == "__main__":
    from torch._dynamo.testing import CompileCounter

    counter = CompileCounter()  # a backend that counts the graphs it is given
    run = compile_step(counter)
    for i, (x, lengths, t) in enumerate(example_stream()):
        before = counter.frame_count
        run(x, lengths, t)
        new = counter.frame_count - before
        print(f"request {i}: B={x.shape[0]} S={x.shape[1]}  "
              + (f"compiled {new} graph(s)" if new else "no compile"))
    print(f"graphs compiled: {counter.frame_count} (the goal is 1)")
