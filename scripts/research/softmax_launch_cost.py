"""Where the Gluon softmax's time goes on a GPU: for each candidate of
kernels/softmax.py (its Triton kernel and the shared-memory kernel's
configurations through their Launcher, and again through Gluon's JIT on
every call), the host
(Python) time of a launch, the time back to back
(triton.testing.do_bench) and the GPU time with the L2 flushed between calls
(gpulab's harness, which hides host time), on the two widest fp16 shapes.
Raw: benchmarks/h200-2026-11-30/softmax-launch-cost.txt.

    python3 scripts/research/softmax_launch_cost.py     # from the repo root, on sm_90
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import triton  # noqa: E402

from gpulab.measure.timing import L2Flusher, measure  # noqa: E402


def main() -> int:
    spec = importlib.util.spec_from_file_location("ref_softmax", ROOT / "kernels" / "softmax.py")
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    flusher = L2Flusher()
    for rows, cols in ((2048, 32768), (4096, 16384)):
        x = torch.randn(rows, cols, device="cuda", dtype=torch.float16)
        y = torch.empty_like(x)
        launchers = ref._candidates(x)
        print("candidates", list(launchers), flush=True)
        ref._launch_triton(x, y)
        want = y.float()
        for name, fn in launchers.items():
            fn(x, y)  # the first call compiles
            got = torch.full_like(y, float("nan"))
            fn(x, got)
            torch.cuda.synchronize()
            err = float((got.float() - want).abs().max())
            t0 = time.perf_counter()
            for _ in range(50):
                fn(x, got)
            host = (time.perf_counter() - t0) / 50 * 1e6
            torch.cuda.synchronize()

            def call(fn=fn, x=x, got=got):
                fn(x, got)

            back = triton.testing.do_bench(call, warmup=10, rep=40) * 1e3
            gpu = measure(call, flusher=flusher, log_clocks=False)["ms"] * 1e3
            print(
                f"{rows}x{cols} {name:20} err {err:.1e} host {host:6.1f} us  "
                f"do_bench {back:6.1f} us  measure {gpu:6.1f} us",
                flush=True,
            )
        # The same configurations through the JIT on every call (what the
        # launcher did before it kept its compiled kernel), for the record.
        smem = ref._smem_module()
        for cr, warps, per_sm in ref.SMEM_CONFIGS:
            slots = 200 * 1024 // per_sm // (cr * smem.BOX * x.element_size())
            if not smem.supported(x, slots, cr, per_sm):
                continue
            run = functools.partial(
                smem.launch, x, y, slots=slots, chunk_rows=cr, num_warps=warps, per_sm=per_sm
            )
            run()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(50):
                run()
            host = (time.perf_counter() - t0) / 50 * 1e6
            torch.cuda.synchronize()
            back = triton.testing.do_bench(run, warmup=10, rep=40) * 1e3
            print(
                f"{rows}x{cols} via JIT c{cr} w{warps} p{per_sm:<7} host {host:6.1f} us  "
                f"do_bench {back:6.1f} us",
                flush=True,
            )
        print("choose ->", ref._choose(x, y, launchers), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
