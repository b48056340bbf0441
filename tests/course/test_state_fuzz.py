"""Fuzz the state loader: random JSON shapes never raise, and valid entries survive.

hypothesis is not a dependency, so shapes come from a seeded random generator
(the seed in a failure message reproduces the case).
"""

from __future__ import annotations

import copy
import json
import random

from gpulab.lab.state import ATTEMPT, EXERCISE, SETTINGS, STATUSES, validate_state
from gpulab.lab.workspace import Workspace
from gpulab.wire.result import CheckResult

KEYS = [
    "status",
    "attempts",
    "hints",
    "grade",
    "passed",
    "summary",
    "ms",
    "time",
    "unit",
    "device",
    "throughput",
    "speedup",
    "roofline_fraction",
    "version",
    "exercises",
    "settings",
    "last_lesson",
    "gpu",
    "theme",
    "watch",
    "softmax",
    "matmul",
    "\x1b[2J",
    "",
    "x",
]


def scalar(rng: random.Random) -> object:
    return rng.choice(
        [
            None,
            True,
            False,
            0,
            -1,
            7,
            2**70,
            1.5,
            -0.0,
            float("nan"),
            float("inf"),
            "",
            "x",
            "passed",
            "failed",
            "not started",
            "\x1b]52;c;aGk=\x07",
            "ÿ\u202e",
            rng.random(),
            rng.randint(-5, 5),
        ]
    )


def value(rng: random.Random, depth: int = 0) -> object:
    """Any JSON value, biased towards the state's own keys so shapes nearly fit."""
    roll = rng.random()
    if depth > 4 or roll < 0.4:
        return scalar(rng)
    if roll < 0.7:
        return [value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(KEYS): value(rng, depth + 1) for _ in range(rng.randint(0, 5))}


def valid_attempt(rng: random.Random) -> dict:
    a = {
        "time": "2026-01-01T00:00:00",
        "passed": rng.random() < 0.5,
        "summary": "s",
        "device": "cpu",
    }
    if rng.random() < 0.5:
        a.update(ms=rng.random(), unit="GB/s", throughput=rng.random() * 100, grade="B")
    return a


def valid_entry(rng: random.Random) -> dict:
    attempts = [valid_attempt(rng) for _ in range(rng.randint(0, 3))]
    entry: dict = {"hints": rng.randint(0, 3)}
    if attempts:
        entry["attempts"] = attempts
        entry["status"] = "passed" if any(a["passed"] for a in attempts) else "failed"
    return entry


def assert_fits_the_schema(state: dict) -> None:
    """What every reader of the state relies on."""
    assert isinstance(state["version"], int) and not isinstance(state["version"], bool)
    assert state["last_lesson"] is None or isinstance(state["last_lesson"], str)
    assert isinstance(state["settings"], dict)
    for key, kind in SETTINGS.items():
        if key in state["settings"]:
            assert kind.test(state["settings"][key])
    assert isinstance(state["exercises"], dict)
    for entry in state["exercises"].values():
        assert isinstance(entry, dict)
        for key, kind in EXERCISE.items():
            if key in entry:
                assert kind.test(entry[key]), (key, entry[key])
        if "status" in entry:
            assert entry["status"] in STATUSES
        for a in entry.get("attempts", []):
            assert isinstance(a, dict)
            for key, kind in ATTEMPT.items():
                if key in a:
                    assert kind.test(a[key]), (key, a[key])


def test_random_json_shapes_never_raise_and_always_fit():
    rng = random.Random(17)
    for i in range(3000):
        raw = value(rng) if i % 3 else {k: value(rng) for k in rng.sample(KEYS, 4)}
        before = copy.deepcopy(raw)
        checked = validate_state(raw)
        assert_fits_the_schema(checked.state)
        # Checking is idempotent: what it returns passes as it is.
        assert validate_state(checked.state).problems == [], (i, raw)
        # The input is not modified (the caller keeps it aside as it was).
        assert json.dumps(raw, sort_keys=True) == json.dumps(before, sort_keys=True)


def test_valid_entries_survive_any_garbage_beside_them():
    rng = random.Random(1717)
    for i in range(2000):
        good = {f"ex{n}": valid_entry(rng) for n in range(rng.randint(1, 4))}
        settings = {"gpu": "h200", "theme": "nord", "watch": True, "anything": value(rng)}
        raw: dict = {
            "version": 1,
            "last_lesson": "02_triton_101_softmax",
            "exercises": copy.deepcopy(good),
            "settings": copy.deepcopy(settings),
        }
        for _ in range(rng.randint(1, 4)):  # garbage in random places
            where = rng.random()
            if where < 0.4:
                raw["exercises"][f"bad{rng.randint(0, 9)}"] = value(rng)
            elif where < 0.7:
                raw["settings"][rng.choice(["gpu", "theme", "watch", "other"])] = scalar(rng)
            else:
                raw[rng.choice(["junk", "version", "last_lesson", "extra"])] = value(rng)
        checked = validate_state(raw)
        for name, entry in good.items():
            assert checked.state["exercises"][name] == entry, (i, name)
        for key in ("gpu", "theme", "watch"):
            now = raw["settings"].get(key)
            if type(now) is type(settings[key]) and now == settings[key]:  # 1 == True
                assert checked.state["settings"][key] == settings[key]


def test_the_workspace_opens_whatever_state_json_holds(tmp_path):
    """The same shapes through the real loader: files on disk, repair, writing back."""
    rng = random.Random(4242)
    for i in range(150):
        root = tmp_path / f"ws{i}"
        (root / ".gpulab").mkdir(parents=True)
        good = valid_entry(rng)
        raw = (
            value(rng)
            if i % 2
            else {"exercises": {"softmax": good, "bad": value(rng)}, "settings": value(rng)}
        )
        text = json.dumps(raw) if rng.random() < 0.9 else json.dumps(raw)[: rng.randint(0, 9)]
        (root / ".gpulab" / "state.json").write_text(text)
        ws = Workspace.open(root)
        state = ws.load_state()
        assert_fits_the_schema(state)
        if i % 2 == 0 and text == json.dumps(raw):
            assert state["exercises"]["softmax"] == good
        # Everything a command does with the state still works, and is kept.
        ws.record_result("softmax", CheckResult.from_json({"passed": False, "summary": "x"}))
        assert ws.exercise_state("softmax")["attempts"][-1]["summary"] == "x"
        assert Workspace.open(root).warnings == []
        originals = list((root / ".gpulab").glob("state.json.*-*"))
        if ws.warnings:
            assert any(p.read_text() == text for p in originals), i


def test_the_schema_checks_every_field_of_the_typed_records():
    """validate_state checks a field by its Kind; the TypedDicts say what a
    reader may rely on: the two lists of keys must be the same."""
    from gpulab.lab.state import TOP, Attempt, ExerciseEntry, Settings, State

    assert set(ATTEMPT) == set(Attempt.__annotations__)
    assert set(EXERCISE) | {"attempts"} == set(ExerciseEntry.__annotations__)
    assert set(SETTINGS) == set(Settings.__annotations__)
    assert set(TOP) | {"exercises", "settings"} == set(State.__annotations__)
