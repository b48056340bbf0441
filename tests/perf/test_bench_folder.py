"""`gpulab bench` covers a folder exercise (issue 45) whose exercise.toml
says `tools = [..., "bench"]`: it is listed, its cases and baseline come
from its spec.py through the judge's loader, and the kernel timed is its
folder's reference.py. On the CPU, up to the timing (the GPU step
`bench-folder` in scripts/tools/gpu_session.sh runs the rest): the cases are
drawn on the CPU (BenchContext's device patched; they are drawn where they
would run, on a GPU), from small TIMING_CASES written for the test. And
`gpulab dev compile` covers one whose tools say "compile": its spec.py's
COMPILE_SPECS compile its reference.py and starter.py (two compiles for one
architecture, on the CPU). No check runs here."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from gpulab.course.content import load_course
from gpulab.targets import bench

TOML = "exercise.toml"
# Small timing cases, so the CPU draws them at once (spec.py's own are 256 MB each).
SMALL_TIMING = 'TIMING_CASES = [{"N": 1000, "dtype": "fp32"}, {"N": 2048, "dtype": "fp16"}]\n'


@pytest.fixture
def gelu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder `gpulab dev new-exercise gelu` writes, in a course of its
    own (listed in its manifest), chosen by GPULAB_CONTENT."""
    from gpulab.cli.commands import dev_new

    root = tmp_path / "course"
    (root / "lessons").mkdir(parents=True)
    (root / "lessons" / "manifest.toml").write_text('exercise_folders = ["exercises"]\n')
    monkeypatch.setenv("GPULAB_CONTENT", str(root))
    assert dev_new.run(argparse.Namespace(name="gelu", dir=str(root / "exercises"))) == 0
    return root / "exercises" / "gelu"


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


def say_bench(folder: Path) -> None:
    edit(folder / TOML, 'status = "ready"', 'status = "ready"\ntools = ["explain", "bench"]')


def small_timing(folder: Path) -> None:
    spec = folder / "spec.py"
    text = spec.read_text()
    start = text.index("TIMING_CASES = [")
    end = text.index("]\n", start) + 2
    spec.write_text(text[:start] + SMALL_TIMING + text[end:])


def test_the_bench_lists_a_folder_exercise_when_its_tools_say_bench(gelu, capsys):
    # As written, the scaffold says `tools` by default: explained, not benched.
    assert load_course().find("gelu").tools == ("explain",)
    assert bench.kernels() == []
    assert bench.main(["gelu"]) == 2
    assert "unknown kernel gelu" in capsys.readouterr().err
    say_bench(gelu)
    course = load_course()
    assert not course.warnings, course.warnings
    assert course.find("gelu").tools == ("explain", "bench")
    assert course.covered_by("bench") == ["gelu"] == bench.kernels()


@pytest.mark.parametrize(
    ("tools", "expect"),
    [
        ('["bench", "profile"]', "field 'tools' must be a list of explain, bench"),
        ('"bench"', "field 'tools' must be a list of explain, bench"),
    ],
)
def test_a_wrong_tool_is_an_error_naming_the_file_and_field(gelu, tools, expect):
    edit(gelu / TOML, 'status = "ready"', f'status = "ready"\ntools = {tools}')
    course = load_course()
    broken = course.find("gelu")
    assert broken is not None and not broken.ready and broken.tools == ()
    assert broken.error.startswith(f"{gelu / TOML}: {expect}"), broken.error
    assert bench.kernels() == []


@pytest.mark.parametrize(
    ("cut", "name"),
    [
        ("def baseline(x):", "baseline"),
        ("TIMING_CASES = [", "TIMING_CASES"),
    ],
)
def test_bench_needs_what_spec_py_times_and_its_baseline(gelu, cut, name):
    """Read from spec.py unrun, as the lab reads it: named before any GPU is asked."""
    say_bench(gelu)
    edit(gelu / "spec.py", cut, cut.replace(name, f"unread_{name}"))
    broken = load_course().find("gelu")
    assert broken is not None and not broken.ready
    assert broken.error.startswith(f"{gelu / 'spec.py'}: `{name}` is missing ("), broken.error
    assert broken.error.endswith(f"{TOML}'s field 'tools' names bench"), broken.error


