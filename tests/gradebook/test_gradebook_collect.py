"""Collect: Canvas's and Moodle's bulk downloads (as folders and as .zip),
the late marker, resubmissions, and a report of every file not placed."""

from __future__ import annotations

import zipfile
from datetime import datetime, timezone

import pytest

from tests.gradebook.classroom import ROSTER, write_gradebook_toml

HONEST = "def copy_bandwidth(gpu, nbytes):\n    return 1.0\n"


@pytest.fixture
def folder(tmp_path):
    from gpulab.course.content import load_course
    from gpulab.gradebook.folder import CourseFolder, import_roster
    from gpulab.gradebook.roster import parse_roster

    root = tmp_path / "course"
    root.mkdir()
    write_gradebook_toml(root)
    (tmp_path / "roster.csv").write_text(ROSTER, encoding="utf-8")
    f = CourseFolder.open(root, load_course())
    import_roster(f.conn, parse_roster(tmp_path / "roster.csv"))
    yield f
    f.close()


def _collect(folder, source, **kw):
    from gpulab.gradebook.collect import collect

    return collect(folder.conn, folder.root, source, folder.cfg.exercises, **kw)


def _write(base, files):
    for name, text in files.items():
        p = base / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_canvas_bulk_download(folder, tmp_path):
    src = tmp_path / "canvas"
    _write(
        src,
        {
            # Canvas user 9001 is s01; the late marker; a second upload (-1) wins.
            "lovelaceada_9001_111_softmax.py": "old = 1\n",
            "lovelaceada_9001_111_softmax-1.py": "new = 2\n",
            "turingalan_LATE_9002_222_softmax.py": "late = 1\n",
            # No Canvas id for this user in the roster: matched by name.
            "hoppergrace_5555_333_comm_cost.py": "x = 1\n",
            "nobodyhere_7777_444_softmax.py": "x = 2\n",
            "lovelaceada_9001_111_notes.txt": "hello\n",
            "lovelaceada_9001_111_matmul.py": "x = 3\n",
        },
    )
    report = _collect(folder, src)
    placed = {(s, e) for s, e, _ in report.placed}
    assert placed == {("s01", "softmax"), ("s02", "softmax"), ("s03", "comm_cost")}
    why = dict(report.problems)
    assert why["lovelaceada_9001_111_softmax.py"].startswith(
        "superseded by lovelaceada_9001_111_softmax-1.py"
    )
    assert "unknown student 'nobodyhere'" in why["nobodyhere_7777_444_softmax.py"]
    assert why["lovelaceada_9001_111_notes.txt"] == "not a Python file (.py)"
    assert why["lovelaceada_9001_111_matmul.py"].startswith("unknown exercise 'matmul'")
    assert len(report.problems) == 4
    rows = {
        r["student"]: r
        for r in folder.conn.execute("SELECT * FROM submissions WHERE exercise = 'softmax'")
    }
    assert (folder.root / rows["s01"]["path"]).read_text() == "new = 2\n"
    assert rows["s02"]["lms_late"] == 1 and rows["s01"]["lms_late"] == 0
    # The same download again: nothing new.
    again = _collect(folder, src)
    assert not again.placed and len(again.unchanged) == 3


def test_moodle_download_as_a_zip(folder, tmp_path):
    archive = tmp_path / "moodle.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("Ada Lovelace_501_assignsubmission_file_/softmax.py", "a = 1\n")
        zf.writestr("Alan Turing_502_assignsubmission_file_softmax.py", "b = 1\n")  # flattened
        zf.writestr(
            zipfile.ZipInfo(
                "Grace Hopper_503_assignsubmission_file_/copy_ceiling.py", (2026, 12, 1, 10, 0, 0)
            ),
            HONEST,
        )
        zf.writestr("Nobody Known_504_assignsubmission_file_/softmax.py", "c = 1\n")
        zf.writestr("__MACOSX/._softmax.py", "junk")
    report = _collect(folder, archive)
    assert {(s, e) for s, e, _ in report.placed} == {
        ("s01", "softmax"),
        ("s02", "softmax"),
        ("s03", "copy_ceiling"),
    }
    why = dict(report.problems)
    assert (
        "unknown student 'Nobody Known'"
        in why["moodle.zip:Nobody Known_504_assignsubmission_file_/softmax.py"]
    )
    assert why["moodle.zip:__MACOSX/._softmax.py"].startswith("a hidden or system file")
    grace = folder.conn.execute(
        "SELECT submitted_at FROM submissions WHERE student = 's03'"
    ).fetchone()
    assert grace[0] == "2026-12-01T10:00:00+00:00"


def test_folders_duplicates_and_a_forced_exercise(folder, tmp_path):
    src = tmp_path / "subs"
    _write(
        src,
        {
            "s01/softmax.py": "a = 1\n",
            "s02/kernel.py": "b = 1\n",
            "s03/kernel.py": "c = 1\n",
            "s03/other.py": "d = 1\n",
        },
    )
    report = _collect(
        folder, src, exercise="softmax", submitted_at=datetime(2026, 12, 5, tzinfo=timezone.utc)
    )
    assert {(s, e) for s, e, _ in report.placed} == {("s01", "softmax"), ("s02", "softmax")}
    why = dict(report.problems)
    assert why["s03/kernel.py"].startswith("duplicate: 2 different files for s03's softmax")
    assert why["s03/other.py"].startswith("duplicate:")
    when = folder.conn.execute("SELECT DISTINCT submitted_at FROM submissions").fetchall()
    assert [w[0] for w in when] == ["2026-12-05T00:00:00+00:00"]


def test_a_file_that_cannot_be_read_is_reported(folder, tmp_path):
    src = tmp_path / "subs"
    _write(src, {"s01/softmax.py": "a = 1\n"})
    (src / "s02").mkdir()
    (src / "s02" / "softmax.py").symlink_to("/etc/passwd")
    report = _collect(folder, src)
    assert [p for p, _ in report.problems] == ["s02/softmax.py"]
    assert "not a plain file" in report.problems[0][1]


def test_a_file_is_stored_byte_for_byte_whatever_its_encoding(folder, tmp_path):
    src = tmp_path / "subs"
    data = b"# -*- coding: latin-1 -*-\n# caf\xe9\nx = 1\n"
    (src / "s01").mkdir(parents=True)
    (src / "s01" / "softmax.py").write_bytes(data)
    report = _collect(folder, src)
    assert report.placed and not report.problems
    row = folder.conn.execute("SELECT path FROM submissions").fetchone()
    assert (folder.root / row["path"]).read_bytes() == data
