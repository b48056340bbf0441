"""One call of a recorded kernel on this GPU, for Nsight Compute to count
(`gpulab counters NAME --ncu`, gpulab.gpu.counters.ncu_argv):

    ncu --profile-from-start off ... python -m gpulab.targets.counter_cases NAME

The case builds the inputs the recording was taken on (gpulab.gpu.counters.
RECORDINGS), calls the kernel a few times (compiling and autotuning are
over then), and brackets exactly one call with cudaProfilerStart/Stop, so
that ncu counts that call's kernels and nothing else: the same procedure
as the recordings (scripts/tools/ncu_cases.py, BENCHMARKS.md "Counters").
The course's kernels are the references under the content's kernels/.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from typing import Any

from gpulab.gpu.counters import LIVE


def _reference(name: str) -> Any:
    from gpulab.course.content import content_root

    path = content_root() / "kernels" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"gpulab_reference_{name}", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def case(name: str) -> Callable[[], Any]:
    import torch

    dev = "cuda"
    if name == "rope_fwd":
        S, H, D = 16384, 32, 128
        x = torch.randn(1, S, H, D, device=dev, dtype=torch.bfloat16)
        w = torch.randn(D, device=dev, dtype=torch.bfloat16)
        ang = torch.rand(S, D // 2, device=dev)
        cos, sin = ang.cos(), ang.sin()
        fn = _reference("rope_rmsnorm").rmsnorm_rope
        return lambda: fn(x, w, cos, sin)
    if name == "matmul_8k":
        a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
        b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
        mm = _reference("matmul").matmul
        return lambda: mm(a, b)
    if name in ("softmax_32k", "torch_softmax_32k"):
        x = torch.randn(2048, 32768, device=dev, dtype=torch.float16)
        if name == "torch_softmax_32k":
            return lambda: torch.softmax(x, dim=-1)
        # The lesson's kernel itself: the reference's chooser would time its
        # candidates under ncu, whose interception misleads it.
        launch = _reference("softmax")._candidates(x)["triton"]
        y = torch.empty_like(x)
        return lambda: launch(x, y)
    raise SystemExit(f"no case {name!r} here; these can run again: {', '.join(LIVE)}")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    import torch

    fn = case(argv[0])
    for _ in range(5):  # compile, autotune; then warm calls
        fn()
    torch.cuda.synchronize()
    cudart: Any = torch.cuda.cudart()  # type: ignore[no-untyped-call]  # (untyped in torch)
    cudart.cudaProfilerStart()
    fn()
    torch.cuda.synchronize()
    cudart.cudaProfilerStop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
