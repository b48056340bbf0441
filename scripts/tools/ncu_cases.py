"""One kernel call per case, for Nsight Compute to count: the counter
evidence behind BENCHMARKS.md's "what limits it" sections.

    ncu --profile-from-start off --csv --page details ... \
        python3 scripts/tools/ncu_cases.py CASE

Each case builds its inputs, calls the kernel a few times (so autotuning,
the softmax chooser and compilation are over), then brackets exactly one
call with cudaProfilerStart/Stop: ncu, started with --profile-from-start
off, profiles the kernels of that call and nothing else.

Cases (the bench's shapes):
  copy_134mb        torch's copy of a 4096x16384 fp16 tensor (134 MB each way)
  softmax_16k       kernels/softmax.py on 4096x16384 fp16 (whichever launcher it picks)
  softmax_32k       kernels/softmax.py on 2048x32768 fp16
  softmax_16k@NAME  one of softmax.py's launchers, forced ("_" for " " in NAME, e.g.
                    softmax_32k@smem_c64_w16_p1): its first-call chooser times the
                    candidates, and under ncu's interception those times mislead
  neg_134mb         torch.neg of a 4096x16384 fp16 tensor: an elementwise read and
                    write of the same bytes as a kernel (torch's copy_ of
                    contiguous tensors is a cudaMemcpy, which ncu does not profile)
  torch_softmax_32k torch.softmax on 2048x32768 fp16
  rope_1x           kernels/rope_rmsnorm.py forward, 1x16384x32x128 bf16
  rope_1x@HEADS     its forward kernel with HEADS heads a program (8, 16 or 32: the
                    tiles its autotuner chooses among), for the cost model's test
                    (tests/perf/test_costmodel_h200.py: the count says 1.18, 1.06
                    and 1.00 times the minimum bytes read)
  strided_read      a Triton copy reading every other fp32 of a 2**27 buffer (2**26
                    out): the cost model counts 2x the bytes asked for (32-byte
                    sectors, half of each used)
  matmul_8k         kernels/matmul.py, 8192^3 bf16
  cublas_8k         torch.matmul (cuBLAS), 8192^3 bf16
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


@triton.jit
def _strided(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + 2 * offs))


def _case(name: str):
    """(callable, description) for one case; inputs are built here."""
    dev = "cuda"
    if name == "copy_134mb":
        x = torch.randn(4096, 16384, device=dev, dtype=torch.float16)
        y = torch.empty_like(x)
        return lambda: y.copy_(x)
    if name == "neg_134mb":
        x = torch.randn(4096, 16384, device=dev, dtype=torch.float16)
        y = torch.empty_like(x)
        return lambda: torch.neg(x, out=y)
    base, _, launcher = name.partition("@")
    if base in ("softmax_16k", "softmax_32k", "torch_softmax_32k"):
        from kernels import softmax as sm

        shape = (4096, 16384) if base == "softmax_16k" else (2048, 32768)
        x = torch.randn(*shape, device=dev, dtype=torch.float16)
        if base.startswith("torch"):
            return lambda: torch.softmax(x, dim=-1)
        if not launcher:
            return lambda: sm.softmax(x)
        launchers = sm._candidates(x)
        fn = launchers.get(launcher.replace("_", " "))
        if fn is None:
            raise SystemExit(f"{name}: no launcher {launcher!r}; there are {sorted(launchers)}")
        y = torch.empty_like(x)
        return lambda: fn(x, y)
    if base == "rope_1x":
        from kernels import rope_rmsnorm as rr

        S, H, D = 16384, 32, 128
        x = torch.randn(1, S, H, D, device=dev, dtype=torch.bfloat16)
        w = torch.randn(D, device=dev, dtype=torch.bfloat16)
        ang = torch.rand(S, D // 2, device=dev)
        cos, sin = ang.cos(), ang.sin()
        if not launcher:
            return lambda: rr.rmsnorm_rope(x, w, cos, sin)
        heads = int(launcher)
        y = torch.empty_like(x)
        args = (x, w, cos, sin, y, S, H, *x.stride()[:3], cos.stride(0), 1e-6)
        grid = (S, triton.cdiv(H, heads))
        warps = rr._num_warps(heads, D)
        return lambda: rr._rmsnorm_rope_fwd[grid](
            *args, D=D, HALF=D // 2, BLOCK_H=heads, num_warps=warps
        )
    if name == "strided_read":
        x = torch.randn(2**27, device=dev)
        y = torch.empty(2**26, device=dev)
        return lambda: _strided[(2**26 // 1024,)](x, y, BLOCK=1024)
    if name in ("matmul_8k", "cublas_8k"):
        a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
        b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
        if name == "cublas_8k":
            return lambda: a @ b
        from kernels.matmul import matmul

        return lambda: matmul(a, b)
    raise SystemExit(f"unknown case {name!r}; see the docstring")


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    fn = _case(sys.argv[1])
    for _ in range(5):  # compile, autotune, choose; then a warm call or two
        fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print(f"{sys.argv[1]}: profiled one call", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