def test_cases_for_draws_spec_timing_cases_each_with_its_baseline(gelu, monkeypatch):
    import torch
    import torch.nn.functional as F

    say_bench(gelu)
    small_timing(gelu)
    # The folder grader draws a case where it runs (a torch.Generator on
    # BenchContext.device, "cuda"): the CPU here.
    monkeypatch.setattr(bench.BenchContext, "device", "cpu")
    cases = bench.cases_for("gelu", bench.BenchContext())
    assert [c.name for c, _ in cases] == ["N=1000 fp32", "N=2048 fp16"]
    for case, baselines in cases:
        (x,) = case.args
        assert x.device.type == "cpu" and x.dtype == case.dtype
        assert case.sizes == {"N": x.numel()} and case.shape == f"N={x.numel()}"
        assert list(baselines) == ["F.gelu"]  # spec.py's BASELINE_NAME
        assert torch.equal(baselines["F.gelu"](), F.gelu(x, approximate="tanh"))
    # Drawn from spec.py's public seeds alone (a bench has no secret): the same each time.
    again = bench.cases_for("gelu", bench.BenchContext())
    assert all(
        torch.equal(a.args[0], b.args[0]) for (a, _), (b, _) in zip(cases, again, strict=True)
    )
    # Without BASELINE_NAME, spec.py's baseline is "torch".
    edit(gelu / "spec.py", 'BASELINE_NAME = "F.gelu"', "")
    assert [list(b) for _, b in bench.cases_for("gelu", bench.BenchContext())] == [["torch"]] * 2


def test_a_spec_without_a_baseline_is_named_not_benched(gelu, monkeypatch):
    """Where exercise.toml does not say bench, the lab lets spec.py go without
    a baseline; the bench, asked anyway, names the file."""
    small_timing(gelu)
    edit(gelu / "spec.py", "def baseline(x):", "def _baseline(x):")
    monkeypatch.setattr(bench.BenchContext, "device", "cpu")
    with pytest.raises(bench.NotBenchable) as exc:
        bench.cases_for("gelu", bench.BenchContext())
    assert str(exc.value) == (
        f"{gelu / 'spec.py'}: `baseline` is missing (torch's own op, timed beside the reference)"
    )


def test_load_reference_takes_the_folders_reference_py(gelu):
    say_bench(gelu)
    fn = bench.load_reference("gelu", "gelu")
    assert fn.__code__.co_filename == str(gelu / "reference.py")
    assert fn.__module__ == "reference_gelu"
    course = load_course()
    assert course.find("gelu").reference_path == gelu / "reference.py"
    assert bench.load_reference("gelu", "BLOCK", course) == 1024
    with pytest.raises(ValueError, match="softmax is not an exercise of the course"):
        bench.load_reference("softmax", "softmax", course)


COMPILE_SPECS = """
from gpulab.measure import compile_specs as cs

COMPILE_SPECS = [cs.Spec("gelu_kernel", "fp32", cs.simple("fp32", {"BLOCK": 1024}, 4), starter="gelu_kernel")]
"""


def test_dev_compile_takes_the_folders_reference_and_starter(gelu):
    from gpulab.cli.commands import dev_compile
    from gpulab.judge import loader
    from gpulab.measure import compile_specs

    root = gelu.parent.parent
    assert loader.compile_specs(root) == ((), [])  # the scaffold's tools do not say compile
    edit(gelu / TOML, 'status = "ready"', 'status = "ready"\ntools = ["compile"]')
    assert "`COMPILE_SPECS` is missing" in load_course().find("gelu").error
    with (gelu / "spec.py").open("a") as f:
        f.write(COMPILE_SPECS)
    assert load_course().find("gelu").tools == ("compile",)
    specs, errors = loader.compile_specs(root)
    assert errors == [] and [(s.exercise, s.folder) for s in specs] == [("gelu", gelu)]
    jobs = list(compile_specs.jobs(root, specs))
    assert [(j.name, j.role) for j in jobs] == [
        ("gelu:gelu_kernel fp32", "reference"),
        ("gelu:gelu_kernel (starter)", "starter"),
    ]
    files = [j.fn.fn.__code__.co_filename for j in jobs]
    assert files == [str(gelu / "reference.py"), str(gelu / "starter.py")]
    assert jobs[0].signature == {
        "out_ptr": "*fp32",
        "x_ptr": "*fp32",
        "n": "i32",
        "BLOCK": "constexpr",
    }
    rows = dev_compile.compile_matrix([80])
    assert [(r.role, r.arch, r.ok) for r in rows] == [
        ("reference", "sm_80", True),
        ("starter", "sm_80", True),
    ], [r.error for r in rows]


def test_compile_specs_that_name_a_kernels_file_are_named(gelu):
    from gpulab.judge import folder_spec

    with (gelu / "spec.py").open("a") as f:
        f.write(COMPILE_SPECS.replace('starter="gelu_kernel"', 'file="gelu"'))
    with pytest.raises(folder_spec.SpecError) as caught:
        folder_spec.load(gelu / "spec.py")
    assert str(caught.value) == (
        f"{gelu / 'spec.py'}: COMPILE_SPECS[0]: `file` names a file of kernels/; a folder "
        "exercise's kernels are its reference.py's"
    )
    (gelu / "spec.py").write_text((gelu / "spec.py").read_text() + "COMPILE_SPECS = [3]\n")
    with pytest.raises(folder_spec.SpecError, match="COMPILE_SPECS must be a list of gpulab"):
        folder_spec.load(gelu / "spec.py")
