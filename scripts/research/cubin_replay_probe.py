"""Can a process that never imports a kernel's Python launch the kernel
another process compiled, from its cubin and launch metadata alone?

(issue 44: replay compiled kernels on the GPU.) Two processes:

  capture: imports a reference (kernels/EX.py), calls it twice on GPU
    inputs (the first call may time candidates), and during the second
    records every launch: the compiled kernel (cubin, the metadata JSON
    from Triton's cache, signature, constants, argument names), the grid,
    the arguments (tensors by storage, with their bytes at first sight;
    TMA descriptors by their parts) and each storage's bytes after the
    call.
  replay: a fresh process that imports torch and Triton only. It rebuilds
    each kernel as triton.compiler.CompiledKernel from files it writes
    itself (no Python source, a stand-in `src` that holds the signature),
    launches the recorded launches on buffers made from the recorded
    bytes, and compares every storage with the capture's, byte for byte.
    It times the rebuild (first launch, the launcher's build included)
    and a launch through the rebuilt kernel against the JIT's.

Usage (GPU): python scripts/research/cubin_replay_probe.py OUT.json [EX ...]
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXERCISES = ["bandwidth", "softmax", "matmul", "flash_attention", "rope_rmsnorm"]


def _inputs(ex: str):
    import torch

    g = torch.Generator(device="cuda").manual_seed(0)
    r = lambda *s, dt=torch.float16: torch.randn(*s, device="cuda", generator=g).to(dt)  # noqa: E731
    if ex == "bandwidth":
        return (r(1 << 22, dt=torch.float32), r(1 << 22, dt=torch.float32), 1.5), {}
    if ex == "softmax":
        return (r(2048, 32768),), {}
    if ex == "matmul":
        return (r(4096, 4096, dt=torch.bfloat16), r(4096, 4096, dt=torch.bfloat16)), {}
    if ex == "flash_attention":
        q, k, v = (r(2, 16, 4096, 128, dt=torch.bfloat16) for _ in range(3))
        return (q, k, v), {"causal": True}
    if ex == "rope_rmsnorm":
        x = r(4, 2048, 32, 128, dt=torch.bfloat16)
        w = r(128, dt=torch.bfloat16)
        ang = torch.rand(2048, 64, device="cuda", generator=g)
        return (x, w, ang.cos(), ang.sin()), {}
    raise SystemExit(f"no inputs for {ex}")


def _function(ex: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(ex, ROOT / "kernels" / f"{ex}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[ex] = mod
    spec.loader.exec_module(mod)
    names = {"bandwidth": "triad", "flash_attention": "attention", "rope_rmsnorm": "rmsnorm_rope"}
    return getattr(mod, names.get(ex, ex))


def capture(ex: str, path: str) -> None:
    import inspect

    import torch
    from triton.compiler.compiler import CompiledKernel
    from triton.runtime.jit import JITFunction

    from gpulab.sandbox.replay import _descriptor

    fn = _function(ex)
    args, kwargs = _inputs(ex)
    fn(*args, **kwargs)
    torch.cuda.synchronize()

    kernels: dict[str, dict] = {}
    launches: list[dict] = []
    storages: dict[int, dict] = {}  # data_ptr -> {index, first bytes, storage}

    def buf(t: torch.Tensor) -> dict:
        st = t.untyped_storage()
        p = st.data_ptr()
        if p not in storages:
            raw = torch.empty(0, dtype=torch.uint8, device=t.device).set_(st).clone()
            storages[p] = {"index": len(storages), "first": raw, "st": st}
        return {
            "buf": storages[p]["index"],
            "offset": t.storage_offset(),
            "shape": list(t.shape),
            "stride": list(t.stride()),
            "dtype": str(t.dtype).replace("torch.", ""),
        }

    def enc(v):
        if isinstance(v, torch.Tensor):
            return {"t": buf(v)}
        d = _descriptor(v)
        if d is not None:
            base, shape, strides, block, padding, tf32, layout = d
            return {
                "desc": buf(base),
                "shape": shape,
                "strides": strides,
                "block": block,
                "padding": padding,
                "tf32": tf32,
                "layout": None
                if layout is None
                else [layout.kind, [list(f) for f in layout.fields]],
            }
        if isinstance(v, (tuple, list)):
            return {"tuple": [enc(x) for x in v]}
        if hasattr(v, "value") and type(v).__name__ == "constexpr":
            return enc(v.value)
        if type(v).__name__ == "dtype":
            return {"tldtype": v.name}
        return {"v": v}

    def keep(kernel) -> str:
        h = kernel.hash
        if h not in kernels:
            group = kernel.metadata_group
            meta_path = next(p for c, p in group.items() if c.endswith(".json"))
            src = kernel.src
            kernels[h] = {
                "name": kernel.name,
                "cubin": kernel.asm["cubin"],
                "metadata_json": Path(meta_path).read_text(),
                "signature": dict(src.signature),
                "constants": [
                    [list(k) if isinstance(k, tuple) else k, repr(v)]
                    for k, v in src.constants.items()
                ],
                "constants_raw": {
                    str(k): v
                    for k, v in src.constants.items()
                    if isinstance(v, (int, float, bool, str, type(None)))
                },
                "arg_names": list(src.fn.arg_names),
            }
        return h

    orig_run = JITFunction.run
    orig_get = CompiledKernel.__getitem__
    state = {"on": False}

    def run(self, *a, grid, warmup, **kw):
        kernel = orig_run(self, *a, grid=grid, warmup=warmup, **kw)
        if state["on"] and not warmup and kernel is not None:
            sig = inspect.signature(self.fn)
            names = list(sig.parameters)
            bound = sig.bind_partial(*a, **{k: v for k, v in kw.items() if k in names})
            bound.apply_defaults()
            g = grid(bound.arguments) if callable(grid) else grid
            g = list(g) + [1] * (3 - len(g))
            launches.append(
                {
                    "kernel": keep(kernel),
                    "grid": g,
                    "args": [enc(bound.arguments[n]) for n in names],
                }
            )
        return kernel

    def getitem(self, grid):
        runner = orig_get(self, grid)

        def go(*a, stream=None):
            if state["on"]:
                g = list(grid) + [1] * (3 - len(grid))
                launches.append({"kernel": keep(self), "grid": g, "args": [enc(x) for x in a]})
            return runner(*a, stream=stream)

        return go

    JITFunction.run = run
    CompiledKernel.__getitem__ = getitem
    # First bytes are taken when a launch first sees a buffer; outputs written
    # by a launch are seen before it (JIT run records after: so snapshot at entry).
    pre_run = JITFunction.run

    def run_snap(self, *a, grid, warmup, **kw):
        if state["on"] and not warmup:
            for v in list(a) + list(kw.values()):
                if isinstance(v, torch.Tensor):
                    buf(v)
                elif _descriptor(v) is not None:
                    buf(_descriptor(v)[0])
        return pre_run(self, *a, grid=grid, warmup=warmup, **kw)

    JITFunction.run = run_snap

    def getitem_snap(self, grid):
        inner = getitem(self, grid)

        def go(*a, stream=None):
            if state["on"]:
                for v in a:
                    if isinstance(v, torch.Tensor):
                        buf(v)
                    elif _descriptor(v) is not None:
                        buf(_descriptor(v)[0])
            return inner(*a, stream=stream)

        return go

    CompiledKernel.__getitem__ = getitem_snap
    state["on"] = True
    t0 = time.perf_counter()
    fn(*args, **kwargs)
    torch.cuda.synchronize()
    call_s = time.perf_counter() - t0
    state["on"] = False
    # The JIT's launch cost, for comparison with the rebuilt kernel's.
    n = 200
    t0 = time.perf_counter()
    for _ in range(n):
        fn(*args, **kwargs)
    torch.cuda.synchronize()
    per_call_us = (time.perf_counter() - t0) / n * 1e6
    out = {
        "kernels": kernels,
        "launches": launches,
        "first": {s["index"]: s["first"].cpu().numpy().tobytes() for s in storages.values()},
        "after": {
            s["index"]: torch.empty(0, dtype=torch.uint8, device="cuda")
            .set_(s["st"])
            .cpu()
            .numpy()
            .tobytes()
            for s in storages.values()
        },
        "call_s": call_s,
        "jit_call_us": per_call_us,
    }
    with open(path, "wb") as f:
        pickle.dump(out, f)


def replay(path: str) -> dict:
    import types

    import torch
    from triton.compiler.compiler import CompiledKernel

    with open(path, "rb") as f:
        rec = pickle.load(f)
    folder = Path(tempfile.mkdtemp(prefix="cubin-replay-"))
    built: dict[str, CompiledKernel] = {}
    timings: dict[str, dict] = {}
    for h, k in rec["kernels"].items():
        t0 = time.perf_counter()
        d = folder / h
        d.mkdir()
        (d / f"{k['name']}.cubin").write_bytes(k["cubin"])
        (d / f"{k['name']}.json").write_text(k["metadata_json"])
        constants = {}
        for key, _ in k["constants"]:
            name_or_idx = tuple(key) if isinstance(key, list) else key
            # the value as the JIT passed it; the launcher needs only the keys
            constants[name_or_idx] = k["constants_raw"].get(str(name_or_idx), None)
        src = types.SimpleNamespace(
            signature=k["signature"],
            constants=constants,
            fn=types.SimpleNamespace(arg_names=k["arg_names"]),
        )
        group = {
            f"{k['name']}.cubin": str(d / f"{k['name']}.cubin"),
            f"{k['name']}.json": str(d / f"{k['name']}.json"),
        }
        ck = CompiledKernel(src, group, h)
        ck._init_handles()
        built[h] = ck
        timings[h] = {
            "name": k["name"],
            "rebuild_s": time.perf_counter() - t0,
            "signature": k["signature"],
        }

    from gpulab.sandbox.replay_run import _decode
    from gpulab.wire.launch_record import DescArg, DescLayout, View

    bufs = [
        torch.frombuffer(bytearray(rec["first"][i]), dtype=torch.uint8).cuda()
        for i in range(len(rec["first"]))
    ]

    def view(v):
        return View(v["buf"], v["offset"], tuple(v["shape"]), tuple(v["stride"]), v["dtype"])

    def dec(a):
        if "t" in a:
            from gpulab.sandbox.replay_run import _view

            return _view(bufs, view(a["t"]))
        if "desc" in a:
            layout = (
                None
                if a["layout"] is None
                else DescLayout.parse([a["layout"][0], dict((n, x) for n, x in a["layout"][1])])
            )
            return _decode(
                DescArg(
                    view(a["desc"]),
                    tuple(a["shape"]),
                    tuple(a["strides"]),
                    tuple(a["block"]),
                    a["padding"],
                    a["tf32"],
                    layout,
                ),
                bufs,
            )
        if "tuple" in a:
            return tuple(dec(x) for x in a["tuple"])
        if "tldtype" in a:
            import triton.language as tl

            return tl.dtype(a["tldtype"])
        return a["v"]

    launch_args = [
        (built[la["kernel"]], tuple(la["grid"]), [dec(a) for a in la["args"]])
        for la in rec["launches"]
    ]
    t0 = time.perf_counter()
    for ck, grid, args in launch_args:
        ck[grid](*args)
    torch.cuda.synchronize()
    first_s = time.perf_counter() - t0
    same = {}
    for i, b in enumerate(bufs):
        same[i] = b.cpu().numpy().tobytes() == rec["after"][i]
    n = 200
    t0 = time.perf_counter()
    for _ in range(n):
        for ck, grid, args in launch_args:
            ck[grid](*args)
    torch.cuda.synchronize()
    per_call_us = (time.perf_counter() - t0) / n * 1e6
    return {
        "kernels": list(timings.values()),
        "launches": len(rec["launches"]),
        "identical_buffers": same,
        "all_identical": all(same.values()),
        "replay_first_launches_s": first_s,
        "replay_call_us": per_call_us,
        "jit_call_us": rec["jit_call_us"],
        "capture_call_s": rec["call_s"],
    }


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] in ("--capture", "--replay"):
        if sys.argv[1] == "--capture":
            capture(sys.argv[2], sys.argv[3])
        else:
            print(json.dumps(replay(sys.argv[2])))
        return
    out_path = sys.argv[1]
    exs = sys.argv[2:] or EXERCISES
    import torch
    import triton

    results: dict = {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "device": torch.cuda.get_device_name(),
        "date": time.strftime("%Y-%m-%d"),
    }
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for ex in exs:
        rec = os.path.join(tempfile.mkdtemp(), f"{ex}.pkl")
        t0 = time.perf_counter()
        p = subprocess.run(
            [sys.executable, __file__, "--capture", ex, rec],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        row: dict = {"capture_rc": p.returncode, "capture_wall_s": time.perf_counter() - t0}
        if p.returncode:
            row["capture_err"] = p.stderr[-3000:]
        else:
            # A cache of its own: nothing the capture compiled is found by name.
            env2 = dict(env, TRITON_CACHE_DIR=tempfile.mkdtemp(prefix="replay-cache-"))
            t0 = time.perf_counter()
            q = subprocess.run(
                [sys.executable, __file__, "--replay", rec],
                env=env2,
                capture_output=True,
                text=True,
                timeout=300,
            )
            row["replay_rc"] = q.returncode
            row["replay_wall_s"] = time.perf_counter() - t0
            if q.returncode:
                row["replay_err"] = q.stderr[-3000:]
            else:
                row.update(json.loads(q.stdout.strip().splitlines()[-1]))
        results[ex] = row
        print(ex, json.dumps({k: v for k, v in row.items() if k != "kernels"})[:900], flush=True)
        with open(out_path, "w") as f:
            json.dump(results, f, indent=1, default=str)


if __name__ == "__main__":
    main()
