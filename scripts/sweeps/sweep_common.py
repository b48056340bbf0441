"""Shared machinery for the GPU kernel sweeps (scripts/sweeps/sweep_matmul.py,
scripts/sweeps/sweep_attention.py).

A sweep checks every kernel variant against torch, times it with gpulab's
harness beside the baselines (in the same run, on the same data), prints a
compact table and writes the full JSON to argv[1].

The lead gets one short GPU call per sweep, so the sweep must survive its
own variants. A variant that fails to compile or gives wrong answers is
recorded and skipped, in process. Some failures take the process with them:
a crash inside the compiler, an illegal address that poisons the CUDA
context, a warp-specialised pipeline that deadlocks. So the work runs in a
child process that logs every step to a JSON-lines file; this parent (no
CUDA) watches it, kills it when a step hangs, records the step that broke,
and starts a new child that resumes after it. A global time budget is
shared out among the cases so the whole run ends on time.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpulab.lab import child  # the sweep scripts put the repository on sys.path first

CONTEXT_LOST = 3  # child exit code: the CUDA context is broken, resume in a fresh process


@dataclass
class Variant:
    name: str  # unique within a case, e.g. "tma_persistent 128x256x64 s3 w8"
    family: str  # e.g. "tma_persistent"
    cfg: dict[str, Any] = field(default_factory=dict)


def parse_args(argv: list[str], name: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=f"sweep_{name}", description=__doc__.splitlines()[0])
    p.add_argument("out", nargs="?", default=f"{name}_sweep.json", help="where to write the JSON")
    p.add_argument("--quick", action="store_true", help="two shapes only (a smoke check)")
    p.add_argument("--shapes", default="", help="comma-separated substrings of case labels to keep")
    p.add_argument("--variants", default="", help="comma-separated substrings of variant names")
    p.add_argument(
        "--budget", type=float, default=270.0, help="wall-clock seconds for the whole run"
    )
    p.add_argument(
        "--item-timeout",
        type=float,
        default=60.0,
        help="kill and resume when one step makes no progress for this long",
    )
    p.add_argument("--in-process", action="store_true", help="no supervising parent")
    p.add_argument(
        "--selftest",
        action="store_true",
        help="run every variant on tiny shapes in the Triton interpreter (CPU)",
    )
    p.add_argument("--list", action="store_true", help="print the cases and variants and exit")
    p.add_argument("-v", "--verbose", action="store_true", help="a line per variant")
    # Internal: the supervisor's child.
    p.add_argument("--child-log", default="", help=argparse.SUPPRESS)
    p.add_argument("--deadline", type=float, default=0.0, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def wanted(text: str, filt: str) -> bool:
    parts = [s.strip() for s in filt.split(",") if s.strip()]
    return not parts or any(s in text for s in parts)


def select_cases(all_cases: list[dict], args) -> list[dict]:
    cases = [c for c in all_cases if wanted(c["label"], args.shapes)]
    if args.quick:
        quick = [c for c in cases if c.get("quick")] or cases[:2]
        cases = quick[:2]
    return cases


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


# --------------------------------------------------------------------------
# The child: does the GPU work, logs one JSON object per line.
# --------------------------------------------------------------------------


class Log:
    def __init__(self, path: str) -> None:
        self.path = path
        self.entries: list[dict] = []
        if path and os.path.exists(path):
            with open(path) as f:
                for line in f:
                    try:
                        self.entries.append(json.loads(line))
                    except json.JSONDecodeError:
                        pass  # a line cut short by a kill

    def emit(self, **entry: Any) -> None:
        entry.setdefault("t", time.time())
        self.entries.append(entry)
        if self.path:
            with open(self.path, "a") as f:
                f.write(json.dumps(entry, default=str) + "\n")
                f.flush()
                os.fsync(f.fileno())

    def done(self, case: str, variant: str) -> bool:
        return any(
            e.get("case") == case and e.get("variant") == variant and e["type"] in ("row", "crash")
            for e in self.entries
        )

    def case_done(self, case: str) -> bool:
        return any(e["type"] == "case_done" and e["case"] == case for e in self.entries)

    def poisoned(self, v: Variant) -> str | None:
        """Why v should not run again: it took its process down (crash, or a
        broken CUDA context) in an earlier case, or a variant of its family
        hung (a deadlocked pipeline costs a whole timeout each time)."""
        for e in self.entries:
            if e["type"] == "crash" and e.get("hung") and e.get("family") == v.family:
                return f"family {v.family} hung in {e['case']} ({e['variant']})"
            if e.get("variant") == v.name and (e["type"] == "crash" or e.get("context_lost")):
                return f"took its process down in {e['case']}"
        return None


def _cuda_healthy() -> bool:
    import torch

    try:
        torch.cuda.synchronize()
        torch.ones(1, device="cuda").add_(1).item()
        return True
    except Exception:  # noqa: BLE001 - any error here means the context is gone
        return False


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    # Compiler errors put the useful line last; keep the head and the tail.
    if len(lines) > 6:
        lines = lines[:3] + ["..."] + lines[-3:]
    return "\n".join(lines)[:600]


def time_fn(fn, flusher, quick: bool = False) -> dict[str, Any]:
    from gpulab.measure.timing import measure

    m = measure(
        fn,
        flusher=flusher,
        warmup_s=0.15 if quick else 0.2,
        max_warmup_s=1.5,
        budget_s=1.0 if quick else 1.5,
    )
    clocks = m.get("clocks") or {}
    return {
        "ms": m["ms"],
        "min_ms": m["min_ms"],
        "p20_ms": m["p20_ms"],
        "p80_ms": m["p80_ms"],
        "reps": m["reps"],
        "rse": m["rse"],
        "sm_mhz": clocks.get("sm_mhz_median"),
        "throttled": clocks.get("throttled"),
    }


def run_child(sweep, args) -> int:
    """The GPU work: for each case, baselines, then every variant, then the
    baselines again (clocks drift; the faster baseline time is used)."""
    import torch

    from gpulab.measure.timing import L2Flusher

    log = Log(args.child_log)
    if not any(e["type"] == "meta" for e in log.entries):
        props = torch.cuda.get_device_properties(0)
        import triton

        log.emit(
            type="meta",
            device=props.name,
            sms=props.multi_processor_count,
            capability=list(torch.cuda.get_device_capability()),
            torch=torch.__version__,
            triton=triton.__version__,
            cuda=torch.version.cuda,
            date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        )
    sweep.setup()
    flusher = L2Flusher()
    deadline = args.deadline or (time.time() + args.budget)
    cases = [c for c in select_cases(sweep.cases(), args) if not log.case_done(c["label"])]
    key_of = {c["label"]: c.get("compile_key") for c in sweep.cases()}

    def failed_before(v: Variant, key) -> str | None:
        # A variant that raised for one compile key (a compile error, out of
        # shared memory) raises again for the next case with that key:
        # don't pay for the compile twice.
        for e in log.entries:
            if (
                e["type"] == "row"
                and e.get("variant") == v.name
                and e.get("error")
                and key_of.get(e["case"]) == key
            ):
                return f"failed in {e['case']}"
        return None

    # The first case of each compile key (kernels specialise on dtype, head
    # dim, causal...) compiles every variant: it gets a bigger share.
    seen: set = set()
    weights = []
    for c in cases:
        key = c.get("compile_key")
        weights.append(1.0 if key in seen else 2.5)
        seen.add(key)
    for i, case in enumerate(cases):
        label = case["label"]
        # This case's share of what is left, allowed to borrow a little, with
        # a reserve kept for the baselines of the cases after it.
        left = deadline - time.time()
        share = left * weights[i] / sum(weights[i:])
        case_deadline = time.time() + min(left - 5 * (len(cases) - i - 1), 1.3 * share)
        log.emit(type="case_start", case=label)
        state = sweep.prepare(case)
        for rnd in (1, 2):
            for bname, bfn in sweep.baselines(state).items():
                try:
                    out = bfn()
                    torch.cuda.synchronize()
                    err = sweep.error(state, out) if rnd == 1 else None
                    t = time_fn(bfn, flusher, args.quick)
                    log.emit(type="baseline", case=label, baseline=bname, round=rnd, err=err, **t)
                except Exception as exc:  # noqa: BLE001
                    log.emit(
                        type="baseline", case=label, baseline=bname, round=rnd, error=_short(exc)
                    )
                    if not _cuda_healthy():
                        return CONTEXT_LOST
            if rnd == 2:
                break
            for v in sweep.variants(case):
                if not wanted(v.name, args.variants) or log.done(label, v.name):
                    continue
                why = log.poisoned(v) or failed_before(v, case.get("compile_key"))
                if why or time.time() > case_deadline:
                    log.emit(
                        type="row",
                        case=label,
                        variant=v.name,
                        family=v.family,
                        cfg=v.cfg,
                        skipped=why or "time budget",
                    )
                    continue
                log.emit(type="start", case=label, variant=v.name, family=v.family)
                row = {"case": label, "variant": v.name, "family": v.family, "cfg": v.cfg}
                try:
                    t0 = time.time()
                    fn = sweep.launcher(v, state)
                    out = fn()
                    torch.cuda.synchronize()
                    row["first_call_s"] = round(time.time() - t0, 2)
                    ok, err = sweep.check(state, out)
                    row.update(ok=ok, err=err)
                    if ok:
                        row.update(time_fn(fn, flusher, args.quick))
                    log.emit(type="row", **row)
                    if args.verbose:
                        ms = f"{row['ms'] * 1e3:9.1f} µs" if ok else "   (wrong)"
                        e = err.get("max_err") if isinstance(err, dict) else err
                        print(f"  {label:34} {v.name:42} {ms} err {e:.2e}", flush=True)
                except Exception as exc:  # noqa: BLE001 - compile errors, out of resources, ...
                    healthy = _cuda_healthy()
                    log.emit(type="row", error=_short(exc), context_lost=not healthy, **row)
                    if args.verbose:
                        print(
                            f"  {label:34} {v.name:42} error {_short(exc).splitlines()[0]}",
                            flush=True,
                        )
                    if not healthy:
                        return CONTEXT_LOST
        log.emit(type="case_done", case=label)
        del state
        torch.cuda.empty_cache()
        print(f"[{time.strftime('%H:%M:%S')}] {label}: done", flush=True)
    return 0


# --------------------------------------------------------------------------
# The parent: supervises children, then reports.
# --------------------------------------------------------------------------


def supervise(script: str, argv: list[str], args, sweep) -> int:
    start = time.time()
    deadline = start + args.budget
    out = Path(args.out)
    log_path = out.with_name(out.name + ".progress.jsonl")
    if log_path.exists():
        log_path.unlink()
    err_path = out.with_name(out.name + ".stderr.log")
    if err_path.exists():
        err_path.unlink()
    restarts = 0
    while True:
        left = deadline - time.time()
        if left < 15:
            print("sweep: out of time before the cases were done", flush=True)
            break
        cmd = [
            sys.executable,
            script,
            *argv,
            "--child-log",
            str(log_path),
            "--deadline",
            str(deadline - 10),
        ]  # 10 s for the report
        # The child's stderr (compiler diagnostics can run to pages) goes to a
        # file beside the JSON, so the table stays readable at the end of stdout.
        with open(err_path, "a") as err_file:
            proc = child.spawn(cmd, stderr=err_file, env=child.env())
        last_size, last_change, hung = -1, time.time(), False
        while proc.poll() is None:
            time.sleep(0.5)
            size = log_path.stat().st_size if log_path.exists() else 0
            if size != last_size:
                last_size, last_change = size, time.time()
            # A step is hung if the log has not moved for item_timeout, or
            # the run is past its deadline by a margin.
            if time.time() - last_change > args.item_timeout or time.time() > deadline + 5:
                hung = True
                child.kill_tree(proc)  # our own child's process group only
        rc = proc.returncode
        if rc == 0 and not hung:
            break
        log = Log(str(log_path))
        starts = [e for e in log.entries if e["type"] == "start"]
        last = starts[-1] if starts else None
        if last and not log.done(last["case"], last["variant"]):
            why = (
                "hung (killed by the sweep's watchdog)" if hung else f"child process died, rc={rc}"
            )
            log.emit(
                type="crash",
                case=last["case"],
                variant=last["variant"],
                family=last.get("family"),
                hung=hung,
                error=why,
            )
            print(f"sweep: {last['case']} / {last['variant']}: {why}; resuming", flush=True)
            if not hung:
                tail = err_path.read_text(errors="replace").strip().splitlines()[-3:]
                print("\n".join(f"    {ln[:160]}" for ln in tail), flush=True)
        elif rc != CONTEXT_LOST:
            # Outside a variant (data, reference, baselines): twice on the
            # same case and that case is given up.
            opened = [e["case"] for e in log.entries if e["type"] == "case_start"]
            case = opened[-1] if opened else None
            print(f"sweep: child exited rc={rc} outside a variant ({case}); resuming", flush=True)
            if case and opened.count(case) >= 2:
                log.emit(type="case_done", case=case, error=f"child died twice, rc={rc}")
        restarts += 1
        if restarts > 40:  # the time budget is the real limit; this guards a loop
            print("sweep: too many restarts, reporting what there is", flush=True)
            break
    report(sweep, Log(str(log_path)).entries, args, time.time() - start)
    return 0


def report(sweep, entries: list[dict], args, wall_s: float) -> None:
    meta = next((e for e in entries if e["type"] == "meta"), {})
    cases = select_cases(sweep.cases(), args)
    flops = {c["label"]: c["flops"] for c in cases}
    rows = [e for e in entries if e["type"] in ("row", "crash")]
    base: dict[str, dict[str, dict]] = {}
    for e in entries:
        if e["type"] == "baseline":
            slot = base.setdefault(e["case"], {}).setdefault(e["baseline"], {"runs": []})
            slot["runs"].append({k: e.get(k) for k in ("round", "ms", "err", "error", "sm_mhz")})
            if e.get("ms") and (slot.get("ms") is None or e["ms"] < slot["ms"]):
                slot["ms"] = e["ms"]
    names = sweep.BASELINES
    for r in rows:
        if r.get("ms"):
            r["tflops"] = flops.get(r["case"], 0) / r["ms"] / 1e9
            for b in names:
                bms = base.get(r["case"], {}).get(b, {}).get("ms")
                r[f"x_{b}"] = bms / r["ms"] if bms else None

    def best(case: str, family: str | None = None, variant: str | None = None):
        ok = [
            r
            for r in rows
            if r["case"] == case
            and r.get("ok")
            and r.get("ms")
            and (family is None or r.get("family") == family)
            and (variant is None or r["variant"] == variant)
        ]
        return min(ok, key=lambda r: r["ms"]) if ok else None

    print()
    print(
        f"{sweep.NAME} sweep on {meta.get('device', '?')} (torch {meta.get('torch')}, "
        f"triton {meta.get('triton')}), {wall_s:.0f} s; times in µs, TF = TFLOP/s"
    )
    print(
        f"{'case':30}"
        + "".join(f" {b[:9]:>9} {'TF':>4}" for b in names)
        + f"  {'best variant':36} {'µs':>8} {'TF':>4}"
        + "".join(f" {'x' + b[:7]:>8}" for b in names)
    )
    summary_rows = []
    for c in cases:
        lab = c["label"]
        line = f"{lab[:30]:30}"
        for b in names:
            bms = base.get(lab, {}).get(b, {}).get("ms")
            line += (
                f" {bms * 1e3:9.1f} {flops[lab] / bms / 1e9:4.0f}" if bms else f" {'-':>9} {'':4}"
            )
        r = best(lab)
        if r:
            line += f"  {r['variant'][:36]:36} {r['ms'] * 1e3:8.1f} {r['tflops']:4.0f}"
            line += "".join(
                f" {r[f'x_{b}']:8.3f}" if r.get(f"x_{b}") else f" {'-':>8}" for b in names
            )
        else:
            line += "  (no correct variant)"
        print(line)
        summary_rows.append({"case": lab, "baselines": base.get(lab, {}), "best": r})

    def stats(pick) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for b in names:
            xs = [r.get(f"x_{b}") for r in (pick(c["label"]) for c in cases) if r]
            xs = [x for x in xs if x]
            out[b] = {"geomean": geomean(xs), "min": min(xs) if xs else None, "n": len(xs)}
        return out

    overall = stats(best)
    families = sorted({r.get("family") for r in rows if r.get("family")})
    per_family = {f: stats(lambda lab, f=f: best(lab, family=f)) for f in families}
    variants = sorted({r["variant"] for r in rows})
    per_variant = {v: stats(lambda lab, v=v: best(lab, variant=v)) for v in variants}

    def fmt(s: dict) -> str:
        return "  ".join(
            f"x{b}: geo {s[b]['geomean']:.3f} min {s[b]['min']:.3f} ({s[b]['n']}/{len(cases)})"
            if s[b]["geomean"]
            else f"x{b}: -"
            for b in names
        )

    print(f"{'best per case':40} {fmt(overall)}")
    for f in families:
        print(f"{'family ' + f:40} {fmt(per_family[f])}")
    # The best single config (what one fixed kernel would get, no tuning).
    full = [v for v in variants if per_variant[v][names[0]]["n"] == len(cases)]
    if full:
        v = max(full, key=lambda v: per_variant[v][names[0]]["geomean"] or 0)
        print(f"{'one config: ' + v[:28]:40} {fmt(per_variant[v])}")
    errors = [r for r in rows if r.get("error")]
    wrong = [r for r in rows if r.get("ok") is False]
    skipped = [r for r in rows if r.get("skipped")]
    print(
        f"variants: {len(rows)} rows, {len(errors)} errors, {len(wrong)} wrong, "
        f"{len(skipped)} skipped (time budget, or an earlier crash or hang)"
    )
    seen = set()
    for r in errors:
        key = (r["variant"], r["error"].splitlines()[0][:80])
        if key not in seen:
            seen.add(key)
            print(f"  error {r['variant']}: {key[1]}")
        if len(seen) >= 8:
            break
    result = {
        "sweep": sweep.NAME,
        "meta": meta,
        "argv": sys.argv[1:],
        "wall_s": wall_s,
        "baselines": names,
        "cases": cases,
        "summary": summary_rows,
        "overall": overall,
        "per_family": per_family,
        "per_variant": per_variant,
        "rows": rows,
    }
    out = Path(args.out)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=1, default=str))
    tmp.replace(out)
    print(f"wrote {out} (full rows; the step log and the child's stderr beside it)")


def list_variants(sweep, args) -> int:
    for c in select_cases(sweep.cases(), args):
        vs = [v for v in sweep.variants(c) if wanted(v.name, args.variants)]
        print(f"{c['label']}: {len(vs)} variants, {c['flops'] / 1e12:.2f} TFLOP")
        for v in vs:
            print(f"    {v.name}")
    return 0


def main(script: str, sweep) -> int:
    argv = sys.argv[1:]
    args = parse_args(argv, sweep.NAME)
    if args.list:
        return list_variants(sweep, args)
    if args.selftest:
        return sweep.selftest(args)
    if args.child_log:
        return run_child(sweep, args)
    import torch

    if not torch.cuda.is_available():
        print(
            f"sweep_{sweep.NAME}: needs a CUDA GPU (use --selftest for the CPU interpreter check)"
        )
        return 2
    if args.in_process:
        out = Path(args.out)
        args.child_log = str(out.with_name(out.name + ".progress.jsonl"))
        if os.path.exists(args.child_log):
            os.unlink(args.child_log)
        t0 = time.time()
        rc = run_child(sweep, args)
        report(sweep, Log(args.child_log).entries, args, time.time() - t0)
        return rc
    return supervise(script, argv, args, sweep)


def fa3_module():
    """kernels/flash_attention_fa3.py, or the file GPULAB_FA3_FILE names (to
    measure a candidate change of the kernel beside the committed one)."""
    import importlib.util
    import os
    import sys

    path = os.environ.get("GPULAB_FA3_FILE")
    if not path:
        from kernels.hopper import flash_attention_fa3

        return flash_attention_fa3
    if "gpulab_fa3_candidate" not in sys.modules:
        spec = importlib.util.spec_from_file_location("gpulab_fa3_candidate", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules["gpulab_fa3_candidate"] = mod
        spec.loader.exec_module(mod)
    return sys.modules["gpulab_fa3_candidate"]
