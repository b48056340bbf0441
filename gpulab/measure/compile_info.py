"""Compile a Triton kernel for a GPU this machine may not have, and say what it costs.

`compile_kernel(fn, signature, constexprs, arch="sm_75")` runs Triton's own
compiler for the target (`triton.compile(ASTSource(...),
target=GPUTarget("cuda", cc, 32))`, no GPU or driver needed: Triton ships
ptxas) and returns a `CompileInfo`: registers and spills as ptxas reports
them, shared memory, warps, how many blocks fit on one SM of that
architecture (and what limits them), and whether tensor-core instructions
(mma / wgmma / tcgen05) appear in the PTX.

Registers and spills: a compiled kernel's `n_regs`/`n_spills` are filled in
only when the driver loads the cubin, which needs a GPU. So ptxas's own
report (`ptxas -v`, which Triton runs and can print with its
`dump_ptxas_log` knob) is parsed instead; the cache is bypassed for the
call, since a cached kernel runs no ptxas.

Used by `gpulab dev compile` (every reference kernel on every target) and
meant for `gpulab check --explain`. triton is imported inside the functions.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, cast

# Standard library only: the shape of a compiled kernel's row, which
# --explain's compile facts share.
from gpulab.explain.facts import CodeFacts, CompiledKernel

# What `compile_kernel` hands `asm_hook`: the compiled texts by name ("ttir",
# "ptx", ...; the cubin's bytes), and what the hook makes of them, kept as `extra`.
AsmHook = Callable[[dict[str, str | bytes]], "CodeFacts | None"]


@dataclass(frozen=True)
class ArchLimits:
    """What one SM of a compute capability offers a kernel.

    From the CUDA C++ Programming Guide's table of technical specifications
    per compute capability: 64 K 32-bit registers per SM on all of these,
    allocated per warp in units of 256; shared memory per SM and the most a
    block may opt into; CUDA keeps 1 KiB of each block's shared memory for
    itself from sm_80 on.
    """

    cc: int
    example: str  # a GPU of this architecture, for people
    max_threads: int  # resident threads per SM
    max_blocks: int  # resident blocks per SM
    smem_per_sm: int  # bytes
    smem_per_block: int  # bytes a block may use (opt-in maximum)
    smem_reserved: int  # bytes CUDA reserves per block
    regs_per_sm: int = 65536
    max_regs_per_thread: int = 255

    @property
    def name(self) -> str:
        return f"sm_{self.cc}"


KiB = 1024
ARCHS: dict[int, ArchLimits] = {
    a.cc: a
    for a in (
        ArchLimits(75, "T4, RTX 20xx", 1024, 16, 64 * KiB, 64 * KiB, 0),
        ArchLimits(80, "A100", 2048, 32, 164 * KiB, 163 * KiB, KiB),
        ArchLimits(86, "A10, RTX 30xx", 1536, 16, 100 * KiB, 99 * KiB, KiB),
        ArchLimits(89, "L4, RTX 40xx", 1536, 24, 100 * KiB, 99 * KiB, KiB),
        ArchLimits(90, "H100, H200", 2048, 32, 228 * KiB, 227 * KiB, KiB),
        ArchLimits(100, "B200, GB200", 2048, 32, 228 * KiB, 227 * KiB, KiB),
        ArchLimits(120, "RTX 50xx, RTX PRO 6000", 1536, 32, 100 * KiB, 99 * KiB, KiB),
    )
}
DEFAULT_ARCHS = tuple(a.name for a in ARCHS.values())


def parse_arch(text: str) -> int:
    """ "sm_90" / "sm_90a" / "90" / "9.0" -> 90; ValueError naming the known ones."""
    t = text.strip().lower().removeprefix("sm_").removeprefix("sm").rstrip("a")
    if re.fullmatch(r"\d+\.\d", t):
        t = t.replace(".", "")
    if t.isdigit() and int(t) in ARCHS:
        return int(t)
    raise ValueError(f"unknown architecture {text!r}: known are {', '.join(DEFAULT_ARCHS)}")


@dataclass(frozen=True)
class CompileInfo:
    """One kernel compiled for one architecture."""

    kernel: str
    arch: str
    ok: bool
    error: str = ""
    registers: int | None = None  # per thread, from ptxas
    spill_stores: int | None = None  # bytes per thread, from ptxas
    spill_loads: int | None = None
    shared: int = 0  # bytes of shared memory per block (Triton's metadata)
    num_warps: int = 0
    blocks_per_sm: int = 0  # resident blocks on one SM: the occupancy
    limited_by: str = ""  # registers, shared memory, threads or blocks
    tensor_cores: str = ""  # "mma", "wgmma", "tcgen05" or "" when none
    extra: CodeFacts | None = None  # what `asm_hook` made of the compiled code

    @property
    def spills(self) -> int | None:
        if self.spill_stores is None:
            return None
        return self.spill_stores + (self.spill_loads or 0)

    @property
    def uses_tensor_cores(self) -> bool:
        return bool(self.tensor_cores)

    @property
    def fits(self) -> bool:
        """Whether a block can be resident at all (compiles is not launches)."""
        return self.ok and self.blocks_per_sm > 0

    @property
    def occupancy(self) -> float:
        """Resident warps over the SM's maximum, 0..1."""
        lim = ARCHS[parse_arch(self.arch)]
        return self.blocks_per_sm * self.num_warps * 32 / lim.max_threads if self.ok else 0.0

    def as_dict(self) -> CompileJson:
        # asdict answers an untyped dict: CompileJson says its keys.
        return cast(
            "CompileJson",
            {
                **asdict(self),
                "spills": self.spills,
                "fits": self.fits,
                "occupancy": round(self.occupancy, 3),
                "smem_per_block": ARCHS[parse_arch(self.arch)].smem_per_block,
            },
        )


