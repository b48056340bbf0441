"""A generated class through the real worker and ingest, its judge's
results replayed from recorded checks (conftest.py): every gradebook row,
every export's exact columns, a regrade after a reference change with a
manual override that survives it, and a batch resumed after an interrupt."""

from __future__ import annotations

import csv
import io
import json

import pytest

from tests.gradebook.classroom import CLASS, Class, Replay, make_class


# Here, not in a tests/gradebook/conftest.py: pytest names every conftest.py
# outside a package "conftest", so a second one shadowed tests/conftest.py
# for the test files that import its helpers (CI collected 17 of them as
# errors). tests/test_suite_shape.py keeps it to one.
@pytest.fixture
def klass(tmp_path) -> Class:
    return make_class(tmp_path)


# (student, exercise) -> (status, final points); 10%/day late, s07 extended.
EXPECTED = {
    ("s01", "copy_ceiling"): ("passed", 5.0),
    ("s01", "softmax"): ("passed", 7.0),  # graded on the CPU: no speed points
    ("s01", "comm_cost"): ("passed", 5.0),
    ("s02", "copy_ceiling"): ("passed", 5.0),
    ("s02", "softmax"): ("failed", 0.0),
    ("s02", "comm_cost"): ("passed", 5.0),
    ("s03", "copy_ceiling"): ("failed", 0.0),
    ("s03", "softmax"): ("refused", 0.0),
    ("s03", "comm_cost"): ("failed", 0.0),
    ("s04", "copy_ceiling"): ("failed", 0.0),
    ("s04", "softmax"): ("crashed", 0.0),
    ("s04", "comm_cost"): ("missing", 0.0),
    ("s05", "copy_ceiling"): ("missing", 0.0),
    ("s05", "softmax"): ("timeout", 0.0),
    ("s05", "comm_cost"): ("passed", 5.0),
    ("s06", "softmax"): ("passed", 5.6),  # two days late: x0.8
    ("s07", "softmax"): ("passed", 7.0),  # as late, within the extension
    ("s08", "softmax"): ("missing", 0.0),
}


def _grid(klass):
    from gpulab.gradebook import query

    f = klass.folder()
    try:
        return query.grid(f.conn, f.cfg)
    finally:
        f.close()


def test_collect_reports_the_student_not_on_the_roster(klass):
    placed = {(s, e) for s, e, _ in klass.report.placed}
    expected = {(s, e) for s, work in CLASS.items() for e in work if s != "s99"}
    assert placed == expected
    assert klass.report.problems == [
        ("s99/softmax.py", "unknown student 's99' (not in the roster)")
    ]


def test_every_gradebook_row(klass):
    replay = Replay()
    klass.grade(replay)
    assert len(replay.calls) == len(EXPECTED) - 3  # three are missing
    from gpulab.gradebook.ingest import ingest

    f = klass.folder()
    report = ingest(f.conn, f.cfg, f.root)
    assert report.added == 15 and not report.problems and not report.moved
    grid = _grid(klass)
    for (student, ex), (status, final) in EXPECTED.items():
        c = grid[(student, ex)]
        assert (c.status, c.final) == (status, final), (student, ex, c)
    for student in ("s01", "s02", "s03", "s04", "s05", "s06", "s07", "s08"):
        for ex in ("copy_ceiling", "softmax", "comm_cost"):
            assert (student, ex) in grid
    assert grid[("s06", "softmax")].days_late == 2 and grid[("s06", "softmax")].late_factor == 0.8
    assert grid[("s07", "softmax")].extended and not grid[("s07", "softmax")].late
    runs = f.conn.execute("SELECT * FROM runs").fetchall()
    assert all(r["device"].lower().startswith("cpu") for r in runs)
    for r in runs:
        assert r["grader_version"].startswith("0.") and r["reference_sha"]
        assert r["stack"].startswith("python ") and json.loads(r["result"])["status"]
        assert r["gpu"] == "" and r["timed"] == 0
    cheat = next(r for r in runs if r["status"] == "refused")
    assert "second draw" in cheat["summary"]
    hang = next(r for r in runs if r["status"] == "timeout")
    assert "timed out after" in hang["summary"]
    cases = f.conn.execute("SELECT COUNT(*) FROM cases WHERE kind = 'correctness'").fetchone()[0]
    assert cases > 50
    # Ingest again: nothing new, nothing moved.
    again = ingest(f.conn, f.cfg, f.root)
    assert (again.added, again.known) == (0, 15)
    f.close()


