"""The "Explain" section of a result, for people (CLI and the TUI's Results pane)."""

from __future__ import annotations

from typing import Any

from gpulab.explain.facts import ExplainInfo, Finding, NsightInfo
from gpulab.wire.protocol import JsonObject


def explain_renderable(result: JsonObject) -> Any | None:
    """None when the result carries no diagnosis. `result`: the judge's own
    keys of a result as the lab read them (CheckResult.rest, checked only to
    be JSON), whose `explain` and `diagnosis` the judge wrote as
    gpulab.explain.facts says."""
    if "diagnosis" not in result:
        return None
    from rich.console import Group
    from rich.text import Text

    ex: ExplainInfo = result.get("explain") or {}
    parts: list[Any] = [Text("Explain: what limits this kernel", style="bold")]
    found: list[Finding] = result.get("diagnosis") or []
    for i, d in enumerate(found, 1):
        line = Text(f"{i}. ")
        line.append(str(d.get("kind", "")), style="bold yellow")
        line.append(f"  {d.get('evidence', '')}")
        parts.append(line)
        parts.append(Text(f"   → {d.get('advice', '')}", style="cyan"))
    failures = ex.get("compile_errors") or []
    for f in failures:
        parts.append(
            Text(
                f"{f.get('kernel', '?')} does not compile for {f.get('arch', 'the GPU')} "
                f"({ex.get('gpu') or 'the GPU'}): {f.get('error', '')}",
                style="bold red",
            )
        )
    if failures:
        parts.append(
            Text(
                "   → the Triton interpreter ran it, a GPU will not: it accepts code the "
                "compiler refuses (lesson 01, 'Triton in one screen')",
                style="cyan",
            )
        )
    if not found and not ex.get("error") and not failures:
        parts.append(
            Text(
                "Nothing stands out: no spills, tensor cores where they belong, "
                "enough programs and warps for this GPU.",
                style="green",
            )
        )
    if ex.get("error"):
        parts.append(Text(f"could not explain: {ex['error']}", style="yellow"))
    parts += _nsight(ex.get("nsight") or {})
    if ex.get("not_compiled"):
        parts.append(
            Text(
                f"{ex['not_compiled']} more kernel variant(s) not compiled within the "
                "time budget; the next --explain reads them from the cache",
                style="dim",
            )
        )
    for b in ex.get("basis") or []:
        parts.append(Text(f"· {b}", style="dim"))
    if ex.get("advisory"):
        parts.append(Text(f"· {ex['advisory']}", style="dim"))
    return Group(*parts)


def _mib(n: float | None) -> str:
    return f"{n / 2**20:.1f} MiB" if n is not None else "? MiB"


def _us(s: float | None) -> str:
    return f"{s * 1e6:.1f} µs" if s is not None else "? µs"


def _nsight(info: NsightInfo) -> list[Any]:
    """What Nsight Compute measured: DRAM bytes against the minimum, per
    kernel its time and its top stall reasons."""
    from rich.text import Text

    if not info.get("measured"):
        return []
    head = f"Nsight Compute, case {info.get('case', '?')}: {_mib(info.get('dram_bytes'))} DRAM"
    if info.get("ratio"):
        head += f" ({info['ratio']:.2f}× the minimum {_mib(info.get('minimum_bytes'))})"
    out = [Text(f"{head}, {_us(info.get('gpu_seconds'))} on the GPU")]
    for k in (info.get("kernels") or [])[:4]:
        stalls = ", ".join(f"{s['reason'].replace('_', ' ')} {s['share']:.0%}" for s in k["stalls"])
        line = f"   {k['name'][:60]}: {_mib(k.get('dram_bytes'))}, {_us(k.get('seconds'))}"
        out.append(Text(line + (f"; warps stalled on {stalls}" if stalls else ""), style="dim"))
    return out


__all__ = ["explain_renderable"]
