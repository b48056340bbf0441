"""Lesson 07 — profiling: mark the phases of a training step with named ranges.

A profile of a training step is thousands of rows of aten:: operators and
kernels. Named ranges turn it into a few labelled blocks you can read at a
glance, in torch.profiler's trace (Perfetto, chrome://tracing) and on the
NVTX row of Nsight Systems.

Annotate `train_step` below with five ranges, named exactly:

    train_step          the whole step (zero_grad included)
      forward           model(x)
      loss              the cross-entropy
      backward          loss.backward()
      optimizer_step    optimizer.step()

Contract (the grader checks all of it):
  * Each range is a `torch.profiler.record_function(name)` (a context manager:
    `with torch.profiler.record_function("forward"): ...`). That is what the
    grader finds in the profile, on the CPU and on a GPU.
  * The four phases sit inside train_step, in that order, one after the other
    (no overlap), each exactly once per step, each around its own work and
    nothing else's.
  * On a GPU, also push a `torch.cuda.nvtx` range with the same name, so
    Nsight Systems shows it without any torch.profiler help (not graded; the
    result says whether it saw them). torch.cuda.nvtx raises on a CPU-only
    torch build: guard it with torch.cuda.is_available().
  * The step must train exactly as it does now (same losses, same weights)
    and return the loss tensor.

Grade: pass or fail, no letter.

Run `gpulab check nvtx_profile`; the result names the trace file it wrote.
`gpulab profile nvtx_profile` shows the top operations, and, where Nsight
Systems is installed, `gpulab profile nvtx_profile --nsys` records a timeline.
"""

from contextlib import contextmanager

import torch  # noqa: F401  (you will need it)
import torch.nn.functional as F


@contextmanager
def annotate(name):
    # TODO: open a torch.profiler.record_function(name) range (and, when CUDA
    #       is available, a torch.cuda.nvtx range) around the body of the with.
    yield


def train_step(model, batch, optimizer):
    x, y = batch
    # TODO: wrap the whole step in annotate("train_step"), and each phase in
    #       its own range: "forward", "loss", "backward", "optimizer_step".
    optimizer.zero_grad(set_to_none=True)
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    optimizer.step()
    return loss.detach()
