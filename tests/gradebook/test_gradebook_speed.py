"""Speed scored fairly across GPUs: the submission against the reference
timed on the same GPU in the same batch. Results are made from a real
check recorded on an H200 (benchmarks/h200-2026-12-03); an H100's are the
same kernels 1.6x slower, the submission and the reference alike."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.gradebook.classroom import Replay, recorded

H200 = REPO / "benchmarks" / "h200-2026-12-03" / "pyspy-softmax-check-result.json"


def _scaled(result: dict, factor: float, gpu: str) -> dict:
    out = copy.deepcopy(result)
    out["device"] = gpu
    out["timing"]["device"] = gpu
    out["timing"]["ms"] *= factor
    for case in out["timing"]["cases"]:
        case["ms"] *= factor
    return out


@pytest.fixture
def softmax():
    from gpulab.gradebook.config import Assignment, GradeConfig

    cfg = GradeConfig(
        path=Path("/x/gradebook.toml"), name="t", assignments=(Assignment("softmax", 10, 3),)
    )
    return cfg, cfg.assignments[0]


def test_the_same_kernel_scores_the_same_on_an_h200_and_an_h100(softmax):
    from gpulab.gradebook.score import score_run

    cfg, a = softmax
    base = json.loads(H200.read_text())
    scores = []
    for gpu, slower in (("NVIDIA H200", 1.0), ("NVIDIA H100 80GB HBM3", 1.6)):
        reference = {"gpu": gpu, "result": _scaled(base, slower, gpu)}
        learner = _scaled(base, slower * 1.25, gpu)  # 80% of the reference's speed
        s = score_run(learner, reference, a, cfg)
        scores.append(s)
        assert s.status == "passed" and s.timed
        assert s.speed_ratio == pytest.approx(0.8)
        assert gpu in s.speed_note
    assert scores[0].score == scores[1].score
    # 0.8 of the reference: (0.8 - 0.25) / (0.9 - 0.25) of the 3 speed points.
    assert scores[0].score == pytest.approx(7 + 3 * 0.55 / 0.65, abs=1e-3)
    fast = score_run(_scaled(base, 0.9, "NVIDIA H200"), {"result": base}, a, cfg)
    assert fast.score == 10  # at or past full_at: every speed point
    slow = score_run(_scaled(base, 5.0, "NVIDIA H200"), {"result": base}, a, cfg)
    assert slow.score == 7  # at or below zero_at: none


def test_on_the_cpu_correctness_only_and_it_says_so(softmax):
    from gpulab.gradebook.score import NOT_TIMED_CPU, score_run

    cfg, a = softmax
    s = score_run(recorded("softmax", "honest"), None, a, cfg)
    assert (s.status, s.score, s.timed, s.speed_note) == ("passed", 7.0, False, NOT_TIMED_CPU)


def test_an_implausible_time_earns_no_speed_points(softmax):
    from gpulab.gradebook.score import score_run

    cfg, a = softmax
    base = json.loads(H200.read_text())
    odd = _scaled(base, 0.1, "NVIDIA H200")
    odd["timing"]["implausible"] = "faster than the roofline allows"
    s = score_run(odd, {"result": base}, a, cfg)
    assert s.score == 7 and "implausible" in s.speed_note


def test_a_gpu_worker_times_the_reference_once_per_gpu(tmp_path):
    """The worker on a GPU: each timed task carries the reference's result,
    checked once per batch and GPU (its UUID), whoever asks first."""
    from gpulab.gradebook.plan import Task, write_batch
    from gpulab.gradebook.worker import Worker
    from tests.gradebook.classroom import copy_content, submission_text

    content = copy_content(tmp_path / "content")
    base = json.loads(H200.read_text())
    tasks = []
    for s in ("s1", "s2"):
        f = tmp_path / "store" / s / "softmax.py"
        f.parent.mkdir(parents=True)
        f.write_text(submission_text("softmax", "honest"))
        tasks.append(Task(s, "softmax", 1, "0" * 64, str(f), "g", "r", True, "new"))
    batch = write_batch(tmp_path, tasks, device="cuda", timeout=None, content_root=content)

    class OnGpu(Replay):
        def __call__(self, lesson, file, timeout, timing, device):
            assert timing and device == "cuda"
            self.calls.append((file.name, "reference" if file.parent.name == "kernels" else "mine"))
            return base

    check = OnGpu()
    for i in range(2):  # two workers (array tasks) on the same GPU
        Worker(batch, check=check, gpu=("NVIDIA H200", "GPU-1234")).grade_student(i)
    assert [kind for _, kind in check.calls] == ["reference", "mine", "mine"]
    results = sorted((tmp_path / "work" / "results").rglob("softmax.json"))
    for path in results:
        record = json.loads(path.read_text())
        assert record["gpu"] == "NVIDIA H200" and record["gpu_uuid"] == "GPU-1234"
        assert record["reference"]["gpu_uuid"] == "GPU-1234"
        assert record["reference"]["result"]["timing"]["cases"]


@pytest.mark.parametrize(
    ("kind", "days", "factor"),
    [
        ("none", 3, 1.0),
        ("zero", 1, 0.0),
        ("zero", 0, 1.0),
        ("percent_per_day", 2, 0.8),
        ("percent_per_day", 12, 0.0),
    ],
)
def test_the_late_policies(kind, days, factor):
    from gpulab.gradebook.config import LatePolicy

    assert LatePolicy(kind, percent_per_day=10).factor(days) == pytest.approx(factor)


def test_days_late_count_the_grace_and_the_extension(tmp_path):
    from datetime import datetime, timedelta, timezone

    from gpulab.gradebook.config import load_config

    (tmp_path / "gradebook.toml").write_text(
        '[late]\npolicy = "zero"\ngrace_minutes = 30\n\n'
        '[[assignment]]\nexercise = "softmax"\ndue = 2026-12-10T23:59:00Z\n\n'
        '[[extension]]\nstudent = "s2"\ndue = "2026-12-12"\n'
    )
    cfg = load_config(tmp_path / "gradebook.toml", ["softmax"])
    due = datetime(2026, 12, 10, 23, 59, tzinfo=timezone.utc)
    assert cfg.days_late("s1", "softmax", due + timedelta(minutes=29)) == 0
    assert cfg.days_late("s1", "softmax", due + timedelta(minutes=31)) == 1
    assert cfg.days_late("s1", "softmax", due + timedelta(days=1, minutes=31)) == 2
    # An extension to a date: the end of that day, every assignment.
    assert cfg.days_late("s2", "softmax", datetime(2026, 12, 12, 23, 0, tzinfo=timezone.utc)) == 0
    assert cfg.due_for("s2", "softmax") == (
        datetime(2026, 12, 12, 23, 59, 59, tzinfo=timezone.utc),
        True,
    )


def test_a_reference_file_that_is_no_record_is_timed_again(tmp_path):
    """The reference kept beside the results is read back only where it is
    a JSON object; a damaged one is timed again and replaced."""
    from gpulab.gradebook.plan import Task, write_batch
    from gpulab.gradebook.worker import Worker
    from tests.gradebook.classroom import copy_content, submission_text

    content = copy_content(tmp_path / "content")
    base = json.loads(H200.read_text())
    f = tmp_path / "store" / "s1" / "softmax.py"
    f.parent.mkdir(parents=True)
    f.write_text(submission_text("softmax", "honest"))
    task = Task("s1", "softmax", 1, "0" * 64, str(f), "g", "r", True, "new")
    batch = write_batch(tmp_path, [task], device="cuda", timeout=None, content_root=content)
    kept = Worker(batch, check=Replay(), gpu=("NVIDIA H200", "GPU-1234")).results / "_reference"
    kept.mkdir(parents=True)
    (kept / "softmax.GPU-1234.json").write_text("[1, 2]")

    class OnGpu(Replay):
        def __call__(self, lesson, file, timeout, timing, device):
            self.calls.append((file.name, "reference" if file.parent.name == "kernels" else "mine"))
            return base

    check = OnGpu()
    Worker(batch, check=check, gpu=("NVIDIA H200", "GPU-1234")).grade_student(0)
    assert [kind for _, kind in check.calls] == ["reference", "mine"]
    assert json.loads((kept / "softmax.GPU-1234.json").read_text())["gpu_uuid"] == "GPU-1234"
