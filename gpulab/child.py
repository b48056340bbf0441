"""The child process that imports and grades the learner's file.

Started by gpulab.runner as `python -m gpulab.child`; reads its request as
JSON on stdin and reports signed events on the file descriptor named in
GPULAB_CHANNEL_FD. Never imported by the lab's own process.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sys
import traceback
from typing import Any


class Channel:
    """Signed JSON lines to the parent. The key lives only in this closure."""

    def __init__(self, fd: int, key: bytes) -> None:
        self._fd = fd

        def _sign(payload: str) -> str:
            return hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()

        self._sign = _sign

    def send(self, event: dict[str, Any]) -> None:
        payload = json.dumps(event, default=str)
        data = f"{payload}\t{self._sign(payload)}\n".encode()
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]

    def stage(self, text: str) -> None:
        self.send({"type": "stage", "text": text})


def _choose_device(wanted: str) -> str:
    """'cuda' or 'cpu'. Decided before triton is imported (the interpreter
    must be switched on by environment before that import)."""
    if wanted == "cpu":
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if wanted == "cuda":
        raise RuntimeError("a CUDA GPU was asked for (--device cuda) but torch sees none")
    return "cpu"


def main() -> int:
    request = json.loads(sys.stdin.read())
    key = bytes.fromhex(request.pop("key"))
    channel = Channel(int(os.environ.pop("GPULAB_CHANNEL_FD")), key)
    del key
    try:
        channel.stage("starting")
        device = _choose_device(request.get("device", "auto"))
        if device == "cpu":
            os.environ["TRITON_INTERPRET"] = "1"
            import warnings

            # The interpreter evaluates masked-off lanes too (numpy warns about
            # -inf - -inf there); that noise is not the learner's output.
            warnings.filterwarnings("ignore", category=RuntimeWarning,
                                    module=r"triton\.runtime\.interpreter")
        from gpulab.grading.harness import grade_request

        result = grade_request(request, device, channel)
    except Exception as exc:  # a gpulab bug or an environment problem, not the learner's
        low = str(exc).lower()
        if any(k in low for k in ("illegal memory access", "misaligned address",
                                  "device-side assert", "illegal instruction")):
            # Reported late, at a later synchronisation, but caused by a kernel.
            result = {"status": "failed",
                      "summary": f"CUDA error from a kernel: {str(exc).splitlines()[0]}",
                      "message": "An out-of-bounds load or store (check your masks and "
                                 "offsets). The next check runs in a fresh process."}
            channel.send({"type": "result", "result": result})
            os._exit(0)
        result = {
            "status": "error",
            "summary": f"gpulab could not run this check: {type(exc).__name__}: {exc}",
            "message": traceback.format_exc(),
        }
    channel.send({"type": "result", "result": result})
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: a learner's atexit hook or a wedged CUDA
    # context must not turn a reported result into a hang.
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
