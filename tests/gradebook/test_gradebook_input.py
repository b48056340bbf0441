"""Bad input never crashes `gpulab grade`: a roster with a byte order mark
or a missing column, a malformed row, a wrong field of gradebook.toml, an
unreadable file: one message naming the file, line or field, exit 2."""

from __future__ import annotations

import pytest

from tests.gradebook.classroom import write_gradebook_toml


def _main(capsys, *argv):
    from gpulab.cli import main

    code = main(["grade", *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


@pytest.fixture
def course(tmp_path):
    root = tmp_path / "course"
    root.mkdir()
    write_gradebook_toml(root)
    return root


def test_a_roster_with_a_bom_imports(course, tmp_path, capsys):
    csv = tmp_path / "r.csv"
    csv.write_bytes("\ufeffid;name;email\ns1;Ada Lovelace;ada@x\ns2;Alan Turing;alan@x\n".encode())
    code, out, _ = _main(capsys, "roster", str(csv), "--course", str(course))
    assert code == 0 and "2 students; 2 added" in out


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("name,section\nAda,A\n", "line 1: no column for the student id"),
        ("id,email\ns1,ada@x\n", "line 1: no column for the student's name"),
        ("id,name\ns1,Ada\n,Alan\ns1,Grace\n", "line 3: no student id in column 'id'"),
        ("id,name\ns1,Ada\ns1,Grace\n", "line 3: student id 's1' is also on line 2"),
        ("id,name\ns1,Ada,Lovelace,extra\n", "line 2: 4 fields, the header has 2"),
        ("id,name\n../x,Ada\n", "line 2: student id '../x' cannot name a folder"),
        ("", "the file is empty"),
    ],
)
def test_a_bad_roster_names_the_line_and_imports_nothing(course, tmp_path, capsys, text, words):
    csv = tmp_path / "r.csv"
    csv.write_text(text, encoding="utf-8")
    code, _, err = _main(capsys, "roster", str(csv), "--course", str(course))
    assert code == 2
    assert words in err and "r.csv" in err
    import sqlite3

    db = course / "gradebook.sqlite"
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM students").fetchone()[0] == 0


def test_a_roster_that_is_not_utf8_or_not_there(course, tmp_path, capsys):
    csv = tmp_path / "r.csv"
    csv.write_bytes(b"id,name\ns1,Ren\xe9\n")
    code, _, err = _main(capsys, "roster", str(csv), "--course", str(course))
    assert code == 2 and "r.csv, line 2: not UTF-8 text" in err
    code, _, err = _main(capsys, "roster", str(tmp_path / "nope.csv"), "--course", str(course))
    assert code == 2 and "nope.csv: cannot be read" in err


def test_canvas_and_moodle_exports_as_rosters(tmp_path):
    from gpulab.gradebook.roster import parse_roster

    canvas = tmp_path / "canvas.csv"
    canvas.write_text(
        "Student,ID,SIS User ID,SIS Login ID,Section,Softmax (4412)\n"
        "    Points Possible,,,,,10\n"
        '"Lovelace, Ada",9001,1001,ada,A,\n'
        '"Student, Test",9999,,,A,\n',
        encoding="utf-8",
    )
    r = parse_roster(canvas)
    assert r.kind == "canvas" and len(r.students) == 1
    s = r.students[0]
    assert (s.id, s.name, s.lms_id, s.sis_login_id, s.section) == (
        "1001",
        "Lovelace, Ada",
        "9001",
        "ada",
        "A",
    )
    moodle = tmp_path / "moodle.csv"
    moodle.write_text(
        "First name,Surname,ID number,Email address\nAda,Lovelace,1001,ada@x\n", encoding="utf-8"
    )
    r = parse_roster(moodle)
    assert (
        r.kind == "moodle"
        and r.students[0].name == "Ada Lovelace"
        and r.students[0].email == "ada@x"
    )


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ('[[assignment]]\nexercise = "softmax"\n', "'softmax' is assigned twice"),
        (
            '[[assignment]]\nexercise = "sofmax"\n',
            "'sofmax' is not an exercise of the course (did you mean 'softmax'?)",
        ),
        (
            '[[assignment]]\nexercise = "matmul"\npoints = "ten"\n',
            "field 'points' must be a number",
        ),
        ('[[assignment]]\nexercise = "matmul"\ndue = "soon"\n', "field 'due' must be a date"),
        ('[[assignment]]\nexercise = "matmul"\npoint = 3\n', "'point' is not a field here"),
        ('[[extension]]\nstudent = "s1"\n', "give either 'due' or 'days'"),
    ],
)
def test_a_bad_gradebook_toml_names_the_field(tmp_path, capsys, extra, words):
    root = tmp_path / "course"
    root.mkdir()
    write_gradebook_toml(root, extra)
    code, _, err = _main(capsys, "status", "--course", str(root))
    assert code == 2
    assert words in err and "gradebook.toml" in err


