"""What `gpulab dev compile` compiles: each reference kernel as the reference
launches it (its autotune configs, its constexprs), the Hopper-only paths for
the architectures that have them, and each starter's kernel with the same
signature, so a learner on any GPU starts from code that compiles there.

A spec names its kernel by exercise and function name; `jobs()` imports the
reference and starter files of each exercise (under kernels/ and
exercises/) and turns each spec into compile jobs.
Keep these in step with the references: test_compile_info runs them all.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpulab.measure.compile_info import ARCHS

ALL = tuple(ARCHS)
HOPPER = (90,)  # wgmma and setmaxnreg: sm_90a only (Blackwell has tcgen05 instead)
TMA = (90, 100)  # TMA descriptors: Hopper and data-centre Blackwell

# What compile_kernel takes: Triton types by parameter, the constexprs (ints,
# bools, triton dtypes) and options (num_warps, num_stages).
Built = tuple[dict[str, str], dict[str, Any], dict[str, int]]
# (module, fn) -> Built: the reference's module and its jitted function.
Build = Callable[[Any, Any], Built]


@dataclass(frozen=True)
class Spec:
    exercise: str  # kernels/<exercise>.py, and exercises/<exercise>.py for the starter
    kernel: str  # the jitted function
    label: str  # what varies between this spec and its siblings (tile, dtype)
    build: Build
    archs: tuple[int, ...] = ALL  # the architectures the reference claims
    starter: str = ""  # the starter's function to compile with the same signature
    file: str = ""  # the reference's path under kernels/ without .py, when not <exercise>


@dataclass(frozen=True)
class Job:
    name: str  # "matmul:matmul_kernel 128x256x64 s4 w8"
    role: str  # "reference" or "starter"
    fn: Any
    signature: dict[str, str]
    constexprs: dict[str, Any]
    options: dict[str, int]
    archs: tuple[int, ...] = field(default=ALL)


def signature(
    fn: Any,
    dtype: str,
    constexprs: dict[str, Any],
    *,
    floats: tuple[str, ...] = (),
    descs: dict[str, str] | None = None,
    ptrs: tuple[str, ...] = (),
) -> dict[str, str]:
    """Triton types for `fn`'s parameters: constexprs by name, `floats` fp32,
    `descs` tensor descriptors, names ending in _ptr (and `ptrs`) pointers to
    `dtype`, everything else i32."""
    out = {}
    for name in fn.arg_names:
        if name in constexprs:
            out[name] = "constexpr"
        elif descs and name in descs:
            out[name] = descs[name]
        elif name in floats:
            out[name] = "fp32"
        elif name.endswith("_ptr") or name in ptrs:
            out[name] = f"*{dtype}"
        else:
            out[name] = "i32"
    return out


def _simple(
    dtype: str,
    ce: dict[str, Any],
    warps: int,
    floats: tuple[str, ...] = (),
    stages: int = 3,
    fp32_ptrs: tuple[str, ...] = (),
) -> Build:
    def build(_m: Any, fn: Any) -> Built:
        sig = signature(fn, dtype, ce, floats=floats)
        for p in fp32_ptrs:
            sig[p] = "*fp32"
        return sig, dict(ce), {"num_warps": warps, "num_stages": stages}

    return build


def _autotuned(
    attr: str,
    dtype: str,
    extra: dict[str, Any],
    floats: tuple[str, ...] = (),
    ptrs: tuple[str, ...] = (),
) -> Callable[[int], Build]:
    """One spec per autotune config of module.`attr` (a list of triton.Config)."""

    def make(index: int) -> Build:
        def build(m: Any, fn: Any) -> Built:
            c = getattr(m, attr)[index]
            ce = {**extra, **c.kwargs}
            return (
                signature(fn, dtype, ce, floats=floats, ptrs=ptrs),
                ce,
                {"num_warps": c.num_warps, "num_stages": c.num_stages},
            )

        return build

    return make


def _attention_step(dtype: str, ce: dict[str, Any], warps: int) -> Build:
    """A lesson 04 step's kernel: the paper's names for its pointers."""

    def build(_m: Any, fn: Any) -> Built:
        sig = signature(fn, dtype, ce, floats=("qk_scale",), ptrs=("Q", "K", "V", "O"))
        return sig, dict(ce), {"num_warps": warps, "num_stages": 1}

    return build


def _tma_desc(dtype: str, block: tuple[int, int]) -> str:
    return f"tensordesc<{dtype}[{block[0]}, {block[1]}]>"


def _matmul_tma(persistent: bool) -> Build:
    def build(m: Any, fn: Any) -> Built:
        bm, bn, bk = m.TMA_BLOCK
        import triton.language as tl

        ce = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "OUT_DTYPE": tl.float16}
        if persistent:
            ce["NUM_SMS"] = 132
        descs = {
            "a_desc": _tma_desc("fp16", (bm, bk)),
            "b_desc": _tma_desc("fp16", (bk, bn)),
            "c_desc": _tma_desc("fp16", (bm, bn)),
        }
        return (
            signature(fn, "fp16", ce, descs=descs),
            ce,
            {"num_warps": 8, "num_stages": 3 if persistent else 4},
        )

    return build


def _attention_tma(m: Any, fn: Any) -> Built:
    D = 128
    bm, bn, warps, stages = m.TMA_TILES[D]
    ce = {"HEAD_DIM": D, "CAUSAL": True, "BLOCK_M": bm, "BLOCK_N": bn}
    descs = {
        n: _tma_desc("fp16", (bm if n in ("q_desc", "o_desc") else bn, D))
        for n in ("q_desc", "k_desc", "v_desc", "o_desc")
    }
    return (
        signature(fn, "fp16", ce, floats=("qk_scale",), descs=descs),
        ce,
        {"num_warps": warps, "num_stages": stages},
    )


def _softmax_smem(m: Any, fn: Any) -> Built:
    import torch

    cr, n, slots = 32, 32768, 12
    d = f"tensordesc<fp16[{cr}, {m.BOX}],{m.shared_layout(torch.float16)!r}>"
    ce = {"R": n // m.BOX, "NSLOT": slots, "ONE_EXP": False}
    return (
        {
            "x_desc": d,
            "y_desc": d,
            "n_rows": "i32",
            "R": "constexpr",
            "NSLOT": "constexpr",
            "ONE_EXP": "constexpr",
        },
        ce,
        {"num_warps": 8},
    )


def _fa3(m: Any, fn: Any) -> Built:
    import torch

    D, causal = 128, True
    sched = m.SCHEDULES[D, causal]

    def desc(box: int) -> str:
        return f"tensordesc<fp16[{box}, {D}],{m.shared_layout(torch.float16, [box, D])!r}>"

    ce = {
        "CAUSAL": causal,
        "STAGES": sched["stages"],
        "NUM_WG": sched["num_wg"],
        "PINGPONG": sched["pingpong"],
        "POLY": sched["poly"],
        "SPLIT": False,
    }
    sig = {
        "q_desc": desc(64),
        "k_desc": desc(sched["block_n"]),
        "v_desc": desc(sched["block_n"]),
        "o_desc": desc(64),
        "Sq": "i32",
        "Sk": "i32",
        "qk_scale": "fp32",
        "G": "i32",
        **{k: "constexpr" for k in ce},
    }
    return sig, ce, {"num_warps": 4}


_MM = _autotuned("GPU_CONFIGS", "fp16", {})
_FA = _autotuned(
    "GPU_CONFIGS",
    "fp16",
    {"HEAD_DIM": 64, "CAUSAL": True},
    floats=("qk_scale",),
    ptrs=("Q", "K", "V", "O"),
)  # the paper's names
_ROPE = {"D": 128, "HALF": 64}

SPECS: tuple[Spec, ...] = (
    Spec(
        "bandwidth",
        "triad_kernel",
        "fp32 BLOCK=1024 w4",
        _simple("fp32", {"BLOCK": 1024}, 4, floats=("alpha",)),
        starter="triad_kernel",
    ),
    Spec(
        "bandwidth",
        "triad_kernel",
        "bf16 BLOCK=1024 w4",
        _simple("bf16", {"BLOCK": 1024}, 4, floats=("alpha",)),
    ),
    Spec(
        "softmax",
        "softmax_kernel",
        "fp16 BLOCK=4096 w8",
        _simple("fp16", {"BLOCK": 4096}, 8),
        starter="softmax_kernel",
    ),
    Spec(
        "softmax", "softmax_kernel", "fp32 BLOCK=32768 w16", _simple("fp32", {"BLOCK": 32768}, 16)
    ),
    Spec(
        "softmax",
        "softmax_rows_kernel",
        "fp16 ROWS=4 BLOCK=1024 w4",
        _simple("fp16", {"ROWS": 4, "BLOCK": 1024}, 4),
    ),
    Spec(
        "softmax",
        "softmax_grouped_kernel",
        "fp16 G=512 E=8 w8",
        _simple("fp16", {"G": 512, "E": 8}, 8),
    ),
    Spec(
        "softmax",
        "softmax_smem",
        "Gluon fp16 32768 cols, 12x32 ring, w8",
        _softmax_smem,
        archs=HOPPER,
        file="hopper/softmax_smem",
    ),
    *(
        Spec(
            "matmul",
            "matmul_kernel",
            f"config {i} fp16",
            _MM(i),
            starter="matmul_kernel" if i == 5 else "",
        )
        for i in range(6)
    ),
    Spec(
        "matmul",
        "matmul_kernel",
        "small config bf16",
        lambda m, fn: (
            lambda c, ce: (
                signature(fn, "bf16", ce),
                ce,
                {"num_warps": c.num_warps, "num_stages": c.num_stages},
            )
        )(m.SMALL_CONFIG, dict(m.SMALL_CONFIG.kwargs)),
    ),
    Spec("matmul", "matmul_kernel_tma", "TMA 128x256x64 fp16", _matmul_tma(False), archs=TMA),
    Spec(
        "matmul",
        "matmul_kernel_tma_persistent",
        "TMA persistent fp16",
        _matmul_tma(True),
        archs=TMA,
    ),
    *(
        Spec(
            "flash_attention",
            "attention_kernel",
            f"config {i} D=64 causal fp16",
            _FA(i),
            starter="attention_kernel" if i == 3 else "",
        )
        for i in range(4)
    ),
    Spec(
        "flash_attention",
        "attention_kernel_tma",
        "TMA D=128 causal fp16",
        _attention_tma,
        archs=TMA,
    ),
    Spec(
        "flash_attention",
        "attention_fa3",
        "Gluon FA3 D=128 causal fp16, 2 warpgroups",
        _fa3,
        archs=HOPPER,
        file="hopper/flash_attention_fa3",
    ),
    Spec(
        "rope_rmsnorm",
        "_rmsnorm_rope_fwd",
        "fp16 D=128 BLOCK_H=16",
        _simple("fp16", {**_ROPE, "BLOCK_H": 16}, 4, floats=("eps",), fp32_ptrs=("w_ptr",)),
        starter="rmsnorm_rope_fwd_kernel",
    ),
    Spec(
        "rope_rmsnorm",
        "_rmsnorm_rope_bwd",
        "fp16 D=128 BLOCK_H=16",
        _simple(
            "fp16", {**_ROPE, "BLOCK_H": 16}, 4, floats=("eps",), fp32_ptrs=("w_ptr", "dw_part_ptr")
        ),
        starter="rmsnorm_rope_bwd_kernel",
    ),
    Spec(
        "rope_rmsnorm",
        "_sum_rows",
        "fp32 D=128 BLOCK_P=32",
        _simple("fp32", {"D": 128, "BLOCK_P": 32}, 4),
    ),
    # Lesson 01's Triton puzzles, as their references launch them (the
    # launch puzzle at its widest, 32768 lanes on 16 warps).
    *(
        Spec(ex, kernel, f"{dt} {label}", _simple(dt, ce, warps), starter=kernel)
        for ex, kernel, label, ce, warps in (
            ("triton_mask", "copy_kernel", "BLOCK=1024 w4", {"BLOCK": 1024}, 4),
            ("triton_grid", "add_kernel", "BLOCK=1024 w4", {"BLOCK": 1024}, 4),
            (
                "triton_tile",
                "transpose_kernel",
                "64x64 w4",
                {"BLOCK_M": 64, "BLOCK_N": 64},
                4,
            ),
            ("triton_reduce", "row_max_kernel", "64x64 w4", {"ROWS": 64, "COLS": 64}, 4),
        )
        for dt in ("fp16", "fp32")
    ),
    Spec(
        "triton_launch",
        "center_kernel",
        "fp32 BLOCK=32768 w16",
        _simple("fp32", {"BLOCK": 32768}, 16),
        starter="center_kernel",
    ),
    # The steps of lessons 02 and 03, as their references launch them.
    *(
        Spec(
            "softmax_row",
            "softmax_row_kernel",
            f"{dt} BLOCK=1024 w4",
            _simple(dt, {"BLOCK": 1024}, 4),
            starter="softmax_row_kernel",
        )
        for dt in ("fp16", "fp32")
    ),
    *(
        Spec(
            "softmax_wide",
            "softmax_wide_kernel",
            f"{dt} BLOCK=4096 w8",
            _simple(dt, {"BLOCK": 4096}, 8),
            starter="softmax_wide_kernel",
        )
        for dt in ("fp16", "fp32")
    ),
    *(
        Spec(
            "matmul_tile",
            "matmul_tile_kernel",
            f"{dt} 64x64x64 w4",
            _simple(dt, {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64}, 4),
            starter="matmul_tile_kernel",
        )
        for dt in ("fp16", "fp32")
    ),
    *(
        Spec(
            "matmul_kloop",
            "matmul_kloop_kernel",
            f"{dt} 32x32x32 w4",
            _simple(dt, {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}, 4),
            starter="matmul_kloop_kernel",
        )
        for dt in ("fp16", "fp32")
    ),
    # The steps of lessons 04 and 05, as their references launch them.
    *(
        Spec(
            "attention_tile",
            "attention_tile_kernel",
            f"{dt} D=128 32x64 w4",
            _attention_step(dt, {"HEAD_DIM": 128, "BLOCK_M": 32, "BLOCK_N": 64}, 4),
            starter="attention_tile_kernel",
        )
        for dt in ("fp16", "fp32")
    ),
    *(
        Spec(
            "attention_online",
            "attention_online_kernel",
            f"{dt} D=128 32x16 w4",
            _attention_step(dt, {"HEAD_DIM": 128, "BLOCK_M": 32, "BLOCK_N": 16}, 4),
            starter="attention_online_kernel",
        )
        for dt in ("fp16", "fp32")
    ),
    *(
        Spec(
            "rope",
            "rope_kernel",
            f"{dt} D=128 BLOCK_H=16",
            _simple(dt, {"HALF": 64, "BLOCK_H": 16}, 4, fp32_ptrs=("cos_ptr", "sin_ptr")),
            starter="rope_kernel",
        )
        for dt in ("bf16", "fp32")
    ),
    *(
        Spec(
            "rmsnorm",
            "rmsnorm_kernel",
            f"{dt} D=256 BLOCK_R=16",
            _simple(dt, {"D": 256, "BLOCK_R": 16}, 4, floats=("eps",)),
            starter="rmsnorm_kernel",
        )
        for dt in ("bf16", "fp32")
    ),
    Spec(
        "rope_rmsnorm_fwd",
        "rmsnorm_rope_fwd_kernel",
        "bf16 D=128 BLOCK_H=16",
        _simple(
            "bf16", {**_ROPE, "BLOCK_H": 16}, 4, floats=("eps",), fp32_ptrs=("cos_ptr", "sin_ptr")
        ),
        starter="rmsnorm_rope_fwd_kernel",
    ),
    Spec(
        "rope_rmsnorm_bwd",
        "rmsnorm_rope_bwd_kernel",
        "bf16 D=128 BLOCK_H=16",
        _simple(
            "bf16",
            {**_ROPE, "BLOCK_H": 16},
            4,
            floats=("eps",),
            fp32_ptrs=("cos_ptr", "sin_ptr", "dw_part_ptr"),
        ),
        starter="rmsnorm_rope_bwd_kernel",
    ),
)


def load_module(path: Path, name: str) -> Any:
    """Import a content file by path (kernels/ is no package on sys.path)."""
    # The folder holding kernels/ (kernels/hopper/ files too), or exercises/'s parent.
    root = str(next((p for p in path.parents if p.name == "kernels"), path.parent).parent)
    if root not in sys.path:  # references import their siblings as kernels.X
        sys.path.insert(0, root)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _jit(obj: Any) -> Any:
    """The JITFunction under an Autotuner/Heuristics wrapper."""
    while type(obj).__name__ in ("Autotuner", "Heuristics"):
        obj = obj.fn
    return obj


def jobs(
    root: Path, specs: tuple[Spec, ...] = SPECS, exercises: set[str] | None = None
) -> Iterator[Job | tuple[str, str, str]]:
    """Compile jobs for `specs` (only those `exercises`, if given); a
    (name, role, error) triple where a file or a spec cannot be set up."""
    mods: dict[str, Any] = {}
    for spec in specs:
        if exercises and spec.exercise not in exercises:
            continue
        name = f"{spec.exercise}:{spec.kernel} {spec.label}"
        ref_path = root / "kernels" / f"{spec.file or spec.exercise}.py"
        roles = [("reference", ref_path, spec.kernel)]
        if spec.starter:
            roles.append(("starter", root / "exercises" / f"{spec.exercise}.py", spec.starter))
        for role, path, attr in roles:
            key = f"{role}:{path.stem}"
            try:
                if key not in mods:
                    mods[key] = load_module(path, f"gpulab_compile_{role}_{path.stem}")
                m = mods[key]
                ref = mods[f"reference:{ref_path.stem}"]  # stems are unique under kernels/
                fn = getattr(m, attr)
                fn = _jit(fn)
                # The starter gets the reference's signature and constexprs.
                ref_fn = _jit(getattr(ref, spec.kernel))
                sig, ce, opts = spec.build(ref, ref_fn)
                if role == "starter" and list(fn.arg_names) != list(ref_fn.arg_names):
                    # The starter names its parameters its own way (rope's
                    # backward has no n_pos): the reference's types by name.
                    sig = {n: sig.get(n, "i32") for n in fn.arg_names}
                    ce = {k: v for k, v in ce.items() if k in fn.arg_names}
                label = name if role == "reference" else f"{spec.exercise}:{attr} (starter)"
                yield Job(label, role, fn, sig, ce, opts, spec.archs)
            except Exception as exc:  # noqa: BLE001 - reported as a failed row
                yield (f"{name} ({role})", role, f"{type(exc).__name__}: {exc}")


__all__ = ["SPECS", "Job", "Spec", "jobs", "load_module", "signature"]
