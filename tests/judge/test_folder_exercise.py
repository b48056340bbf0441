"""A kernel exercise added as one folder, outside the package, registered by
the course's manifest (issue 45): `gpulab dev new-exercise gelu` writes it,
`gpulab dev check gelu` proves it (the starter fails, the reference
passes), and a check of it is graded, replayed and costed on a datasheet's
roofline as softmax's is on the CPU, with nothing edited outside its folder.

Three real checks in all (the first two tests); the rest reads spec.py's
rules without a sandbox."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpulab.course import exercise_template
from tests.conftest import gpulab_env


def instructor_course(tmp_path: Path) -> tuple[Path, Path]:
    """A course whose manifest lists a folder of the instructor's, outside
    the package: (the course folder, the exercises folder)."""
    root = tmp_path / "course"
    (root / "lessons").mkdir(parents=True)
    exercises = tmp_path / "instructor" / "exercises"
    exercises.mkdir(parents=True)
    (root / "lessons" / "manifest.toml").write_text(f'exercise_folders = ["{exercises}"]\n')
    return root, exercises


def test_new_exercise_then_dev_check_proves_it(run_gpulab, tmp_path):
    root, exercises = instructor_course(tmp_path)
    env = gpulab_env(tmp_path / "ws", GPULAB_CONTENT=str(root))
    made = run_gpulab("dev", "new-exercise", "gelu", "--dir", str(exercises), env=env)
    assert made.returncode == 0, made.stderr
    assert "lists it already" in made.stdout
    # Two real checks on the CPU (the Triton interpreter): starter, reference.
    proved = run_gpulab("dev", "check", "gelu", "--device", "cpu", env=env)
    assert proved.returncode == 0, (proved.stdout, proved.stderr)
    assert "✔ 01_gelu: starter fails, reference passes" in proved.stdout
    assert "exercise OK" in proved.stderr


def test_a_check_is_graded_replayed_and_costed_like_softmax(run_gpulab, tmp_path):
    root, exercises = instructor_course(tmp_path)
    folder = exercises / "gelu"
    exercise_template.write(folder, "gelu")
    env = gpulab_env(tmp_path / "ws", GPULAB_CONTENT=str(root))
    where = run_gpulab("where", "gelu", env=env)
    assert where.returncode == 0, where.stderr
    mine = Path(where.stdout.strip())  # the workspace's copy, made from the starter
    assert mine == tmp_path / "ws" / "exercises" / "gelu.py" and "TODO" in mine.read_text()
    mine.write_text((folder / "reference.py").read_text())
    checked = run_gpulab("check", "gelu", "--json", "--explain", env=env)
    r = json.loads(checked.stdout)
    assert r["status"] == "passed", (r["summary"], r.get("message"))
    assert [c["name"] for c in r["cases"]] == [
        "N=1 fp32",
        "N=3 fp16",
        "N=1000 fp32",
        "N=1025 bf16 a partial last block",
        "N=4099 fp16 several blocks",
        "N=4099 fp16 several blocks second draw",
    ]
    assert r["mode"] == "interpreter" and r["verdict"] == "judge"
    # The replay ran each passing case's kernels apart from the file, and
    # counted what they moved: the cost model's estimate on a datasheet's
    # roofline, from exercise.toml's formulas (2 * 4099 * 2 bytes at least).
    assert r["stages"]["replay"] > 0
    cost = r["cost"]
    assert cost["case"].startswith("N=4099 fp16") and cost["minimum_bytes"] == 2 * 4099 * 2
    assert cost["gpu"] and cost["bound"] == "bandwidth"
    assert 1.0 <= cost["ratio"] < 1.01 and cost["best_fraction"] > 0.95
    # --explain covers it as it covers softmax: the compiled kernel's facts,
    # on spec.py's timing cases, against the datasheet.
    assert "diagnosis" in r and not r["explain"].get("error"), r.get("explain")
    assert r["explain"]["gpu"] and r["explain"]["basis"]
    # Recorded in the learner's progress, as any exercise's check is.
    listed = json.loads(run_gpulab("list", "--json", env=env).stdout)["lessons"]
    assert [(row["exercise"], row["status"]) for row in listed] == [("gelu", "passed")]


# --- spec.py's rules, without a sandbox ---------------------------------------


@pytest.fixture
def gelu(tmp_path):
    """The scaffold's GELU in a course of its own: (course folder, exercise folder)."""
    root, exercises = instructor_course(tmp_path)
    exercise_template.write(exercises / "gelu", "gelu")
    return root, exercises / "gelu"


class Ctx(SimpleNamespace):
    """A CaseContext on the CPU, with the public seeds as they are."""

    device = "cpu"
    interpreter = True

    def seed(self, public: int) -> int:
        return public


def test_the_loader_makes_the_folders_grader_a_kernel_spec(gelu):
    import torch

    from gpulab.judge import loader
    from gpulab.judge.folder_grader import FolderGrader
    from gpulab.judge.kernel_guards import guards_for

    root, folder = gelu
    grader = loader.load("gelu", str(root))
    assert isinstance(grader, FolderGrader)
    spec = grader.kernel_spec(Ctx())
    assert spec.tolerance(torch.float32) == (1e-5, 1e-5)
    assert spec.tolerance(torch.float16) == (1e-5, 2e-3)  # gpulab's default
    assert spec.baseline_name == "F.gelu" and spec.grades[0] == (0.80, "A")
    assert "torch.nn.functional.gelu" in guards_for(spec).banned
    cases = grader.correctness_cases(Ctx())
    assert [c.name for c in cases][-1] == "N=4099 fp16 several blocks second draw"
    assert cases[-1].args[0].shape == cases[-2].args[0].shape
    assert not torch.equal(cases[-1].args[0], cases[-2].args[0])  # drawn afresh
    assert cases[2].sizes == {"N": 1000} and cases[2].dtype == torch.float32
    ref = spec.reference(cases[2])
    assert ref.dtype == torch.float64 and spec.expect(cases[2]).shape == (1000,)