def _csv(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_every_export_has_its_exact_columns(klass, tmp_path):
    from gpulab.gradebook import exports, query, reports
    from gpulab.gradebook.ingest import ingest

    klass.grade(Replay())
    f = klass.folder()
    ingest(f.conn, f.cfg, f.root)
    canvas = _csv(exports.canvas(f.conn, f.cfg))
    assert canvas[0] == [
        "Student",
        "ID",
        "SIS User ID",
        "SIS Login ID",
        "Section",
        "copy_ceiling",
        "Softmax (4412)",
        "comm_cost",
    ]
    assert canvas[1] == ["    Points Possible", "", "", "", "", "5", "10", "5"]
    assert canvas[2] == ["Ada Lovelace", "9001", "1001", "", "A", "5", "7", "5"]
    assert canvas[7] == ["Donald Knuth", "9006", "1006", "", "B", "0", "5.6", "0"]
    assert len(canvas) == 2 + 8
    assert _csv(exports.canvas(f.conn, f.cfg, points_row=False))[1][0] == "Ada Lovelace"
    moodle = _csv(exports.moodle(f.conn, f.cfg))
    assert moodle[0] == ["Email address", "Full name", "copy_ceiling", "softmax", "comm_cost"]
    assert moodle[1] == ["ada@uni.edu", "Ada Lovelace", "5", "7", "5"]
    by_id = _csv(exports.moodle(f.conn, f.cfg, identity="idnumber"))
    assert by_id[0][0] == "ID number" and by_id[1][0] == "1001"
    long = _csv(exports.long(f.conn, f.cfg))
    assert tuple(long[0]) == exports.LONG_COLUMNS
    assert len(long) == 1 + 8 * 3
    row = dict(
        zip(long[0], next(r for r in long if r[0] == "s06" and r[4] == "softmax"), strict=True)
    )
    assert (row["status"], row["final"], row["days_late"], row["late_factor"]) == (
        "passed",
        "5.6",
        "2",
        "0.8",
    )
    grid = query.grid(f.conn, f.cfg)
    c = grid[("s01", "softmax")]
    gs = reports.gradescope(f.conn, f.cfg, c, f.cfg.assignment("softmax"))
    assert set(gs) >= {"score", "execution_time", "output", "tests", "leaderboard"}
    assert gs["score"] == 7.0
    for test in gs["tests"]:
        assert set(test) == {"score", "max_score", "status", "name", "output", "visibility"}
    speed = next(t for t in gs["tests"] if t["name"].startswith("speed"))
    assert speed["max_score"] == 3 and speed["score"] == 0 and "CPU" in speed["output"]
    for entry in gs["leaderboard"]:
        assert set(entry) == {"name", "value", "order"}
    student = f.conn.execute("SELECT * FROM students WHERE id = 's02'").fetchone()
    md = reports.feedback(f.conn, f.cfg, student, [grid[("s02", a)] for a in f.cfg.exercises])
    assert "no Triton kernel was launched" in md and "| case | result |" in md
    assert "Total: **10 / 20**" in md
    f.close()


def test_regrade_after_a_reference_change_keeps_the_override(klass, capsys):
    from gpulab.cli import main
    from gpulab.gradebook import query
    from gpulab.gradebook.ingest import ingest
    from gpulab.gradebook.plan import stale

    klass.grade(Replay())
    f = klass.folder()
    ingest(f.conn, f.cfg, f.root)
    f.close()
    # The instructor's grade for a cheat they judged partly honest.
    code = main(
        [
            "grade",
            "override",
            "s03",
            "softmax",
            "2",
            "-m",
            "kept the kernel",
            "--course",
            str(klass.root),
        ]
    )
    assert code == 0
    ref = klass.content / "kernels" / "softmax.py"
    ref.write_text(ref.read_text() + "\n# a faster reference\n")
    f = klass.folder()
    tasks = stale(f.conn, f.cfg, f.course)
    f.close()
    assert {(t.student, t.exercise, t.why) for t in tasks} == {
        (s, "softmax", "reference changed")
        for s in ("s01", "s02", "s03", "s04", "s05", "s06", "s07")
    }
    # The new round's grader judges s02's and s03's files to pass.
    klass.grade(Replay(changed={"s02": "honest", "s03": "honest"}))
    f = klass.folder()
    assert f.conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 15  # not ingested yet
    report = ingest(f.conn, f.cfg, f.root)
    assert report.added == 7
    moved = {(m.student, m.exercise): m for m in report.moved}
    assert set(moved) == {("s02", "softmax"), ("s03", "softmax")}
    assert (moved[("s02", "softmax")].before, moved[("s02", "softmax")].after) == (0.0, 7.0)
    assert moved[("s03", "softmax")].override == 2.0
    grid = query.grid(f.conn, f.cfg)
    assert grid[("s03", "softmax")].final == 2.0  # the override, not the regrade's 7
    assert grid[("s03", "softmax")].override_comment == "kept the kernel"
    assert grid[("s02", "softmax")].final == 7.0
    # Old runs are kept: two per regraded submission.
    twice = f.conn.execute(
        "SELECT COUNT(*) FROM (SELECT submission_id FROM runs GROUP BY submission_id HAVING COUNT(*) = 2)"
    ).fetchone()[0]
    assert twice == 7
    assert stale(f.conn, f.cfg, f.course) == []
    f.close()
    capsys.readouterr()


def test_a_worker_stopped_mid_student_goes_on_where_it_stopped(klass):
    from gpulab.gradebook.plan import stale, write_batch
    from gpulab.gradebook.worker import Worker

    f = klass.folder()
    tasks = stale(f.conn, f.cfg, f.course, students=["s01"])
    batch = write_batch(f.root, tasks, device="cpu", timeout=None, content_root=klass.content)
    f.close()
    first = Replay(stop_after=1)
    with pytest.raises(KeyboardInterrupt):
        Worker(batch, check=first).grade_student(0)
    done = sorted(p.name for p in (klass.root / "work" / "results").rglob("*.json"))
    assert done == ["comm_cost.json"]  # the tasks go by exercise name
    second = Replay()
    Worker(batch, check=second).grade_student(0)
    assert [c[0].split(".")[0] for c in second.calls] == ["copy_ceiling", "softmax"]
    assert len(list((klass.root / "work" / "results").rglob("*.json"))) == 3


def test_similar_flags_copies_and_not_the_starter(klass, tmp_path):
    """copydetect over the latest files: the three students who handed in the
    reference are flagged together; the starter's text matches no one."""
    from gpulab.gradebook.similar import find

    f = klass.folder()
    report = tmp_path / "similar.html"
    pairs = find(f.conn, f.root, f.course, ["softmax"], threshold=0.5, report=report)
    f.close()
    flagged = {(p.a, p.b) if p.a < p.b else (p.b, p.a) for p in pairs}
    assert {("s01", "s06"), ("s01", "s07"), ("s06", "s07")} <= flagged
    assert not any("s02" in pair for pair in flagged)  # handed in the starter
    assert all(p.exercise == "softmax" and p.a != p.b for p in pairs)
    assert "<html" in report.read_text().lower()
