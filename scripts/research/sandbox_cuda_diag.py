"""Which part of the sandbox's confinement stops CUDA from starting?
Each variant confines a fresh process, then initialises CUDA."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from gpulab.sandbox.isolation import Policy, apply
policy = json.loads(sys.argv[2])
if sys.argv[3] == "preinit":
    import torch
    torch.cuda.init()
    torch.empty(1, device="cuda")
if policy is not None:
    print(apply(Policy.parse(policy)))
import torch
print("count", torch.cuda.device_count())
x = torch.ones(4, device="cuda")
print("ok", float(x.sum()))
"""


def main() -> None:
    from gpulab.judge.policy import policy_for

    private = Path(tempfile.mkdtemp())
    req = {"file": str(REPO / "kernels" / "softmax.py"), "exercise": "softmax", "timeout": 60}
    base = policy_for(req, "cuda", private, private)
    variants = {
        "full preinit": base,
        "full + /proc/self": {**base, "write": base["write"] + ["/proc/self"]},
        "full + /sys": {**base, "write": base["write"] + ["/sys"]},
        "none": None,
        "rlimits only": {**base, "read": ["/"], "write": ["/"], "hidden": []},
        "full": base,
        "full + write /dev": {**base, "write": base["write"] + ["/dev"]},
        "full + write /dev,/proc,/sys": {
            **base,
            "write": base["write"] + ["/dev", "/proc", "/sys"],
        },
        "full + read /": {**base, "read": ["/"], "hidden": []},
        "full + read / write /": {**base, "read": ["/"], "write": ["/"], "hidden": []},
    }
    out = {}
    for name, pol in list(variants.items())[:3]:
        env = dict(os.environ)
        mode = "preinit" if "preinit" in name else "plain"
        r = subprocess.run(
            [sys.executable, "-I", "-c", CHILD, str(REPO), json.dumps(pol), mode],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        out[name] = {"rc": r.returncode, "out": r.stdout[-500:], "err": r.stderr[-800:]}
        print(name, r.returncode, r.stdout.strip()[-200:], r.stderr.strip()[-300:], flush=True)
    print(json.dumps(base["write"]))
    Path(sys.argv[1]).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