SPEC_HEAD = "import torch\n\ndef reference(x):\n    return x.double()\n\n"
MAKE = "def make_inputs(N, dtype, generator, device):\n    return torch.ones(N, dtype=dtype)\n\n"
ONE = "CASES = [{'N': 4, 'dtype': 'fp32'}]\n"


@pytest.mark.parametrize(
    ("body", "expect"),
    [
        (MAKE, "spec.py: `CASES` is missing"),
        (ONE, "spec.py: `make_inputs` is missing"),
        (MAKE + "CASES = []\n", "spec.py: CASES is empty"),
        (MAKE + "CASES = {'N': 4}\n", "spec.py: CASES must be a list of cases (dicts), got dict"),
        (MAKE + "CASES = [{'N': 4}]\n", "CASES[0]: 'dtype' is missing: it must be one of fp32"),
        (MAKE + "CASES = [{'N': 4, 'dtype': 'float32'}]\n", "CASES[0]: 'dtype' is 'float32'"),
        (MAKE + "CASES = [{'N': -1, 'dtype': 'fp32'}]\n", "size 'N' must be a whole number >= 0"),
        (MAKE + ONE + "TIMING_CASE = []\n", "`TIMING_CASE` is no name gpulab reads: did you"),
        (MAKE + ONE + "TOLERANCE = {'fp32': 1e-3}\n", "TOLERANCE['fp32'] must be (atol, rtol)"),
        (MAKE + ONE + "GRADES = [(0.5, 'A'), (0.9, 'B')]\n", "GRADES must go from the best"),
        (MAKE + ONE + "BANNED = ['gelu']\n", "BANNED must be a list of torch functions"),
        (MAKE + ONE + "baseline = 3\n", "spec.py: `baseline` must be a function"),
        (MAKE + ONE + "x = 1 / 0\n", "spec.py:10: importing it raised ZeroDivisionError"),
    ],
)
def test_spec_problems_name_the_file_and_the_name(gelu, body, expect):
    from gpulab.judge.folder_spec import SpecError, load

    _, folder = gelu
    (folder / "spec.py").write_text(SPEC_HEAD + body)
    with pytest.raises(SpecError) as caught:
        load(folder / "spec.py")
    assert expect in str(caught.value) and str(folder / "spec.py") in str(caught.value)


def test_a_check_of_a_broken_spec_is_gpulabs_error_in_words(gelu, tmp_path):
    from gpulab.judge.harness import grade_request
    from gpulab.wire.check_request import CheckRequest

    root, folder = gelu
    (folder / "spec.py").write_text(SPEC_HEAD + MAKE + "CASES = [{'N': 4}]\n")
    request = CheckRequest(
        exercise="gelu", function="gelu", file=str(tmp_path / "x.py"), content_root=str(root)
    )
    result = grade_request(request, "cpu", channel=None, sandbox=None)  # type: ignore[arg-type]
    assert result.status == "error"
    assert result.summary.startswith(f"{folder / 'spec.py'}: CASES[0]: 'dtype' is missing")


def test_errors_of_the_specs_own_code_end_the_check_as_gpulabs(gelu):
    from gpulab.judge import folder_grader
    from gpulab.judge.context import GradeFailed
    from gpulab.wire.status import Status

    root, folder = gelu
    spec = folder / "spec.py"
    spec.write_text(spec.read_text().replace('x.double(), approximate="tanh"', "x.double(), 3"))
    grader = folder_grader.load(folder)
    case = grader.correctness_cases(Ctx())[0]
    with pytest.raises(GradeFailed) as caught:
        grader.kernel.reference(case)
    assert caught.value.status == Status.ERROR
    assert caught.value.summary.startswith("spec.py: reference (case N=1 fp32) raised TypeError")
    line = next(n for n, t in enumerate(spec.read_text().splitlines(), 1) if "x.double(), 3" in t)
    assert f"At {spec}:{line}." in caught.value.message
    # make_inputs that returns no tensor, and formulas that name no size.
    grader.spec.make_inputs = lambda **kw: "x"
    with pytest.raises(GradeFailed, match="make_inputs returned str for case N=1 fp32"):
        grader.correctness_cases(Ctx())
    grader = folder_grader.load(folder)
    ctx = Ctx(request=SimpleNamespace(bytes="2*M*elt", flops=""))
    with pytest.raises(GradeFailed, match="exercise.toml's bytes formula does not fit case N=1"):
        grader._formulas_fit(ctx, grader.correctness_cases(ctx))


def test_the_sandbox_cannot_read_a_registered_folder(gelu, tmp_path):
    from gpulab.judge.policy import policy_for
    from gpulab.wire.check_request import CheckRequest

    root, folder = gelu
    mine = tmp_path / "ws" / "gelu.py"

    def hidden(file: Path) -> list[str]:
        request = CheckRequest(
            exercise="gelu", function="gelu", file=str(file), content_root=str(root)
        )
        return policy_for(request, "cpu", tmp_path / "p", tmp_path / "c").hidden

    assert str(folder) in hidden(mine)
    # `gpulab dev check` grades the reference itself, in its folder.
    assert str(folder) not in hidden(folder / "reference.py")
