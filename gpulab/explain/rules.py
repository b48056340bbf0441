"""Facts -> findings: what limits this kernel, most important first.

Pure functions over plain data (the shape is documented in
docs/diagnosis.md and built by gpulab.explain.judge.plugin), so tests can
feed facts directly. Each rule returns zero or more findings
{kind, evidence, advice, severity}; `severity` is the estimated share of
the run time the problem costs (0..1), which orders the list.
"""

from __future__ import annotations

import math

from gpulab.explain.candidates import SPILL_MIN, spilled
from gpulab.explain.facts import AutotunePick, CaseFacts, CompileFacts, Facts, Finding
from gpulab.explain.findings import _finding, _fmt_us, _launch_label, _main_launch
from gpulab.explain.kinds import KINDS, Sections
from gpulab.explain.traffic import _grouping, _in_flight, _intermediates, _tile_reuse

# Host-side cost of one Triton launch from Python, and the smallest GPU time
# of a kernel: an estimate (a few µs on recent CUDA and Triton), stated in
# every launch_bound finding; scripts/research/explain_gpu.py measures it.
LAUNCH_US = 5.0
# MUFU (exp2, rcp, rsqrt...) issues 16 per clock per SM on sm_75..sm_90 (CUDA
# C++ Programming Guide, arithmetic instruction throughput), against 128 FP32
# lanes doing an FMA (2 FLOP) each: the SFU rate is the FP32 peak / 16.
SFU_PER_FP32_FLOP = 1 / 16
# Below this, memory-bound kernels cannot keep enough loads in flight
# (lesson 02: about half the SM's warps is where bandwidth stops growing).
MEMORY_OCCUPANCY = 0.25
SPILL_CAP = 0.8
COMPUTE_OCCUPANCY = 0.0625  # a tensor-core kernel runs well at 8 warps of 128


def _tensor_cores(f: Facts, case: CaseFacts, sections: Sections) -> list[Finding]:
    if f.get("kind") != "compute" or case.get("dtype") not in ("fp16", "bf16", "tf32", "fp8"):
        return []
    seen = [f["compiled"].get(la.get("key", "")) for la in case.get("launches") or []]
    infos = [i for i in seen if i and i.get("ok")]
    if not infos or any(i.get("tensor_cores") for i in infos):
        return []
    gpu = f["gpu"]
    tc, fp32 = gpu["flops"].get(case["dtype"]), gpu["flops"].get("fp32")
    cap = (fp32 / tc) if tc and fp32 else 0.1
    names = ", ".join(sorted({i.get("label", "?") for i in infos}))
    return [
        _finding(
            "no_tensor_cores",
            sections,
            1 - cap,
            f"no mma/wgmma instruction in the compiled {names} for {infos[0].get('arch')}: "
            f"the products run on the FP32 lanes ({(fp32 or 0) / 1e12:.0f} TFLOP/s on the "
            f"{gpu['name']}) instead of the tensor cores ({(tc or 0) / 1e12:.0f} TFLOP/s "
            f"{case['dtype']}), at most {cap:.0%} of the roof",
            "Multiply tiles with tl.dot(a, b, acc) on fp16/bf16 tiles (at least 16×16×16), "
            "accumulating in fp32, instead of a sum of elementwise products",
        )
    ]


