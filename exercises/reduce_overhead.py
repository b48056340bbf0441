"""Lesson 06, step 2 of 3 — reduce-overhead: CUDA graphs, applied and measured.

`Model` below is eight small residual blocks (layer norm, linear, GELU, add)
on a batch of 8 vectors of 256: some 30 kernels a call, each a few
microseconds of work. Launching them costs the CPU more than running them
costs the GPU: the step is launch-bound (the lesson's "Worked numbers").
Leave Model as it is.

Write two functions:

  compile_step(model)   the model compiled with CUDA graphs, so that a
                        call replays every kernel with one launch:
                        torch.compile with mode="reduce-overhead". Return
                        something to call as step(x).

  time_per_call(step, x, sync)
                        the milliseconds one call of step(x) takes once
                        warm, measured with the host's clock
                        (time.perf_counter). `sync()` waits until the
                        device has finished all the work queued so far (on
                        a GPU it is torch.cuda.synchronize; on a CPU it does
                        nothing). A call only queues work, and the first
                        calls compile and record: the method is the lesson.

Run this file on a GPU: it times the model as it is and compiled, with
your method, and prints the speedup you measured.

The check (`gpulab check reduce_overhead`):
  * times two simulated devices with your time_per_call, one launch-bound
    and one busy, whose first three calls are slow (a compile, a recording):
    your figure must be within 0.7x-1.6x of their true time per call;
  * calls compile_step on gpulab's weights: it must ask torch.compile for
    CUDA graphs, and the result must compute the model (on the CPU, where
    there are no CUDA graphs, Dynamo's eager backend runs the graph);
  * on a GPU, gpulab times the model as it is in its own process and your
    compiled step around whole requests to the sandbox: yours must be at
    least 2x faster, and the speedup your method measures must agree with
    gpulab's within 1.5x.

Grade: pass or fail, no letter.
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
    # TODO: compile the model with CUDA graphs (mode="reduce-overhead").
    #       Its output lives in memory the next replay overwrites: in a loop,
    #       call torch.compiler.cudagraph_mark_step_begin() before each call.
    return model


def time_per_call(step, x, sync):
    # TODO: warm up first (the first calls compile, then record the graph),
    #       wait for the device, time many calls, and wait for the device
    #       again before reading the clock. Return milliseconds per call.
    start = time.perf_counter()
    step(x)
    return (time.perf_counter() - start) * 1e3


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    model = Model().to(device).eval()
    x = torch.randn(BATCH, WIDTH, device=device)
    with torch.no_grad():
        eager = time_per_call(model, x, sync)
        fast = time_per_call(compile_step(model), x, sync)
    print(f"eager {eager * 1e3:.1f} µs a call, compiled {fast * 1e3:.1f} µs: {eager / fast:.2f}x")
    if device == "cpu":
        print("(no CUDA graphs on a CPU: run it on a GPU for the speedup the step is about)")