class CompileJson(CompiledKernel, total=False):
    """`CompileInfo.as_dict()`: a row of `gpulab dev compile --json`, every
    key of CompiledKernel (--explain's compile facts are made of it) and
    what `asm_hook` made of the compiled code."""

    extra: CodeFacts | None


def occupancy(
    arch: ArchLimits, registers: int | None, shared: int, num_warps: int
) -> tuple[int, str]:
    """Blocks of one kernel resident on one SM, and what limits them."""
    threads = num_warps * 32
    if shared > arch.smem_per_block or threads > 1024:
        return 0, "shared memory" if shared > arch.smem_per_block else "threads"
    limits = {"blocks": arch.max_blocks, "threads": arch.max_threads // threads}
    if registers:
        per_warp = -(-registers * 32 // 256) * 256  # allocated per warp, 256 at a time
        limits["registers"] = (arch.regs_per_sm // per_warp) // num_warps
    if shared:
        limits["shared memory"] = arch.smem_per_sm // (shared + arch.smem_reserved)
    why = min(limits, key=lambda k: limits[k])
    return limits[why], why


_PTXAS_FUNC = re.compile(r"Compiling entry function '(\w+)'")
_PTXAS_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_REGS = re.compile(r"Used (\d+) registers")


def parse_ptxas_log(text: str) -> dict[str, tuple[int, int, int]]:
    """`ptxas -v` output -> {entry function: (registers, spill stores, spill loads)}."""
    out: dict[str, tuple[int, int, int]] = {}
    name, spills = None, (0, 0)
    for line in text.splitlines():
        if m := _PTXAS_FUNC.search(line):
            name, spills = m.group(1), (0, 0)
        elif (m := _PTXAS_SPILL.search(line)) and name:
            spills = (int(m.group(1)), int(m.group(2)))
        elif (m := _PTXAS_REGS.search(line)) and name:
            out[name] = (int(m.group(1)), *spills)
    return out


def tensor_core_ops(ptx: str) -> str:
    """Which tensor-core instruction family the PTX uses: Blackwell's tcgen05,
    Hopper's warpgroup wgmma, the warp-level mma.sync of sm_75+, or ""."""
    for family, pattern in (
        ("tcgen05", r"\btcgen05\.mma"),
        ("wgmma", r"\bwgmma\.mma_async"),
        ("mma", r"\bmma\.sync\."),
    ):
        if re.search(pattern, ptx):
            return family
    return ""


def _source(
    fn: Any,
    signature: dict[str, str],
    constexprs: dict[str, Any] | None,
    aligned: bool,
    divisible: Any = (),
) -> Any:  # triton's ASTSource or Gluon's: triton ships no types
    # A launch with torch tensors passes 16-byte aligned pointers, and Triton
    # specialises on it (wider loads); so it does on integers divisible by 16
    # (`divisible`). Without the hints the compiled code would not be the
    # code that runs: a flash-attention kernel compiled without them needed
    # 96 KiB of shared memory, and 320 KiB as launched on an H200.
    attrs = {
        (fn.arg_names.index(k),): [["tt.divisibility", 16]]
        for k, t in signature.items()
        if (aligned and t.startswith("*")) or k in divisible
    }
    if type(fn).__name__ == "GluonJITFunction":
        from triton.experimental.gluon._runtime import GluonASTSource

        return GluonASTSource(fn, signature, constexprs=constexprs, attrs=attrs)
    from triton.compiler import ASTSource

    return ASTSource(fn, signature, constexprs=constexprs, attrs=attrs)


def _error_line(exc: BaseException) -> str:
    """One line: a CompilationError's text is "at L:C:", the source, a caret,
    then the cause; keep the place and the cause."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    text = lines[0] if len(lines) == 1 else f"{lines[0]} {lines[-1]}"
    return f"{type(exc).__name__}: {text}"[:300]


def compile_kernel(
    fn: Any,
    signature: dict[str, str],
    constexprs: dict[str, Any] | None = None,
    *,
    arch: str | int = "sm_90",
    options: dict[str, Any] | None = None,
    name: str = "",
    aligned: bool = True,
    divisible: Any = (),
    asm_hook: AsmHook | None = None,
) -> CompileInfo:
    """Compile `fn` (a @triton.jit or @gluon.jit function) for `arch`.

    `signature` maps every parameter to a Triton type ("*fp16", "i32",
    "fp32", "constexpr", "tensordesc<...>"); `constexprs` gives the
    constexpr values; `options` e.g. {"num_warps": 8, "num_stages": 3};
    `aligned`: pointers are 16-byte aligned, as torch allocates them;
    `divisible`: the integer parameters a launch passed multiples of 16
    (Triton's specialisation; a launch's 1s are passed as constexprs);
    `asm_hook(asm)` reads the compiled texts ({"ttir", "ptx", ...}) for more
    facts (gpulab.explain.ttir), kept as `extra`.
    Never raises for a kernel that does not compile: the CompileInfo says why.
    """
    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget

    cc = parse_arch(str(arch))
    lim = ARCHS[cc]
    label = name or getattr(fn, "__name__", str(fn))
    log = io.StringIO()
    try:
        with contextlib.ExitStack() as stack:
            # ptxas's report is printed only when ptxas runs: skip the cache.
            stack.enter_context(knobs.nvidia.scope())
            stack.enter_context(knobs.compilation.scope())
            knobs.nvidia.dump_ptxas_log = True
            knobs.compilation.always_compile = True
            stack.enter_context(contextlib.redirect_stdout(log))
            k = triton.compile(
                _source(fn, signature, constexprs, aligned, set(divisible)),
                target=GPUTarget("cuda", cc, 32),
                options=dict(options or {}),
            )
    except Exception as exc:  # noqa: BLE001 - a failed compile is a result, not a crash
        return CompileInfo(label, lim.name, ok=False, error=_error_line(exc))
    md = k.metadata
    ptx = k.asm.get("ptx", "")
    entry = getattr(md, "name", "")
    usage = parse_ptxas_log(log.getvalue())
    regs, st, ld = usage.get(entry) or next(iter(usage.values()), (None, None, None))
    warps = int(getattr(md, "num_warps", 0) or (options or {}).get("num_warps", 4))
    shared = int(getattr(md, "shared", 0) or 0)
    blocks, why = occupancy(lim, regs, shared, warps)
    return CompileInfo(
        label,
        lim.name,
        ok=True,
        registers=regs,
        spill_stores=st,
        spill_loads=ld,
        shared=shared,
        num_warps=warps,
        blocks_per_sm=blocks,
        limited_by=why,
        tensor_cores=tensor_core_ops(ptx),
        extra=asm_hook(k.asm) if asm_hook else None,
    )


__all__ = [
    "ARCHS",
    "DEFAULT_ARCHS",
    "ArchLimits",
    "AsmHook",
    "CompileInfo",
    "CompileJson",
    "compile_kernel",
    "occupancy",
    "parse_arch",
    "parse_ptxas_log",
    "tensor_core_ops",
]
