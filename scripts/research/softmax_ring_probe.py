"""What limits the shared-memory softmax (kernels/hopper/softmax_smem.py) on a GPU:
its two compute paths against a diagnostic that does no maths at all.

    python3 scripts/research/softmax_ring_probe.py OUT.json     # from the repo root, on sm_90

For each configuration (chunk lines, compute warps, programs an SM) on the
two widest fp16 shapes of the bench, times with gpulab's harness (L2
flushed between calls) and back to back (triton.testing.do_bench, through a
Launcher, as softmax.py runs it):
  two_exp   the default compute path (online max and sum, then normalise)
  one_exp   one exp2 an element: max, then exp2 stored as fp16, then scale
  copy      diagnostic, not a softmax: the same ring, loader, barriers and
            TMA stores with the passes emptied (each chunk is stored as it
            came in), i.e. the ceiling of this pipeline's data movement
  ... st2   the same with two TMA stores left in flight instead of one
and the row-per-program Triton kernel without its maths ("row copy": load
the row, store it; "row reduce": store x - max(x)),
beside torch's copy of the same bytes and softmax.py's Triton
kernel. If two_exp and one_exp sit together at the copy variant's time,
the maths is hidden and what is left is the pipeline; if copy is much
faster, the compute warps are the bottleneck.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from gpulab.measure.timing import L2Flusher, measure  # noqa: E402

SRC = (ROOT / "kernels" / "hopper" / "softmax_smem.py").read_text()
# The diagnostic: pass 1 only waits for each chunk; pass 2 stores it as it is.
COPY_EDITS = [
    (
        "            x = bufs.index(g % NSLOT).load(layout).to(gl.float32) * LOG2E\n"
        "            m_new = gl.maximum(m, gl.max(x, axis=1))\n"
        "            s = s * gl.exp2(m - m_new) + gl.sum(gl.exp2(x - gl.expand_dims(m_new, 1)), axis=1)\n"
        "            m = m_new\n",
        "",
    ),
    (
        "            x = chunk.load(layout).to(gl.float32) * LOG2E\n"
        "            chunk.store((gl.exp2(x - row_max) * inv).to(y_desc.dtype))\n",
        "",
    ),
]

# Two TMA stores left reading shared memory instead of one before a slot is
# handed back (both compute paths; the ring then needs a row and two chunks).
STORES2_EDITS = [
    (
        "    tma.store_wait(pendings=1)\n    if g > 0:\n"
        "        mbarrier.arrive(empty.index((g - 1) % NSLOT))\n",
        "    tma.store_wait(pendings=2)\n    if g > 1:\n"
        "        mbarrier.arrive(empty.index((g - 2) % NSLOT))\n",
    ),
]


@triton.jit
def row_copy(y_ptr, x_ptr, n_cols, BLOCK: tl.constexpr, REDUCE: tl.constexpr):
    """Diagnostic: softmax.py's kernel without its maths. One program a row
    loads the whole row and stores it (REDUCE: stores x - max(x), so the
    store waits on a reduction over the row, as a softmax's does)."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + offs)
    if REDUCE:
        x = x - tl.max(x, axis=0)
    tl.store(y_ptr + row * n_cols + offs, x)


def edited(edits) -> str:
    src = SRC
    for old, new in edits:
        assert old in src, old
        src = src.replace(old, new)
    return src


def load(name: str, src: str):
    path = Path(f"/tmp/gpulab_softmax_smem_{name}.py")  # gluon.jit needs a real file
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(f"gpulab_softmax_smem_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "softmax_ring_probe.json")
    ref_mod = load("ref", SRC)
    copy_mod = load("copy", edited(COPY_EDITS))
    ref2_mod = load("ref2", edited(STORES2_EDITS))
    copy2_mod = load("copy2", edited(COPY_EDITS + STORES2_EDITS))
    spec = importlib.util.spec_from_file_location("ref_softmax", ROOT / "kernels" / "softmax.py")
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)

    flusher = L2Flusher()
    rows_out = []
    for n_rows, n_cols in ((2048, 32768), (4096, 16384)):
        x = torch.randn(n_rows, n_cols, device="cuda", dtype=torch.float16) * 4
        want = torch.softmax(x.double(), -1)
        nbytes = 2 * x.numel() * x.element_size()
        y = torch.empty_like(x)
        flat_in, flat_out = x.view(-1), y.view(-1)
        base = {
            "torch copy": lambda a=flat_in, b=flat_out: b.copy_(a),
            "triton": lambda x=x, y=y: ref._launch_triton(x, y),
        }
        for w in (4, 8, 16):
            for reduce in (False, True):
                base[f"row {'reduce' if reduce else 'copy'} w{w}"] = (
                    lambda x=x, y=y, w=w, r=reduce: row_copy[(x.shape[0],)](
                        y, x, x.shape[1], BLOCK=x.shape[1], REDUCE=r, num_warps=w
                    )
                )
        for name, fn in base.items():
            ms = measure(fn, flusher=flusher, log_clocks=False)["ms"]
            back = triton.testing.do_bench(fn, warmup=10, rep=50)
            rows_out.append(
                {
                    "shape": [n_rows, n_cols],
                    "variant": name,
                    "us": ms * 1e3,
                    "back_to_back_us": back * 1e3,
                    "tbs": nbytes / ms / 1e9,
                }
            )
            print(
                f"{n_rows}x{n_cols} {name:24} {ms * 1e3:7.1f} us  back-to-back "
                f"{back * 1e3:7.1f} us  {nbytes / ms / 1e9:.2f} TB/s",
                flush=True,
            )
        for cr, warps, per_sm in ((64, 16, 1), (64, 8, 1), (64, 4, 1), (32, 8, 1)):
            slots = 200 * 1024 // per_sm // (cr * ref_mod.BOX * 2)
            if not ref_mod.supported(x, slots, cr, per_sm):
                continue
            for kind, mod, one_exp in (
                ("two_exp", ref_mod, False),
                ("one_exp", ref_mod, True),
                ("copy", copy_mod, False),
                ("two_exp st2", ref2_mod, False),
                ("one_exp st2", ref2_mod, True),
                ("copy st2", copy2_mod, False),
            ):
                name = f"{kind} c{cr} w{warps} p{per_sm}"
                try:
                    fn = mod.Launcher(
                        n_rows,
                        n_cols,
                        x.dtype,
                        x.device,
                        slots=slots,
                        chunk_rows=cr,
                        num_warps=warps,
                        per_sm=per_sm,
                        one_exp=one_exp,
                    )
                    fn(x, y)  # compiles
                    got = torch.full_like(x, float("nan"))
                    fn(x, got)  # the direct launch
                    torch.cuda.synchronize()
                except Exception as exc:  # noqa: BLE001 - out of resources, say
                    rows_out.append(
                        {"shape": [n_rows, n_cols], "variant": name, "error": str(exc)[:300]}
                    )
                    print(f"{n_rows}x{n_cols} {name:24} error {str(exc)[:120]}", flush=True)
                    continue
                if kind.startswith("copy"):
                    err = float((got.float() - x.float()).abs().max())
                else:
                    err = float((got.double() - want).abs().max())
                    # in units of the fp16 ulp of each output: 0.5 is exact rounding
                    ulp = 2.0 ** (torch.floor(torch.log2(want)).clamp_min(-14) - 10)
                    ulps = float(((got.double() - want).abs() / ulp).max())
                ms = measure(
                    lambda fn=fn, x=x, got=got: fn(x, got), flusher=flusher, log_clocks=False
                )["ms"]
                back = triton.testing.do_bench(
                    lambda fn=fn, x=x, got=got: fn(x, got), warmup=10, rep=50
                )
                row = {
                    "shape": [n_rows, n_cols],
                    "variant": name,
                    "us": ms * 1e3,
                    "back_to_back_us": back * 1e3,
                    "tbs": nbytes / ms / 1e9,
                    "err": err,
                }
                if not kind.startswith("copy"):
                    row["max_ulps"] = ulps
                rows_out.append(row)
                print(
                    f"{n_rows}x{n_cols} {name:24} {ms * 1e3:7.1f} us  back-to-back "
                    f"{back * 1e3:7.1f} us  {nbytes / ms / 1e9:.2f} TB/s  err {err:.1e}"
                    + ("" if kind.startswith("copy") else f"  {ulps:.2f} ulp"),
                    flush=True,
                )
    meta = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
    }
    out.write_text(json.dumps({"meta": meta, "rows": rows_out}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