def test_no_course_folder_says_how_to_make_one(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = _main(capsys, "status")
    assert code == 2 and "gpulab grade init" in err


def test_every_step_has_help(capsys):
    from gpulab.cli import main
    from gpulab.cli.grade_options import grade_steps

    for step in grade_steps():
        with pytest.raises(SystemExit) as exc:
            main(["grade", step, "--help"])
        assert exc.value.code == 0
        assert f"usage: gpulab grade {step}" in capsys.readouterr().out


def test_init_then_override_and_clear(tmp_path, capsys):
    roster = tmp_path / "class.csv"
    roster.write_text("id,name\ns1,Ada\n", encoding="utf-8")
    course = tmp_path / "c"
    code, out, _ = _main(
        capsys,
        "init",
        str(course),
        "--exercises",
        "softmax_row,softmax",
        "--due",
        "2026-12-20",
        "--roster",
        str(roster),
    )
    assert code == 0 and "roster: 1 students" in out
    text = (course / "gradebook.toml").read_text()
    assert "due = 2026-12-20T23:59:59+00:00" in text
    assert text.count("speed_points = 0") == 1  # the step: correctness only
    code, _, err = _main(capsys, "override", "s1", "softmax", "5", "--course", str(course))
    assert code == 2 and "needs --comment" in err
    code, out, _ = _main(
        capsys, "override", "s1", "softmax", "5", "-m", "regraded by hand", "--course", str(course)
    )
    assert code == 0
    code, out, _ = _main(capsys, "status", "--course", str(course))
    assert "5* missing" in out
    code, out, _ = _main(capsys, "override", "s1", "softmax", "--clear", "--course", str(course))
    code, out, _ = _main(capsys, "status", "--course", str(course))
    assert "5*" not in out


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda b: b.pop("results"), "field 'results' is missing or not a str"),
        (lambda b: b["students"][0]["tasks"][0].pop("file"), "student #1, task #1: field 'file'"),
        (lambda b: b["students"][0]["tasks"][0].update(submission=True), "field 'submission'"),
        (lambda b: b["students"][0].update(tasks={}), "student #1: no list of tasks"),
    ],
)
def test_a_broken_batch_file_names_the_field(tmp_path, capsys, damage, words):
    """A worker refuses a batch it cannot grade before grading any of it, with
    one line naming the file and the field (exit 2), never a KeyError."""
    import json

    from gpulab.gradebook.plan import Task, write_batch
    from gpulab.gradebook.worker import main

    task = Task("s1", "softmax", 1, "0" * 64, str(tmp_path / "f.py"), "g", "r", False, "new")
    path = write_batch(tmp_path, [task], device="cpu", timeout=None, content_root=tmp_path)
    batch = json.loads(path.read_text())
    damage(batch)
    path.write_text(json.dumps(batch))
    assert main([str(path), "--index", "0"]) == 2
    out, err = capsys.readouterr()
    assert err.startswith(f"gpulab grade worker: {path}: not a gpulab batch file")
    assert words in err and "Traceback" not in out + err
