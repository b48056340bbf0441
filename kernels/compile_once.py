"""Lesson 06 reference: the serving step, compiled once for every request.

Each of the starter's four reasons to recompile, and the change that removes it:

1. x's shape          The first graph is traced for one B and S; a request of
                      another size fails the size guard. Dynamo then retraces
                      with that dimension dynamic (automatic dynamic shapes):
                      one recompile per dimension. dynamic=True traces
                      shape-generic from the first call (so does
                      torch._dynamo.mark_dynamic on the dimensions that vary).
2. lengths, a list    A Python list is part of the guards: its length (B) and,
                      until they are made dynamic, its values. A tensor's
                      values are data, not guards: convert it before the
                      compiled call.
3. temperature        A Python float is guarded on its value until it changes
                      once. dynamic=True makes it symbolic at once; a 0-d
                      tensor works with any setting.
4. the _BIAS cache    `S not in _BIAS` needs S's value while tracing: Dynamo
                      specializes S (a new S fails a size guard even with
                      dynamic=True) and guards on the dict's contents. The
                      bias is a handful of elementwise ops: compute it in the
                      graph, from a symbolic S.

Nothing else changes: the output is the starter's, bit for bit in eager mode.
"""

import math

import torch

SLOPE = 0.125


def step(x, lengths, temperature):
    B, S, D = x.shape
    pos = torch.arange(S, device=x.device)
    valid = pos[None, :] < lengths[:, None]
    # 4: the bias from a symbolic S, in the graph (no cache to guard on).
    bias = -SLOPE * (pos[None, :] - pos[:, None]).abs().to(torch.float32)
    scores = x @ x.transpose(1, 2) / (temperature * math.sqrt(D)) + bias
    scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    out = torch.softmax(scores, dim=-1) @ x
    return out * valid[..., None]


def compile_step(backend):
    # 1 and 3: shape-generic (and float-generic) from the first trace.
    compiled = torch.compile(step, backend=backend, dynamic=True)

    def run(x, lengths, temperature):
        # 2 and 3: the list and the float become data before the compiled
        # call sees them (torch 2.11's Dynamo guards a float on its value
        # even with dynamic=True: measured on the H200, 8 graphs for 8 requests).
        t = torch.tensor(temperature, dtype=x.dtype, device=x.device)
        return compiled(x, torch.tensor(lengths, device=x.device), t)

    return run


def example_stream(seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for B, S in [(4, 16), (4, 16), (2, 16), (4, 40), (3, 7), (8, 64)]:
        x = torch.randn(B, S, 32, generator=g)
        lengths = torch.randint(1, S + 1, (B,), generator=g).tolist()
        out.append((x, lengths, 0.5 + 1.5 * torch.rand((), generator=g).item()))
    return out


if __name__ == "__main__":
    from torch._dynamo.testing import CompileCounter

    counter = CompileCounter()
    run = compile_step(counter)
    for x, lengths, t in example_stream():
        run(x, lengths, t)
    print(f"graphs compiled: {counter.frame_count}")
