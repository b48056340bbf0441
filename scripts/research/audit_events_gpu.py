"""What torch's profiler records for a scalar read and a bulk copy to the
host on a GPU, as the audit (gpulab/sandbox/audit.py) sees them: names,
device types, time ranges and input shapes, and the audit's findings for
each. Usage on a GPU machine: python scripts/research/audit_events_gpu.py OUT.json"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from gpulab.sandbox.audit import Audit  # noqa: E402


def profile(name: str, fn) -> dict:
    x = torch.randn(1000, device="cuda")
    torch.cuda.synchronize()
    with Audit("cuda") as a:
        fn(x)
        torch.cuda.synchronize()
    keep = [
        e
        for e in a.events
        if "Memcpy" in e.name or "scalar" in e.name or "item" in e.name or "to_copy" in e.name
    ]
    return {
        "case": name,
        "findings": a.findings(set()),
        "all_threads": a.all_threads,
        "events": [
            {
                "name": e.name,
                "device": str(e.device_type),
                "start_us": e.time_range.start,
                "end_us": e.time_range.end,
                "shapes": getattr(e, "input_shapes", None),
            }
            for e in keep
        ],
    }


def main() -> None:
    cases = [
        ("one item", lambda x: x[0].item()),
        ("four float()", lambda x: [float(x[i]) for i in range(4)]),
        ("bulk cpu()", lambda x: x.cpu()),
        ("twenty items", lambda x: [x[i].item() for i in range(20)]),
        ("item from a thread", _threaded),
    ]
    out = [profile(n, f) for n, f in cases]
    for r in out:
        print(r["case"], r["findings"], len(r["events"]), "events")
    Path(sys.argv[1]).write_text(json.dumps(out, indent=1))


def _threaded(x):
    import threading

    t = threading.Thread(target=lambda: x.cpu())
    t.start()
    t.join()


if __name__ == "__main__":
    main()
