"""A wheel built from the repo carries lessons/, kernels/ and exercises/ as
package data and finds them from any directory; `kernels` is not installed as
a top-level package."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import pytest

from tests.conftest import REPO

# Its module fixtures grade or compile a batch: one worker runs the module
# (pyproject's --dist loadgroup), where a second would build it again.
pytestmark = pytest.mark.xdist_group("packaging")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if r.returncode != 0:
        if "Could not find a version" in r.stderr or "No matching distribution" in r.stderr:
            pytest.skip("no build backend available offline")
        raise AssertionError(r.stderr)
    (whl,) = out.glob("gpulab-*.whl")
    return whl


def test_wheel_carries_the_content(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "gpulab/_content/lessons/manifest.toml" in names
    assert "gpulab/_content/lessons/02_triton_101_softmax/lesson.md" in names
    assert "gpulab/_content/exercises/softmax.py" in names
    assert "gpulab/_content/kernels/softmax.py" in names
    # The Hopper backends the references load from kernels/hopper/.
    assert "gpulab/_content/kernels/hopper/softmax_smem.py" in names
    assert "gpulab/_content/kernels/hopper/flash_attention_fa3.py" in names
    # The GPU datasheet table is package data, read by gpulab.gpu.hardware.
    assert "gpulab/data/gpus.toml" in names
    tops = {n.split("/")[0] for n in names}
    assert "kernels" not in tops and "exercises" not in tops and "lessons" not in tops
    assert not any("tests/" in n for n in names)


def test_installed_wheel_finds_its_content_from_anywhere(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GPULAB_CONTENT")}
    env["PYTHONPATH"] = str(site)
    env["GPULAB_HOME"] = str(tmp_path / "ws")
    code = (
        "import gpulab.course.content as c; course = c.load_course();"
        "print(c.content_root()); print(len(course.lessons), course.find('softmax').ready);"
        "import gpulab.gpu.hardware as h; print(len(h.GPUS), h.GPUS['h200'].tflops['bf16'])"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    root, summary, gpus = r.stdout.strip().splitlines()
    assert root.startswith(str(site)) and root.endswith("_content")
    assert summary == "9 True"
    assert gpus == "25 989.0"
    r = subprocess.run(
        [sys.executable, "-m", "gpulab", "where", "softmax"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "TODO" in open(r.stdout.strip()).read()


def test_wheel_carries_every_source_the_course_cites(wheel, tmp_path):
    """docs/, BENCHMARKS.md and benchmarks/ ship, and every citation resolves in the package."""
    names = zipfile.ZipFile(wheel).namelist()
    for name in (
        "docs/hardware.md",
        "BENCHMARKS.md",
        "benchmarks/h200.json",
        "benchmarks/h200-2026-11-30/microbench-quick.json",
    ):
        assert f"gpulab/_content/{name}" in names, name
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GPULAB_CONTENT")}
    env["PYTHONPATH"] = str(site)
    code = (
        "import gpulab.course.content as c, gpulab.course.citations as k;"
        "problems, pending = k.check(c.content_root()); print(len(k.citations("
        "c.content_root()))); print('\\n'.join(problems))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    count, *problems = r.stdout.strip().splitlines()
    assert int(count) > 20 and not problems, problems


def test_supported_versions_agree_in_pyproject_readme_and_ci():
    # The oldest supported stack is declared three times: pyproject's floors
    # (what pip enforces), README's table (what learners read) and .ci/run's
    # pins (what is tested). They must not drift apart.
    import re

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    root = REPO
    deps = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    floors = {}
    for dep in deps:
        m = re.match(r"(torch|triton|jax)>=([\d.]+)", dep)
        if m:
            floors[m.group(1)] = m.group(2)
    assert set(floors) == {"torch", "triton", "jax"}, deps
    ci = (root / ".ci" / "run").read_text()
    pins = dict(re.findall(r'"(torch|triton|jax)==([\d.]+)"', ci))
    readme = (root / "README.md").read_text()
    for name, label in (("torch", "torch"), ("triton", "Triton"), ("jax", "JAX")):
        assert pins[name].startswith(floors[name]), (name, pins[name], floors[name])
        assert re.search(rf"\| {label} \| {re.escape(floors[name])} \|", readme), name


def test_readme_start_makes_a_venv_and_its_install_brings_serve():
    """Debian's pip refuses to install outside a venv (PEP 668): the README
    makes one before `pip install .`; and that install brings `gpulab serve`
    (it once needed an extra that the README named nowhere)."""
    import re

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    start = readme.split("## Start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", start, re.S)
    assert blocks[0].strip() == "python3 -m venv .venv && . .venv/bin/activate"
    # The lab's command and the test command (which .ci/run runs): the same
    # kind of install (editable), so the test step's install does not take
    # the files of a lab started from the first one (issue 48).
    assert blocks[1:] == [
        "pip install -e . && gpulab\n",
        'pip install -e ".[test]" && python -m pytest -q -n auto\n',
    ]
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(re.match(r"textual-serve\b", d) for d in deps), deps
    assert "gpulab serve" in start
