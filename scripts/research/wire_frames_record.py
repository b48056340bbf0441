"""Record the frames of one real CPU check (issue 45: the codec measured on
real frames). Runs a check of `EXERCISE`'s reference with a sitecustomize
that logs, in the judge, every frame it writes (requests, trusted) and reads
(replies, untrusted) to OUT.jsonl: {"dir": "out"|"in", "frame": ...}.

    python scripts/research/wire_frames_record.py softmax /tmp/frames.jsonl
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

HOOK = """
import json, os
import gpulab.wire.protocol as p
_log = open(os.environ["GPULAB_FRAME_LOG"], "a")
_w, _r = p.write_frame, p.read_frame
def write_frame(fd, message):
    _log.write(json.dumps({"dir": "out", "frame": message}) + "\\n"); _log.flush()
    return _w(fd, message)
def read_frame(fd):
    m = _r(fd)
    _log.write(json.dumps({"dir": "in", "frame": m}) + "\\n"); _log.flush()
    return m
p.write_frame, p.read_frame = write_frame, read_frame
"""


def main() -> None:
    exercise, out = sys.argv[1], Path(sys.argv[2]).resolve()
    hook = Path(tempfile.mkdtemp())
    (hook / "sitecustomize.py").write_text(HOOK)
    out.unlink(missing_ok=True)
    os.environ["GPULAB_FRAME_LOG"] = str(out)
    os.environ["PYTHONPATH"] = str(hook) + os.pathsep + os.environ.get("PYTHONPATH", "")
    from gpulab.course.content import load_course
    from gpulab.lab.runner import run_check

    lesson = load_course().find(exercise)
    assert lesson is not None, exercise
    work = Path(tempfile.mkdtemp())
    file = work / f"{exercise}.py"
    file.write_text(lesson.reference_path.read_text())
    result = run_check(lesson, file, device="cpu", workspace=str(work / "ws"))
    print(result.status, sum(1 for _ in out.open()), "frames ->", out)


if __name__ == "__main__":
    main()
