"""Issue 21: `gpulab check EX --explain` says what limits the kernel.

The rules on hand-made facts (one per kind), the TTIR reader, the launch
tracer's shared buffers, the cached case descriptions and when a check is
explained. The slow-but-correct variants are in test_diagnosis_variants.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpulab.explain import KINDS, diagnose
from gpulab.explain.kinds import where

REPO = Path(__file__).resolve().parents[2]

ROOT = Path(__file__).resolve().parents[2]


# --- the rules on hand-made facts ---------------------------------------------------

H100 = {
    "name": "H100 SXM",
    "sms": 132,
    "bandwidth": 3.35e12,
    "l2_mb": 50,
    "flops": {"fp32": 67e12, "fp16": 989e12, "bf16": 989e12},
    "arch": "sm_90",
}


def _facts(kind="memory", exercise="softmax", launches=None, compiled=None, **case):
    c = {
        "name": "c",
        "dtype": "fp16",
        "bytes": 2 * 8192 * 4096 * 2,
        "flops": 5 * 8192 * 4096,
        "work": 2 * 8192 * 4096 * 2,
        "launches": launches or [],
        **case,
    }
    return {
        "exercise": exercise,
        "kind": kind,
        "gpu": H100,
        "cases": [c],
        "compiled": compiled or {},
    }


def _info(**kw):
    base = {
        "ok": True,
        "arch": "sm_90",
        "label": "k",
        "registers": 32,
        "spill_stores": 0,
        "spill_loads": 0,
        "shared": 0,
        "num_warps": 4,
        "blocks_per_sm": 16,
        "limited_by": "threads",
        "occupancy": 1.0,
        "fits": True,
        "tensor_cores": "",
        "loads": {"x_ptr": 1},
        "atomics": 0,
        "loops": 0,
        "dot": False,
        "grouped": False,
    }
    return {**base, **kw}


# 320 KiB of shared memory a program (fp32 tiles at D=128, as on the H200):
# more than the 227 KiB one program may have on sm_90.
NO_FIT = _info(
    shared=327680,
    blocks_per_sm=0,
    fits=False,
    occupancy=0.0,
    limited_by="shared memory",
    smem_per_block=232448,
)


def _launch(programs=8192, **kw):
    return {
        "kernel": "k",
        "key": "K",
        "programs": programs,
        "grid": [programs],
        "num_warps": 4,
        "constexprs": {"BLOCK": 4096},
        **kw,
    }


@pytest.mark.parametrize(
    "facts, top",
    [
        (_facts(launches=[_launch()], compiled={"K": _info()}), None),
        (
            _facts(launches=[_launch(programs=1)], compiled={"K": _info(loops=1)}),
            "too_few_programs",
        ),
        (
            _facts(
                launches=[_launch()],
                compiled={"K": _info(spill_stores=700, spill_loads=700, registers=255)},
            ),
            "register_spills",
        ),
        (
            _facts(
                launches=[_launch()],
                compiled={"K": _info(occupancy=0.06, blocks_per_sm=4, num_warps=1)},
            ),
            "low_occupancy",
        ),
        (_facts(launches=[_launch()], compiled={"K": _info(loads={"x_ptr": 3})}), "extra_bytes"),
        (
            _facts(launches=[_launch(programs=140)], compiled={"K": _info(blocks_per_sm=1)}),
            "tail_wave",
        ),
        (
            _facts(
                launches=[_launch(programs=64) for _ in range(20)],
                compiled={"K": _info()},
                bytes=4096,
                work=4096,
            ),
            "launch_bound",
        ),
        (_facts(launches=[_launch()], compiled={"K": _info(atomics=2)}), "serialised_reduction"),
        (
            _facts(
                kind="compute",
                exercise="matmul",
                launches=[_launch()],
                compiled={"K": _info(dot=True)},
                flops=2 * 4096**3,
            ),
            "no_tensor_cores",
        ),
        (
            _facts(
                kind="compute",
                exercise="flash_attention",
                launches=[_launch()],
                compiled={"K": _info(dot=True, tensor_cores="wgmma")},
                flops=4 * 2**30 * 64,
                bytes=2**26,
                exps=2**32,
            ),
            "wrong_roof",
        ),
        # Little's law: 32 programs of 192 bytes on an SM, against ~15 KiB.
        (
            _facts(
                launches=[_launch(programs=2**22)],
                compiled={"K": _info(blocks_per_sm=32, num_warps=1, occupancy=0.5)},
                bytes=3 * 2**26 * 4,
                work=3 * 2**26 * 4,
            ),
            "low_occupancy",
        ),
        # 16x16 tl.dot tiles: 8 FLOP per byte, a quarter of what the tensor
        # cores need even from shared memory.
        (
            _facts(
                kind="compute",
                exercise="matmul",
                launches=[_launch(programs=2**18)],
                compiled={
                    "K": _info(
                        dot=True,
                        grouped=True,
                        tensor_cores="mma",
                        loops=1,
                        loop_load_bytes=1024,
                        loop_dot_flops=8192,
                    )
                },
                flops=2 * 8192**3,
                bytes=3 * 8192**2 * 2,
            ),
            "wrong_roof",
        ),
        # Spills against a GPU 88% idle (16 programs, 132 SMs, the H200's
        # flash_attention one-program-per-head run): the idle GPU first.
        (
            _facts(
                kind="compute",
                exercise="flash_attention",
                launches=[_launch(programs=16)],
                compiled={
                    "K": _info(
                        dot=True, tensor_cores="wgmma", spill_stores=800, spill_loads=800, loops=1
                    )
                },
                flops=4 * 2**30 * 64,
                bytes=2**26,
            ),
            "too_few_programs",
        ),
        # 320 KiB of shared memory a program (fp32 tiles at D=128): no launch.
        (
            _facts(
                launches=[_launch()],
                compiled={"K": NO_FIT},
            ),
            "low_occupancy",
        ),
        # An intermediate as big as the input, written and read back.
        (
            _facts(
                launches=[_launch(), _launch(kernel="k2")],
                compiled={"K": _info()},
                intermediates=[{"name": "n_ptr", "bytes": 2**28, "kernels": ["k", "k2"]}],
                bytes=2**29,
            ),
            "extra_bytes",
        ),
    ],
)
def test_rules_top_kind(facts: dict, top: str | None) -> None:
    found = diagnose(facts)
    assert (found[0]["kind"] if found else None) == top, found
    assert [d["severity"] for d in found] == sorted((d["severity"] for d in found), reverse=True)


def test_every_kind_points_at_a_real_lesson_section() -> None:
    from gpulab.course.content import load_course
    from gpulab.explain.kinds import CAUSES, sections_of

    course = load_course(ROOT)
    # The course says where every kind is taught (the manifest's explain_sections).
    assert {kind for kind, _, _ in course.explain_sections} == set(KINDS)
    assert not course.warnings, course.warnings
    for exercise in course.covered_by("explain"):
        mine = sections_of(course.find(exercise), course)
        # The manifest's keys are kinds or a rule's causes (a typo would never match).
        assert set(mine) <= set(KINDS) | set(CAUSES), (exercise, mine)
        for kind in KINDS:
            for cause in ("", *(c for c, k in CAUSES.items() if k == kind)):
                w = where(kind, mine, cause)
                text = (ROOT / "lessons" / w["lesson"] / "lesson.md").read_text()
                assert f"## {w['section']}\n" in text, (kind, exercise, w)


def test_an_exercise_points_a_finding_at_its_own_lesson() -> None:
    # The manifest's explain_sections of matmul: a kind, and a rule's finer cause.
    from gpulab.course.content import load_course
    from gpulab.explain.kinds import sections_of

    course = load_course(ROOT)
    mine = sections_of(course.find("matmul"), course)
    assert where("register_spills", mine) == {
        "lesson": "03_triton_tiled_matmul",
        "section": "Autotuning",
    }
    assert where("wrong_roof", mine, "tile_reuse")["section"] == (
        "Why tiles: reuse from on-chip memory"
    )
    # Another exercise's finer cause reads the course's section for its kind.
    softmax = sections_of(course.find("softmax"), course)
    assert where("wrong_roof", softmax, "tile_reuse") == {
        "lesson": "01_gpu_architecture_tour",
        "section": "The two ceilings, from the datasheet",
    }
    # A course that points a kind nowhere gets advice without a pointer.
    assert where("wrong_roof") == {"lesson": "", "section": ""}


def test_a_course_sections_entry_that_points_nowhere_is_named(tmp_path) -> None:
    import shutil

    from gpulab.course.content import load_course

    root = tmp_path / "course"
    shutil.copytree(ROOT / "lessons", root / "lessons")
    manifest = root / "lessons" / "manifest.toml"
    text = manifest.read_text()
    text = text.replace('tail_wave = ["03_triton_tiled_matmul"', 'tail_wave = ["03_no_such_lesson"')
    text = text.replace('"Why softmax is memory-bound"]', '"No such heading"]', 1)
    manifest.write_text(text.replace("launch_bound = [", "launch_bound = 3 #["))
    course = load_course(root)
    kept = {kind for kind, _, _ in course.explain_sections}
    assert kept == set(KINDS) - {"tail_wave", "extra_bytes", "launch_bound"}
    said = "\n".join(course.warnings)
    assert "tail_wave names lesson '03_no_such_lesson'" in said
    assert "extra_bytes = 'No such heading' is not a heading" in said
    assert 'launch_bound must be ["lesson id", "heading"], got 3' in said
    assert course.find("softmax") is not None  # the rest of the course still works


def test_ttir_counts_three_passes() -> None:
    from gpulab.explain.ttir import analyse

    ttir = """tt.func public @k(%y_ptr: !tt.ptr<f32> loc(1), %x_ptr: !tt.ptr<f32> loc(2)) {
    %a = tt.addptr %x_ptr, %c : !tt.ptr<f32>, i32
    %b = tt.splat %a : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>>
    %v = tt.load %b, %m : tensor<1024x!tt.ptr<f32>>
    %w = tt.load %b, %m : tensor<1024x!tt.ptr<f32>>
    %q = tt.splat %y_ptr : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>>
    %r = "tt.atomic_rmw"(%q, %v) : (tensor<1024x!tt.ptr<f32>>) -> tensor<1024xf32>
    """
    got = analyse(ttir)
    assert got["loads"] == {"x_ptr": 2} and got["atomics"] == 1


def test_big_tiles_and_big_programs_are_not_flagged() -> None:
    """The reference's shapes: 128x128 tiles (64 FLOP/byte), 4 KiB programs."""
    tiles = _facts(
        kind="compute",
        exercise="matmul",
        launches=[_launch(programs=4096)],
        compiled={
            "K": _info(
                dot=True,
                grouped=True,
                tensor_cores="wgmma",
                loops=1,
                loop_load_bytes=2 * 128 * 64 * 2,
                loop_dot_flops=2 * 128 * 128 * 64,
                blocks_per_sm=1,
            )
        },
        flops=2 * 8192**3,
    )
    programs = _facts(launches=[_launch()], compiled={"K": _info(blocks_per_sm=16)})
    assert diagnose(tiles) == [] and diagnose(programs) == []


def test_ttir_halves_are_one_pass_and_loops_count_bytes() -> None:
    from gpulab.explain.ttir import analyse

    # Rotate-half RoPE loads x's two halves: two pointers, one pass.
    halves = """tt.func public @k(%x_ptr: !tt.ptr<bf16> {tt.divisibility = 16 : i32} loc(1)) {
    %a = tt.splat %x_ptr : !tt.ptr<bf16> -> tensor<64x!tt.ptr<bf16>>
    %b = tt.addptr %a, %c : tensor<64x!tt.ptr<bf16>>, tensor<64xi32>
    %x1 = tt.load %a : tensor<64x!tt.ptr<bf16>>
    %x2 = tt.load %b : tensor<64x!tt.ptr<bf16>>
  } loc(#loc)
"""
    got = analyse(halves)
    assert got["loads"] == {"x_ptr": 1} and got["load_bytes"] == 256
    loop = """tt.func public @k(%a_ptr: !tt.ptr<bf16> loc(1), %b_ptr: !tt.ptr<bf16> loc(2)) {
    %p = tt.splat %a_ptr : !tt.ptr<bf16> -> tensor<16x16x!tt.ptr<bf16>>
    %q = tt.splat %b_ptr : !tt.ptr<bf16> -> tensor<16x16x!tt.ptr<bf16>>
    %acc:3 = scf.for %k = %c0 to %n step %c1 iter_args(%pa = %p, %pb = %q) -> (x)  : i32 {
      %a = tt.load %pa, %m : tensor<16x16x!tt.ptr<bf16>> loc(#l1)
      %b = tt.load %pb, %m : tensor<16x16x!tt.ptr<bf16>> loc(#l2)
      %d = tt.dot %a, %b, %c, inputPrecision = tf32 : tensor<16x16xbf16> * tensor<16x16xbf16> -> tensor<16x16xf32> loc(#l3)
    } loc(#l4)
    %again = tt.load %p : tensor<16x16x!tt.ptr<bf16>>
  } loc(#loc)
"""
    got = analyse(loop)
    assert got["loop_load_bytes"] == 1024 and got["loop_dot_flops"] == 8192
    assert got["loads"] == {"a_ptr": 2, "b_ptr": 1}  # a: in the loop, then again after it
    assert got["load_bytes"] == 512


def test_intermediates_are_buffers_shared_by_launches() -> None:
    import torch

    from gpulab.explain.sandbox.plugin import intermediates

    x, y, tmp, part = (torch.empty(n) for n in (64, 64, 64, 4))

    def launch(kernel: str, **tensors: torch.Tensor) -> dict:
        st = {
            k: (t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
            for k, t in tensors.items()
        }
        return {"kernel": kernel, "tensors": st}

    launches = [launch("norm", x=x, n=tmp), launch("rope", n=tmp, y=y), launch("sum", p=part)]
    found = intermediates(launches, ((x,), {}), y)
    assert found == [{"name": "n", "bytes": 256, "kernels": ["norm", "rope"]}]
    assert intermediates(launches[:1], ((x,), {}), y) == []


def test_case_descriptions_are_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second --explain skips FakeTensorMode (and torch._dynamo's import)."""
    from gpulab.explain.judge import cases
    from gpulab.judge import plugin_host

    monkeypatch.setattr(cases, "SHIPPED", tmp_path / "none.json")  # as for a changed grader
    path = cases.cache_file(str(tmp_path))
    first = cases.described_cases("softmax", "cpu", path, plugin_host)
    assert first and first[0]["args"]["__tuple__"][0]["__tensor__"]["shape"] and first[0]["dtype"]
    assert path is not None and path.is_file()

    def boom(*a: object) -> None:
        raise AssertionError("built the cases again")

    monkeypatch.setattr(cases, "timed_cases", boom)
    assert cases.described_cases("softmax", "cpu", path, plugin_host) == first


def test_shipped_case_descriptions_are_current(monkeypatch: pytest.MonkeyPatch) -> None:
    """gpulab/data/explain_cases.json is what the graders build today (else
    run gpulab.explain.judge.cases.write_shipped(gpulab.judge.plugin_host)), and a first --explain on
    the CPU reads it instead of building anything."""
    import json

    from gpulab.explain.judge import cases
    from gpulab.explain.kinds import explained
    from gpulab.judge import plugin_host

    shipped = json.loads(cases.SHIPPED.read_text())
    assert set(shipped) == {f"{ex}:cpu" for ex in explained()}
    for ex in sorted(explained()):
        entry = shipped[f"{ex}:cpu"]
        assert entry["grader"] == cases._grader_digest(ex, plugin_host), (
            f"{ex}: rebuild the shipped file"
        )
        assert entry["cases"] == cases.build(ex, "cpu", plugin_host), ex

    def boom(*a: object) -> None:
        raise AssertionError("built the cases")

    monkeypatch.setattr(cases, "timed_cases", boom)
    assert (
        cases.described_cases("matmul", "cpu", None, plugin_host) == shipped["matmul:cpu"]["cases"]
    )


def test_explained_after_every_timed_check_and_with_explain() -> None:
    from gpulab.explain.judge.plugin import wanted

    passed, timed = {"status": "passed"}, {"status": "passed", "timing": {"cases": [{}]}}
    from dataclasses import replace

    from gpulab.wire.check_request import CheckRequest

    req = CheckRequest(exercise="softmax", function="softmax", file="f.py")
    assert wanted(req, timed)  # a GPU's timed check, no --explain
    assert not wanted(req, passed)  # the CPU's usual check pays nothing
    assert wanted(replace(req, explain=True), passed)
    assert not wanted(replace(req, explain=True), {"status": "failed"})
    assert not wanted(replace(req, exercise="graph_breaks", explain=True), timed)


class _CannedSandbox:
    """Answers an explain request with one launch of a 1-program kernel."""

    def __init__(self) -> None:
        self.closed = 0
        self.asked: list[dict] = []
        self.pending = False

    def send(self, msg: Any) -> None:
        assert msg.to_json()["type"] == "explain_prepare"

    def ask(self, message: Any, kind: Any) -> Any:
        """As gpulab.judge.remote.Sandbox.ask: the reply read as a `kind`."""
        from gpulab.wire.replies import read_reply

        return read_reply(self.request(message), kind)

    def request(self, msg: Any) -> dict:
        msg = msg.to_json()  # a typed request, as the judge sends it
        self.asked.append(msg)
        launch = {**_launch(programs=1), "signature": {}, "problem": ""}
        case = {"name": "c", "sizes": {"M": 8192, "N": 4096}, "dtype": "fp16", "elt": 2}
        return {
            "type": "explained",
            "cases": [{**case, "launches": [launch], "intermediates": []}],
            "compiled": {"K": _info()},
        }

    def close(self) -> None:
        self.closed += 1


def test_early_explain_runs_beside_the_check_and_stops_on_failure() -> None:
    from dataclasses import replace

    from gpulab.explain.judge.plugin import attach, start
    from gpulab.judge import plugin_host
    from gpulab.wire.check_request import CheckRequest

    req = CheckRequest(
        exercise="softmax",
        function="softmax",
        file="f.py",
        kind="memory",
        bytes="2*M*N*elt",
        flops="5*M*N",
        explain=True,
    )
    assert start(replace(req, explain=False), "cpu", _CannedSandbox, graders=plugin_host) is None
    assert (
        start(req, "cuda", _CannedSandbox, graders=plugin_host) is None
    )  # after the timing, not during it
    made: list[_CannedSandbox] = []

    def make() -> _CannedSandbox:
        made.append(_CannedSandbox())
        return made[-1]

    early = start(req, "cpu", make, graders=plugin_host)
    result = {"status": "passed"}
    attach(req, result, "cpu", None, early=early, graders=plugin_host)
    assert result["diagnosis"][0]["kind"] == "too_few_programs", result
    assert made[0].asked[0]["cases"][0]["name"] and made[0].closed == 1
    early.close()  # again, as the judge's finally does: no second close
    assert made[0].closed == 1

    early = start(req, "cpu", make, graders=plugin_host)
    failed = {"status": "failed"}
    attach(req, failed, "cpu", None, early=early, graders=plugin_host)
    assert "diagnosis" not in failed and made[1].closed == 1


def test_a_kernel_that_cannot_launch_says_so_with_the_numbers() -> None:
    found = diagnose(_facts(launches=[_launch()], compiled={"K": NO_FIT}))
    top = found[0]
    assert top["severity"] == 1.0 and "will not launch" in top["evidence"]
    assert "320 KiB" in top["evidence"] and "227 KiB" in top["evidence"]
    assert "num_stages" in top["advice"]


def test_explain_says_when_there_is_nothing_to_explain() -> None:
    """--explain (the lab's X) on a step or a non-kernel exercise says so
    instead of adding nothing; on a timed kernel it is silent."""
    from gpulab.course.content import load_course
    from gpulab.explain.kinds import explain_unavailable, explained

    course = load_course()
    for lesson in course.exercises:
        said = explain_unavailable(lesson)
        assert bool(said) == (lesson.exercise not in explained()), lesson.exercise
    step = course.find("softmax_row")
    assert step is not None and step.is_step
    assert "softmax_row is a step, graded on correctness only" in explain_unavailable(step)
    assert "not a Triton kernel" in explain_unavailable(course.find("compile_once"))
    assert explain_unavailable(course.find("softmax")) == ""


def test_a_kernel_the_compiler_refuses_is_named_by_explain():
    """Lesson 01: the interpreter accepts code the GPU compiler refuses, and
    --explain says so: each refused kernel once, with the compiler's words;
    a launch left unanalysed (a TMA descriptor) is no compile failure."""
    from rich.console import Console

    from gpulab.explain.judge.plugin import compile_failures
    from gpulab.explain.render import explain_renderable

    why = "UnsupportedLanguageConstruct: at 4:4: Boolean value of Tensor with more than one value"
    compiled = {
        "a": {"ok": False, "label": "triad_kernel", "arch": "sm_90", "error": why},
        "b": {"ok": False, "label": "triad_kernel", "arch": "sm_90", "error": why},  # a 2nd case
        "c": {"ok": True, "label": "other_kernel", "arch": "sm_90"},
        "d": {"ok": False, "label": "tma_kernel", "error": "a TMA descriptor", "skipped": True},
    }
    failures = compile_failures(compiled)
    assert failures == [{"kernel": "triad_kernel", "arch": "sm_90", "error": why}]
    result = {"diagnosis": [], "explain": {"gpu": "H100 SXM", "compile_errors": failures}}
    console = Console(width=300, record=True)
    console.print(explain_renderable(result))
    text = console.export_text()
    assert "triad_kernel does not compile for sm_90 (H100 SXM): " + why in text
    assert "Nothing stands out" not in text


@pytest.mark.slow
def test_cpu_explain_compiles_what_the_interpreter_ran(run_gpulab, tmp_path):
    """End to end on the CPU: a triad with an `if` on a loaded block passes in
    the interpreter, and --explain reports that sm_90 refuses it."""
    src = (REPO / "kernels" / "bandwidth.py").read_text(encoding="utf-8")
    store = "    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)"
    assert store in src
    bad = tmp_path / "bad_triad.py"
    bad.write_text(src.replace(store, "    if out > 0:\n        out = out * 1.0\n" + store))
    r = run_gpulab(
        "check", "bandwidth", "--file", str(bad), "--explain", "--json", "--timeout", "600"
    )
    result = json.loads(r.stdout)
    assert result["status"] == "passed", result.get("summary")  # the interpreter ran it
    errors = result["explain"]["compile_errors"]
    assert errors and errors[0]["kernel"] == "triad_kernel", result["explain"]
    assert "Boolean value of Tensor" in errors[0]["error"]
