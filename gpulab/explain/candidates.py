"""Which config of an autotuned kernel to explain when nothing was timed.

On the CPU the tracer records an autotuned kernel once for every config its
autotuner would try (diagnosis/trace.py). The autotuner keeps the fastest,
which only a GPU can say; what a compile can say is that a config which
spills registers rarely wins. So the judge explains the first config, in
the author's order, that compiles without spilling, and reports spills only
when every compiled config spills. On a GPU the tracer sees the config the
autotuner kept, and none of this applies.

Pure functions over the facts (docs/diagnosis.md), like the rules.
"""

from __future__ import annotations

from gpulab.explain.facts import CaseEntry, CompileFacts, Launch

# Bytes a thread spilled (stores + loads) below which a spill is noise: ptxas
# often parks a register or two in local memory, which L1 holds (the softmax
# reference's 32k-wide rows, 8 bytes on sm_90). Above it the spill is a
# finding; its weight grows with the bytes (rules._compile).
SPILL_MIN = 32


def spilled(info: CompileFacts | None) -> int:
    if not info:
        return 0
    return int(info.get("spill_stores") or 0) + int(info.get("spill_loads") or 0)


def _groups(launches: list[Launch]) -> dict[int, list[Launch]]:
    groups: dict[int, list[Launch]] = {}
    for la in launches:
        if la.get("group") is not None:
            groups.setdefault(la["group"], []).append(la)
    for members in groups.values():
        members.sort(key=lambda la: la.get("candidate") or 0)
    return groups


def pick(members: list[Launch], compiled: dict[str, CompileFacts]) -> Launch:
    """One autotune group -> the launch to explain, with what was seen of
    the others under "autotune"."""
    infos = [(la, compiled.get(la.get("key", ""))) for la in members]
    ok = [(la, i) for la, i in infos if i and i.get("ok")]
    clean = [(la, i) for la, i in ok if spilled(i) < SPILL_MIN]
    if clean:
        chosen, why = clean[0][0], "the first config that compiles without spilling"
    elif ok:
        chosen = min(ok, key=lambda p: spilled(p[1]))[0]
        why = "every compiled config spills; the one that spills least"
    else:
        chosen, why = members[0], "no config compiled in time; the first"
    return {
        **chosen,
        "autotune": {
            "configs": len(members),
            "compiled": len(ok),
            "spilling": len(ok) - len(clean),
            "chosen": chosen.get("candidate") or 0,
            "why": why,
        },
    }


def resolve(case: CaseEntry, compiled: dict[str, CompileFacts]) -> CaseEntry:
    """A case whose launches hold one launch per autotuned kernel, where its
    group's first candidate stood."""
    launches = case.get("launches") or []
    groups = _groups(launches)
    if not groups:
        return case
    out = []
    for la in launches:
        group = la.get("group")
        if group is None:
            out.append(la)
        elif la is groups[group][0]:
            out.append(pick(groups[group], compiled))
    return {**case, "launches": out}


def still_needed(key: str, cases: list[CaseEntry], compiled: dict[str, CompileFacts]) -> bool:
    """Whether compiling `key` can change what is explained: not when, in
    every group it belongs to, an earlier candidate already compiled clean."""
    needed = False
    for case in cases:
        for members in _groups(case.get("launches") or []).values():
            keys = [la.get("key") for la in members]
            if key not in keys:
                continue
            before = keys[: keys.index(key)]
            if not any(
                (compiled.get(k) or {}).get("ok") and spilled(compiled.get(k)) < SPILL_MIN
                for k in before
                if k is not None  # compiled.get(None) is None: not compiled clean
            ):
                needed = True
        if not needed and any(
            la.get("key") == key and la.get("group") is None for la in case.get("launches") or []
        ):
            needed = True
    return needed


__all__ = ["SPILL_MIN", "pick", "resolve", "spilled", "still_needed"]
