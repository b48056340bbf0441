"""Trusted grading on a GPU: honest references through the judge (CUDA IPC,
judge-timed batches), beside the bench's in-process timing, and cheats
that must fail. Usage: python scripts/tools/trusted_grading_gpu.py OUT.json [EX ...]"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from gpulab.content import load_course  # noqa: E402
from gpulab.runner import run_check  # noqa: E402

CACHED = """
_real = softmax
_cache = {}

def softmax(x):
    key = (tuple(x.shape), x.dtype, x.stride())
    if key in _cache:
        return _cache[key].clone()
    out = _real(x)
    _cache[key] = out.clone()
    return out
"""

# The timed call only copies x; a hook on Tensor.copy_ (the sandbox's copy of
# the result into the judge's slot, after the end event) runs the real kernel.
HOOKED = """
import torch as _torch
_real = softmax
_copy = _torch.Tensor.copy_
_pending = {}

def _hooked(self, src, *a, **k):
    x = _pending.pop(src.data_ptr(), None)
    if x is not None:
        src = _real(x)
    return _copy(self, src, *a, **k)

_torch.Tensor.copy_ = _hooked

def softmax(x):
    if _torch._C._is_torch_function_mode_enabled():
        return _real(x)  # the guarded correctness calls
    out = _torch.empty_like(x)
    _copy(out, x)
    _pending[out.data_ptr()] = x
    return out
"""

# The same, through a dispatch mode left on at import: it sees the sandbox's
# aten.copy_ into the judge's slot even where Tensor.copy_ was taken early.
DISPATCH = """
import torch as _torch
from torch.utils._python_dispatch import TorchDispatchMode as _Mode
_real = softmax
_pending = {}

class _Hook(_Mode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is _torch.ops.aten.copy_.default and args[1].data_ptr() in _pending:
            return func(args[0], _real(_pending.pop(args[1].data_ptr())))
        return func(*args, **kwargs)

_Hook().__enter__()

def softmax(x):
    if _torch._C._is_torch_function_mode_enabled():
        return _real(x)
    out = _torch.empty_like(x)
    out.copy_(x)
    _pending[out.data_ptr()] = x
    return out
"""


# Torch doing the work where the op guards (Python modes) cannot see it; the
# profiler's audit (CUPTI's kernel list on a GPU) must.
THREAD = """
import threading as _th
import torch as _torch
_real = softmax

def softmax(x):
    out = _real(x)
    box = {}
    t = _th.Thread(target=lambda: box.update(y=_torch.softmax(x.float(), -1).to(x.dtype)))
    t.start(); t.join()
    out.copy_(box["y"])
    return out
"""

MODES_OFF = """
import torch as _torch
from torch.utils._python_dispatch import _disable_current_modes as _off
_real = softmax

def softmax(x):
    out = _real(x)
    with _off(), _torch._C.DisableTorchFunction():
        y = _torch.exp(x.float() - x.float().amax(-1, keepdim=True))
        out.copy_((y / y.sum(-1, keepdim=True)).to(x.dtype))
    return out
"""

NUMPY = """
import numpy as _np
import torch as _torch
_real = softmax

def softmax(x):
    out = _real(x)
    a = x.float().cpu().numpy()
    e = _np.exp(a - a.max(-1, keepdims=True))
    out.copy_(_torch.from_numpy(e / e.sum(-1, keepdims=True)).to(out.device, out.dtype))
    return out
"""


def summarise(r: dict) -> dict:
    t = r.get("timing") or {}
    return {
        "status": r["status"],
        "summary": r["summary"],
        "message": r.get("message", "")[-600:],
        "isolation": r.get("isolation"),
        "verdict": r.get("verdict"),
        "duration_s": r.get("duration_s"),
        "cases": [
            {
                k: c.get(k)
                for k in (
                    "shape",
                    "dtype",
                    "ms",
                    "reps",
                    "rse",
                    "roofline_fraction",
                    "speedup",
                    "batch_reps",
                    "judge_flush_ms",
                    "judge_copy_ms",
                    "batches",
                    "clocks",
                )
            }
            for c in t.get("cases", [])
        ],
    }


def main() -> None:
    out_path = Path(sys.argv[1])
    exercises = sys.argv[2:] or [
        "softmax",
        "bandwidth",
        "matmul",
        "rope_rmsnorm",
        "flash_attention",
    ]
    course = load_course()
    results: dict = {}
    tmp = Path("/tmp/trusted")
    tmp.mkdir(exist_ok=True)
    for ex in exercises:
        t0 = time.time()
        r = run_check(
            course.find(ex),
            REPO / "kernels" / f"{ex}.py",
            device="cuda",
            timeout=500,
            extra={"workspace": "/tmp/gpulab-ws"},
        )
        results[f"honest:{ex}"] = summarise(r)
        if ex == "rope_rmsnorm":
            results[f"honest:{ex}"]["notes"] = r.get("notes", [])[-8:]
        print(ex, r["status"], r["summary"][:200], f"{time.time() - t0:.0f}s", flush=True)
        out_path.write_text(json.dumps(results, indent=1))
    ref = (REPO / "kernels" / "softmax.py").read_text()
    cheats = (
        ("cached", CACHED),
        ("hooked-copy", HOOKED),
        ("dispatch-hook", DISPATCH),
        ("thread", THREAD),
        ("modes-off", MODES_OFF),
        ("numpy", NUMPY),
    )
    for name, tail in cheats:
        f = tmp / f"{name}.py"
        f.write_text(ref + tail)
        r = run_check(
            course.find("softmax"),
            f,
            device="cuda",
            timeout=500,
            extra={"workspace": "/tmp/gpulab-ws"},
        )
        results[f"cheat:{name}"] = summarise(r)
        print(name, r["status"], r["summary"][:300], flush=True)
        out_path.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
