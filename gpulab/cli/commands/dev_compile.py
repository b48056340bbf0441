"""`gpulab dev compile`: every reference kernel, compiled for every target GPU.

No GPU needed: Triton compiles for any architecture on the CPU (it ships
ptxas). Each reference kernel as the reference launches it, the Hopper-only
paths for the architectures that have them, and each starter's kernel with
the reference's signature (gpulab.measure.compile_specs); a table of registers,
spills, shared memory, warps, blocks per SM and tensor-core instructions.
Exit 1 if a reference does not compile for an architecture it claims.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

from gpulab.measure.compile_info import DEFAULT_ARCHS, CompileInfo, parse_arch
from gpulab.wire.protocol import JsonObject


@dataclass(frozen=True, slots=True)
class CompileRow:
    """One kernel (a reference or a starter) on one architecture: what
    compiling it said (`info`), or why it could not even be set up (`error`)."""

    name: str
    role: str  # "reference" or "starter"
    arch: str  # "sm_90"
    info: CompileInfo | None = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.info is not None and self.info.ok

    @property
    def why(self) -> str:
        """Why it failed: the compiler's words, or the set-up's."""
        return self.info.error if self.info is not None else self.error

    def to_json(self) -> JsonObject:
        """A row of `gpulab dev compile --json`, as it always was."""
        if self.info is None:
            return {
                "name": self.name,
                "role": self.role,
                "arch": self.arch,
                "ok": False,
                "error": self.error,
            }
        return {"name": self.name, "role": self.role, **self.info.as_dict()}


def compile_matrix(
    archs: list[int], exercises: set[str] | None = None, progress: Any = None
) -> list[CompileRow]:
    """A row for every job x arch."""
    # The interpreter flag makes references pick their CPU configs.
    os.environ.pop("TRITON_INTERPRET", None)
    from gpulab.course.content import content_root
    from gpulab.judge import loader
    from gpulab.measure import compile_specs
    from gpulab.measure.compile_info import compile_kernel

    root = content_root()
    specs, errors = loader.compile_specs(root, exercises)
    rows: list[CompileRow] = []
    for job in [*errors, *compile_specs.jobs(root, specs, exercises)]:
        if isinstance(job, tuple):  # could not even be set up: fails every arch
            name, role, error = job
            rows += [CompileRow(name, role, f"sm_{cc}", error=error) for cc in archs]
            continue
        for cc in archs:
            if cc not in job.archs:
                continue
            if progress:
                progress(f"{job.name} sm_{cc}")
            info = compile_kernel(
                job.fn, job.signature, job.constexprs, arch=cc, options=job.options, name=job.name
            )
            rows.append(CompileRow(job.name, job.role, info.arch, info))
    return rows


def failures(rows: list[CompileRow]) -> list[CompileRow]:
    """References that did not compile for an architecture they claim."""
    return [r for r in rows if r.role == "reference" and not r.ok]


def render(rows: list[CompileRow]) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    t = Table(title="Reference kernels and starters, compiled per target", title_justify="left")
    errors = []
    t.add_column("kernel", overflow="fold", min_width=24)
    for col, just in (
        ("arch", "left"),
        ("regs", "right"),
        ("spills B", "right"),
        ("smem KiB", "right"),
        ("warps", "right"),
        ("blocks/SM", "right"),
        ("limited by", "left"),
        ("tensor cores", "left"),
    ):
        t.add_column(col, justify=just, overflow="fold")  # type: ignore[arg-type]
    for r in rows:
        info = r.info
        if info is None or not info.ok:
            errors.append(Text(f"✘ {r.name} on {r.arch}: {r.why}", style="red"))
            t.add_row(r.name, r.arch, "[red]✘[/]", *[""] * 5, "[red]fails: below[/]")
            continue
        spills = info.spills
        t.add_row(
            r.name,
            r.arch,
            str(info.registers or "?"),
            "?" if spills is None else (f"[yellow]{spills}[/]" if spills else "0"),
            f"{info.shared / 1024:.0f}",
            str(info.num_warps),
            str(info.blocks_per_sm) if info.fits else "[yellow]0: too big[/]",
            info.limited_by,
            info.tensor_cores or "-",
        )
    return Group(t, *errors)


def run(args: Any) -> int:  # exits the process (see the end)
    try:
        archs = [parse_arch(a) for a in (args.arch or ",".join(DEFAULT_ARCHS)).split(",") if a]
    except ValueError as exc:
        print(f"gpulab dev compile: --arch: {exc}", file=sys.stderr)
        return 2
    only = set(args.only or []) or None
    start = time.monotonic()
    say = None if args.json else (lambda s: print(f"compiling {s}", file=sys.stderr))
    rows = compile_matrix(archs, only, progress=say)
    took = time.monotonic() - start
    bad = failures(rows)
    if args.json:
        print(
            json.dumps(
                {
                    "rows": [r.to_json() for r in rows],
                    "seconds": round(took, 1),
                    "failures": len(bad),
                }
            )
        )
    else:
        from gpulab.cli.commands.common import console

        console().print(render(rows))
        print(
            f"{len(rows)} compiles in {took:.0f} s; "
            + (
                f"{len(bad)} reference(s) FAILED to compile"
                if bad
                else "every reference compiles for every architecture it claims"
            ),
            file=sys.stderr,
        )
    # Triton's Gluon keeps objects alive until interpreter teardown, where
    # nanobind then prints a page of "leaked instance" warnings (gc does not
    # help). Everything is printed and nothing is left to clean up: leave now.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1 if bad else 0)


__all__ = ["CompileInfo", "CompileRow", "compile_matrix", "failures", "render"]
