"""Lesson 08's exercise, choose_specs: shardings chosen for two goals on a
2-D mesh, graded from the compiled program (values, what each device
holds, how y comes out, the collectives, the FLOPs).

Every variant is graded by the real judge and sandbox in ONE child process
(JAX's 8 simulated CPU devices are set before its backend starts there);
the reference and the starter go through `gpulab dev check` (tests/cli)."""

from __future__ import annotations

import importlib.util

import pytest

from tests.conftest import REPO, reference_source

pytestmark = [
    pytest.mark.xdist_group("choose_specs"),
    pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs jax"),
    pytest.mark.timeout(600),
]
REF = reference_source("choose_specs")


def variant(*edits: tuple[str, str]) -> str:
    src = REF
    for old, new in edits:
        assert old in src, f"variant anchor not found: {old!r}"
        src = src.replace(old, new, 1)
    return src


HONEST = {
    # The biases whole, y given as a tuple-free spec of the same layout, and
    # one sharding standing for every parameter of data_everywhere.
    "biases whole, other spellings": variant(
        ('"b1": s(MODEL)', '"b1": s()'),
        (
            "in_shardings=(NamedSharding(mesh, P()), rows)",
            'in_shardings=({k: NamedSharding(mesh, P()) for k in ("w1", "b1", "w2", "b2")}, rows)',
        ),
    ),
}

# name -> (source, the goal whose cases fail, words their detail shows)
WRONG = {
    # Every device holds the whole batch: x not split over "data".
    "data_and_model without the data split": (
        variant(("in_shardings=(params, s(DATA, None))", "in_shardings=(params, s())")),
        "data and model",
        "holds all of x",
    ),
    # The weights whole: memory the goal does not allow.
    "data_and_model without the model split": (
        variant(
            (
                'params = {"w1": s(None, MODEL), "b1": s(MODEL), "w2": s(MODEL, None), "b2": s()}',
                "params = s()",
            )
        ),
        "data and model",
        "of w1",
    ),
    # y gathered whole on every device: an all-gather the goal does not allow.
    "data_and_model with y whole": (
        variant(("out_shardings=s(DATA, None))", "out_shardings=s())")),
        "data and model",
        "y does not come out",
    ),
    # The batch split over "data" only: four devices hold each slice.
    "data_everywhere over one axis": (
        variant(
            (
                "rows = NamedSharding(mesh, P((DATA, MODEL), None))",
                "rows = NamedSharding(mesh, P(DATA, None))",
            )
        ),
        "data everywhere",
        "holds 1/2 of x",
    ),
}

JUDGE_CHILD = r"""
import json, sys
from gpulab.judge.main import judge
from gpulab.judge.remote import harden_judge

harden_judge()  # a judge adopts its sandboxes' keepers, as `python -m gpulab.judge.main` does
from gpulab.judge import prepared

prepared.KEEP_FORKS = True  # one fork server for the whole batch (tests/judge_pool.py)

class Quiet:
    def send(self, event): pass
    def stage(self, kind, text, *progress): pass

items, out_path, content = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
results = {}
for name, path in items.items():
    request = {"exercise": "choose_specs", "function": "data_and_model", "file": path,
               "timing": False, "device": "cpu", "timeout": 300, "content_root": content}
    results[name] = judge(request, Quiet()).to_json()
with open(out_path, "w") as f:
    json.dump(results, f, default=str)
prepared.close_kept_forks()
"""


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    import json
    import subprocess
    import sys

    from tests.conftest import gpulab_env

    tmp = tmp_path_factory.mktemp("choose_specs")
    items = {}
    for i, (name, src) in enumerate({**HONEST, **{n: s for n, (s, _, _) in WRONG.items()}}.items()):
        path = tmp / f"variant_{i}.py"
        path.write_text(src)
        items[name] = str(path)
    out = tmp / "results.json"
    proc = subprocess.run(
        [sys.executable, "-c", JUDGE_CHILD, json.dumps(items), str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
        env=gpulab_env(tmp / "home"),
        cwd=REPO,
    )
    assert proc.returncode == 0 and out.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize("name", list(HONEST))
def test_other_honest_shardings_pass(graded, name):
    r = graded[name]
    assert r["status"] == "passed", (name, [(c["name"], c.get("detail")) for c in r["cases"]])
    assert len(r["cases"]) == 6 and any('2 along "data" × 4 along "model"' in n for n in r["notes"])


@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_shardings_fail_for_their_goal(graded, name):
    _, goal, words = WRONG[name]
    r = graded[name]
    assert r["status"] == "failed", (name, r["summary"])
    bad = {c["name"]: c.get("detail", "") for c in r["cases"] if not c["passed"]}
    assert bad and all(n.startswith(goal) for n in bad), (name, bad)
    assert all(words in d for d in bad.values()), (name, bad)
