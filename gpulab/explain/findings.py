"""What every rule builds a finding from: the main launch, its label, the
finding itself (kind, evidence, advice with its lesson section, severity)."""

from __future__ import annotations

from gpulab.explain.facts import CaseEntry, CaseFacts, CompileFacts, Finding, Launch
from gpulab.explain.kinds import Sections, where


def _fmt_us(s: float) -> str:
    return f"{s * 1e6:.1f} µs" if s < 1e-3 else f"{s * 1e3:.2f} ms"


def _launch_label(la: Launch, info: CompileFacts | None) -> str:
    bits = [f"{la.get('kernel', '?')}"]
    ce = la.get("constexprs") or {}
    shown = ", ".join(f"{k}={v}" for k, v in ce.items() if isinstance(v, (int, bool)))
    bits.append(f"({shown}{', ' if shown else ''}{la.get('num_warps', '?')} warps)")
    return " ".join(bits)


def _main_launch(
    case: CaseFacts | CaseEntry, compiled: dict[str, CompileFacts]
) -> tuple[Launch, CompileFacts | None]:
    """The launch that does most of the work: the most programs, then the first."""
    launches = case.get("launches") or []
    if not launches:
        return {}, None
    la = max(launches, key=lambda x: x.get("programs") or 0)
    return la, compiled.get(la.get("key", ""))


def _finding(
    kind: str,
    sections: Sections,
    severity: float,
    evidence: str,
    advice: str,
    cause: str = "",
) -> Finding:
    """`sections`: where the exercise's manifest points its findings (by
    kind, or by `cause` where one rule's finding has a better read than its
    kind's)."""
    w = where(kind, sections, cause)
    return {
        "kind": kind,
        "evidence": evidence,
        "advice": f"{advice} (lesson {w['lesson'][:2]}, “{w['section']}”)"
        if w["lesson"]
        else advice,
        "lesson": w["lesson"],
        "section": w["section"],
        "severity": round(max(0.0, min(1.0, severity)), 3),
    }


__all__ = ["_finding", "_fmt_us", "_launch_label", "_main_launch"]
