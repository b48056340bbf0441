"""Where the GPU time of lesson 06's fixed step goes, per compile mode.

The reference step (kernels/graph_breaks.py) at 8x256x256 fp32 on a GPU, run
from the repo root: eager, torch.compile default and reduce-overhead, each
timed with CUDA events over 200 steps after 20 warm-up steps, then profiled
over 50 steps with torch.profiler; prints each mode's step time, kernels a
step, their summed device time a step (record_function ranges left out) and
the top ten. Raw output of the H200 run:
benchmarks/h200-2026-12-03-pm/compile-modes-profile.txt.
"""

import sys
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity as A
from torch.profiler import profile

sys.path.insert(0, "kernels")
import graph_breaks as ref  # noqa: E402

x, lens, p = ref.example_inputs(batch=8, seq=256, dim=256)
d = "cuda"
a = (x.to(d), lens.to(d), {k: v.to(d) for k, v in p.items()})


def timed(f, n=200):
    for _ in range(20):
        f(*a)
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(True), torch.cuda.Event(True)
    s.record()
    for _ in range(n):
        f(*a)
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) * 1e3 / n


modes = [
    ("eager", ref.step),
    ("default", torch.compile(ref.step)),
    ("reduce-overhead", torch.compile(ref.step, mode="reduce-overhead")),
]
for name, f in modes:
    us = timed(f)
    n = 50
    with profile(activities=[A.CPU, A.CUDA]) as pr:
        for _ in range(n):
            f(*a)
        torch.cuda.synchronize()
    per = defaultdict(lambda: [0, 0.0])
    for ev in pr.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA and not (
            "#" in ev.name and "(" not in ev.name
        ):
            per[ev.name][0] += 1
            per[ev.name][1] += ev.device_time
    rows = sorted(per.items(), key=lambda kv: -kv[1][1])
    tot = sum(v[1] for _, v in rows) / n
    k = sum(v[0] for _, v in rows) / n
    print(
        f"== {name}: step {us:.1f} us (events, 200 steps), {k:.0f} kernels/step, "
        f"kernel device time {tot:.1f} us/step"
    )
    for nm, v in rows[:10]:
        print(f"  {v[1] / n:7.1f} us {v[0] / n:4.1f}x {nm[:120]}")