def _programs(f: Facts, case: CaseFacts, sections: Sections) -> list[Finding]:
    out: list[Finding] = []
    sms = f["gpu"].get("sms") or 0
    la, info = _main_launch(case, f["compiled"])
    programs = la.get("programs") or 0
    if not sms or not programs:
        return out
    per_sm = (info or {}).get("blocks_per_sm") or 1
    if programs < sms:
        out.append(
            _finding(
                "too_few_programs",
                sections,
                1 - programs / sms,
                f"{_launch_label(la, info)} is launched with a grid of {programs} program"
                f"{'s' if programs != 1 else ''} on {sms} SMs ({case['name']}): "
                f"{sms - programs} SMs have nothing to do",
                "Give every SM work: one program per row or per output tile, a grid of "
                "at least a few times the SM count",
            )
        )
    else:
        slots = sms * per_sm
        waves = programs / slots
        full = math.ceil(waves)
        lost = (full - waves) / full
        if 1 < waves < 8 and lost >= 0.15:
            out.append(
                _finding(
                    "tail_wave",
                    sections,
                    lost,
                    f"{programs} programs of {_launch_label(la, info)} over {sms} SMs × "
                    f"{per_sm} resident = {waves:.2f} waves ({case['name']}): the last wave is "
                    f"{waves - full + 1:.0%} full, so about {lost:.0%} of the GPU time is idle SMs",
                    "Change the tile (or rows per program) so the program count is a whole "
                    "number of waves, or many waves, or use a persistent grid of SM-count programs",
                )
            )
    if info and info.get("loops") and programs <= max(4, sms // 16) and case.get("work", 0) > 1e6:
        out.append(
            _finding(
                "serialised_reduction",
                sections,
                0.5 * (1 - programs / sms),
                f"{_launch_label(la, info)} walks the whole problem in a loop inside "
                f"{programs} program{'s' if programs != 1 else ''}: the reduction runs one "
                "step after the other instead of across the GPU",
                "Split the reduction across programs (partial results per program, then "
                "one small combine), as the backward's dweight partials do",
            )
        )
    return out


def _does_not_launch(sections: Sections, label: str, info: CompileFacts) -> Finding:
    """Compiled, but a program asks for more shared memory than an SM can
    give one: it fails at launch (Triton's OutOfResources). On a CPU this
    is the only warning a learner gets before their first GPU."""
    limit = info.get("smem_per_block")
    return _finding(
        "low_occupancy",
        sections,
        1.0,
        f"{label} on {info['arch']} asks for {(info.get('shared') or 0) // 1024} KiB of shared "
        "memory a program"
        + (f", more than the {limit // 1024} KiB one program can have" if limit else "")
        + ": no program fits on an SM, so it will not launch there (Triton raises "
        "OutOfResources)",
        "Fewer pipeline stages (num_stages: each stage holds one more copy of the tiles "
        "loaded ahead) or a smaller tile; fp32 tiles take twice the bytes of fp16 ones",
    )


def _compile(f: Facts, case: CaseFacts, sections: Sections) -> list[Finding]:
    out: list[Finding] = []
    compute = f.get("kind") == "compute"
    for la in case.get("launches") or []:
        info = f["compiled"].get(la.get("key", ""))
        if not info or not info.get("ok"):
            continue
        label = _launch_label(la, info)
        if not info.get("fits") and info.get("limited_by") == "shared memory":
            out.append(_does_not_launch(sections, label, info))
            continue
        spills = spilled(info)
        if spills < SPILL_MIN:
            spills = 0  # a register or two in L1: not what limits the kernel
        tuned = la.get("autotune")
        if spills:
            every, unsure = _autotune_note(tuned)
            out.append(
                _finding(
                    "register_spills",
                    sections,
                    # At most 0.8: spills cost a few times at worst, where a
                    # GPU 85% idle (too_few_programs at 0.85) costs 7x.
                    min(SPILL_CAP, 0.3 + spills / 1000) * (0.5 if unsure else 1.0),
                    f"{label} on {info['arch']}: {info.get('registers')} registers a thread "
                    f"(the most is 255) and {spills} bytes a thread spilled to local memory "
                    f"({info.get('spill_stores')} stored, {info.get('spill_loads')} loaded)"
                    + every,
                    "Hold less per thread: more warps for the same tile (num_warps), a smaller "
                    "tile (BLOCK), or fewer pipeline stages",
                )
            )
        occ = info.get("occupancy") or 0.0
        floor = COMPUTE_OCCUPANCY if compute else MEMORY_OCCUPANCY
        if info.get("fits") and occ < floor and not spills:
            target = floor * 2
            out.append(
                _finding(
                    "low_occupancy",
                    sections,
                    0.5 * (target - occ) / target,
                    f"{label} on {info['arch']}: {info.get('blocks_per_sm')} program(s) of "
                    f"{info.get('num_warps')} warps fit on one SM (limited by "
                    f"{info.get('limited_by')}: {info.get('registers')} registers, "
                    f"{(info.get('shared') or 0) // 1024} KiB shared): {occ:.0%} of the SM's "
                    "warps, too few to hide memory latency",
                    "Spread the same work over more warps (num_warps=4 or 8), or cut what "
                    f"limits it ({info.get('limited_by')}) with a smaller tile",
                )
            )
        loads = {k: v for k, v in (info.get("loads") or {}).items() if v > 1}
        if loads and not compute:
            worst = max(loads.values())
            out.append(
                _finding(
                    "extra_bytes",
                    sections,
                    0.6 * (1 - 2 / (worst + 1)),
                    f"{label} loads {', '.join(f'{k} at {v} places' for k, v in loads.items())}: "
                    f"each element read up to {worst} times, so up to {(worst + 1) / 2:.1f}× "
                    "the minimum traffic (less if L2 still holds it; estimated from the "
                    "kernel's code, not measured)",
                    "Load each element once and keep it in registers while you use it: one "
                    "pass, or an online form that carries running max and sum",
                )
            )
        if info.get("atomics"):
            out.append(
                _finding(
                    "serialised_reduction",
                    sections,
                    0.35,
                    f"{label} has {info['atomics']} atomic update(s): programs that add into "
                    "the same address wait for each other",
                    "Write one partial per program and reduce the partials in a second, small step",
                )
            )
    return out


def _autotune_note(tuned: AutotunePick | None) -> tuple[str, bool]:
    """What the spill finding says of an autotuned kernel's other configs,
    and whether the autotuner might still keep one that does not spill."""
    n, done = (tuned.get("configs", 1), tuned.get("compiled", 0)) if tuned else (1, 0)
    if n <= 1:
        return "", False
    if done >= n:
        return f"; all {n} configs its autotuner tries spill", False
    return (
        f"; the {done} of its autotuner's {n} configs compiled so far all spill "
        f"({n - done} not compiled in time: --explain again compiles them, it caches)",
        True,
    )


def _roofs(f: Facts, case: CaseFacts, sections: Sections) -> list[Finding]:
    out: list[Finding] = []
    gpu = f["gpu"]
    bw, flops = gpu.get("bandwidth"), gpu.get("flops") or {}
    nbytes, work = case.get("bytes") or 0, case.get("flops") or 0
    launches = case.get("launches") or []
    ideal_hbm = nbytes / bw if bw else 0.0
    peak = flops.get(case.get("dtype", ""))
    ideal_fl = work / peak if peak else 0.0
    ideal = max(ideal_hbm, ideal_fl)
    # Launch floor.
    n = len(launches)
    overhead = n * LAUNCH_US * 1e-6
    measured = (case.get("ms") or 0) * 1e-3
    share = overhead / measured if measured else (overhead / (overhead + ideal) if ideal else 0)
    if n and ((n > 1 and share >= 0.3) or n >= 16 or share >= 0.5):
        out.append(
            _finding(
                "launch_bound",
                sections,
                min(0.95, share),
                f"{n} kernel launch{'es' if n != 1 else ''} a call, about "
                f"{_fmt_us(overhead)} of launch cost (estimated {LAUNCH_US:.0f} µs each) against "
                + (
                    f"{_fmt_us(measured)} measured"
                    if measured
                    else f"{_fmt_us(ideal)} of ideal work on the {gpu['name']}"
                )
                + f" ({case['name']})",
                "Do the whole call in one kernel (fuse the steps, loop inside the program) so "
                "the fixed launch cost is paid once"
                if n > 1
                else "At this size the fixed cost of a launch is the floor: judge the kernel by the "
                "larger shapes",
            )
        )
    # The SFU roof (exp) against the graded one.
    exps, fp32 = case.get("exps") or 0, flops.get("fp32")
    if exps and fp32 and ideal:
        sfu = exps / (fp32 * SFU_PER_FP32_FLOP)
        if sfu > ideal:
            cap = ideal / sfu
            if cap < 0.85:
                out.append(
                    _finding(
                        "wrong_roof",
                        sections,
                        1 - cap,
                        f"{exps:.3g} exponentials at the SFU rate ({fp32 * SFU_PER_FP32_FLOP / 1e12:.1f} "
                        f"T/s on the {gpu['name']}) take {_fmt_us(sfu)}, more than the "
                        f"{_fmt_us(ideal)} the graded roof allows: at most {cap:.0%} of it",
                        "Use tl.exp2 with the scale folded in (one MUFU op), and keep the exp "
                        "count at the minimum (skip fully masked tiles)",
                    )
                )
    # Measured: far below the roof with nothing else found is reported by `wrong_roof`
    # only when the achieved rate sits on another roof (handled above).
    return out


RULES = (
    _tensor_cores,
    _programs,
    _compile,
    _grouping,
    _in_flight,
    _tile_reuse,
    _intermediates,
    _roofs,
)


def diagnose(facts: Facts, sections: Sections | None = None) -> list[Finding]:
    """Findings for `facts`, most important first; one per kind (the worst
    case's). `sections`: where the exercise's manifest points its findings
    (gpulab.explain.kinds.sections_of); the kinds' usual sections else."""
    best: dict[str, Finding] = {}
    for case in facts.get("cases") or []:
        for rule in RULES:
            for finding in rule(facts, case, sections or {}):
                assert finding["kind"] in KINDS, finding["kind"]
                have = best.get(finding["kind"])
                if have is None or finding["severity"] > have["severity"]:
                    best[finding["kind"]] = finding
    return sorted(best.values(), key=lambda d: -d["severity"])


__all__ = ["LAUNCH_US", "RULES", "diagnose"]
