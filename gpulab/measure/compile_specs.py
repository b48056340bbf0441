"""What `gpulab dev compile` compiles: each reference kernel as the reference
launches it (its autotune configs, its constexprs), the Hopper-only paths for
the architectures that have them, and each starter's kernel with the same
signature, so a learner on any GPU starts from code that compiles there.

Each exercise's grader lists its kernels' specs (COMPILE_SPECS, built with
the helpers here) and the manifest says which graders have them (`tools =
[..., "compile"]`): `jobs()` loads those graders through the judge's one
loader, imports the reference and starter files of each exercise (under
kernels/ and exercises/, or a folder exercise's reference.py and starter.py,
its specs in its spec.py: docs/new-exercise.md) and turns each spec into
compile jobs. Keep the specs in step with the references: test_compile_info
runs them all.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
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
    kernel: str  # the jitted function
    label: str  # what varies between this spec and its siblings (tile, dtype)
    build: Build
    archs: tuple[int, ...] = ALL  # the architectures the reference claims
    starter: str = ""  # the starter's function to compile with the same signature
    file: str = ""  # the reference's path under kernels/ without .py, when not <exercise>
    # kernels/<exercise>.py, and exercises/<exercise>.py for the starter: the
    # grader that lists the spec (filled in by gpulab.judge.loader.compile_specs).
    exercise: str = ""
    # A folder exercise's folder (filled in likewise): its reference.py and
    # starter.py instead of kernels/ and exercises/.
    folder: Path | None = None


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


def simple(
    dtype: str,
    ce: dict[str, Any],
    warps: int,
    floats: tuple[str, ...] = (),
    stages: int = 3,
    fp32_ptrs: tuple[str, ...] = (),
    ptrs: tuple[str, ...] = (),
) -> Build:
    """Fixed constexprs and options; `fp32_ptrs` point at fp32 whatever `dtype`,
    `ptrs` are pointers not named *_ptr (lesson 04's Q, K, V, O)."""

    def build(_m: Any, fn: Any) -> Built:
        sig = signature(fn, dtype, ce, floats=floats, ptrs=ptrs)
        for p in fp32_ptrs:
            sig[p] = "*fp32"
        return sig, dict(ce), {"num_warps": warps, "num_stages": stages}

    return build


def autotuned(
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


def tma_desc(dtype: str, block: tuple[int, int]) -> str:
    """A TMA tensor descriptor's Triton type: `block` of `dtype`."""
    return f"tensordesc<{dtype}[{block[0]}, {block[1]}]>"


def load_module(path: Path, name: str) -> ModuleType:
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
    root: Path, specs: tuple[Spec, ...], exercises: set[str] | None = None
) -> Iterator[Job | tuple[str, str, str]]:
    """Compile jobs for `specs` (the graders' own: gpulab.judge.loader.
    compile_specs; only those `exercises`, if given); a (name, role, error)
    triple where a file or a spec cannot be set up."""
    mods: dict[str, ModuleType] = {}
    for spec in specs:
        if exercises and spec.exercise not in exercises:
            continue
        name = f"{spec.exercise}:{spec.kernel} {spec.label}"
        if spec.folder is not None:  # a folder exercise: every one's files have these names
            ref_path, starter_path = spec.folder / "reference.py", spec.folder / "starter.py"
        else:
            ref_path = root / "kernels" / f"{spec.file or spec.exercise}.py"
            starter_path = root / "exercises" / f"{spec.exercise}.py"
        roles = [("reference", ref_path, spec.kernel)]
        if spec.starter:
            roles.append(("starter", starter_path, spec.starter))
        for role, path, attr in roles:
            key = f"{role}:{path}"
            stem = path.stem if spec.folder is None else spec.exercise
            try:
                if key not in mods:
                    mods[key] = load_module(path, f"gpulab_compile_{role}_{stem}")
                m = mods[key]
                ref = mods[f"reference:{ref_path}"]
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


__all__ = [
    "ALL",
    "HOPPER",
    "TMA",
    "Job",
    "Spec",
    "autotuned",
    "jobs",
    "load_module",
    "signature",
    "simple",
    "tma_desc",
]
