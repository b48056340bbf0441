"""Reference for lesson 06, step 2: CUDA graphs (reduce-overhead), applied
and measured.

compile_step compiles the model with mode="reduce-overhead": Inductor's
kernels, recorded once as a CUDA graph and replayed with one launch a call.
Each call marks a new step first (torch.compiler.cudagraph_mark_step_begin):
the last call's output lives in the graph's memory pool, which the next
replay overwrites, and the mark says nobody holds on to it.

time_per_call is the lesson's method: warm up (a few calls: the compile,
the warm-up run, the recording), wait for the device, then time many calls
with the host's clock and wait for the device again before reading it
(the calls only queue work), and divide by the number of calls.
"""

import time

import torch
import torch.nn as nn
import torch.nn.functional as F

WIDTH, DEPTH, BATCH = 256, 8, 8


class Model(nn.Module):
    """DEPTH residual blocks (layer norm, linear, GELU) on (batch, WIDTH)."""

    def __init__(self, width: int = WIDTH, depth: int = DEPTH) -> None:
        super().__init__()
        self.norms = nn.ModuleList(nn.LayerNorm(width) for _ in range(depth))
        self.linears = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for norm, linear in zip(self.norms, self.linears, strict=True):
            x = x + F.gelu(linear(norm(x)))
        return x


def compile_step(model):
    compiled = torch.compile(model, mode="reduce-overhead")

    def step(x):
        torch.compiler.cudagraph_mark_step_begin()
        return compiled(x)

    return step


def time_per_call(step, x, sync, warmup=5, calls=100):
    for _ in range(warmup):
        step(x)
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        step(x)
    sync()
    return (time.perf_counter() - start) * 1e3 / calls


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    model = Model().to(device).eval()
    x = torch.randn(BATCH, WIDTH, device=device)
    with torch.no_grad():
        eager = time_per_call(model, x, sync)
        fast = time_per_call(compile_step(model), x, sync)
    print(f"eager {eager * 1e3:.1f} µs a call, compiled {fast * 1e3:.1f} µs: {eager / fast:.2f}x")
