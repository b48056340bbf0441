"""The audit's profiler on a GPU: torch's kernels and a device-to-host copy
must show (its CUDA activity), gpulab's own ranges must not. Exits 1 if not.
Usage on the GPU machine: python3 scripts/tools/audit_gpu.py"""

from __future__ import annotations

import sys
import time

import torch

from gpulab.sandbox import audit


def main() -> int:
    x = torch.randn(1024, 1024, device="cuda")
    torch.softmax(x, -1)  # CUDA and cuBLAS/cuDNN warm, outside the audit
    torch.cuda.synchronize()
    ok = True
    t = time.perf_counter()
    a = audit.Audit("cuda")
    with a:
        torch.softmax(x, -1)
        x.sum(0).cpu()
        torch.cuda.synchronize()
    found = a.findings(set())
    gpu = sum(1 for e in a.events if audit._on_gpu(e))
    print("GPU events:", [e.name[:100] for e in a.events if audit._on_gpu(e)])
    print(
        f"torch ops: {found} ({gpu} GPU events of {len(a.events)}, {time.perf_counter() - t:.3f} s)"
    )
    ok &= not a.unavailable and any("softmax" in f for f in found)
    ok &= any("device-to-host" in f for f in found)
    b = audit.Audit("cuda")
    with b:
        with audit.own():
            torch.softmax(x, -1)
        torch.cuda.synchronize()
    print(f"gpulab's own: {b.findings(set())}")
    ok &= b.findings(set()) == []
    span = audit.SpanAudit("cuda")
    with span.window():
        torch.exp(x)
        torch.cuda.synchronize()
    windows = span.close()
    print(f"span window: {windows}")
    ok &= bool(windows) and any("exp" in f for f in windows[0])
    print("dynamo imported:", "torch._dynamo" in sys.modules)
    print("AUDIT GPU", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
