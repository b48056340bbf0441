"""The class list, from a CSV file: a plain roster (id, name, email, ...) or
an LMS's own export (Canvas's gradebook CSV: Student, ID, SIS User ID, SIS
Login ID, Section; Moodle's: First name, Surname, ID number, Email address).

Column names are matched without regard to case, spaces or underscores,
through the aliases below. A byte order mark (Excel's "CSV UTF-8") is
dropped; `,`, `;` and tabs are each recognised as the separator. Nothing is
imported from a file with a problem: every problem is listed with its line
(a row with more fields than the header, no id, an id twice, an id that
cannot name a folder) and the import stops, so a roster is all or nothing.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

# Canonical column -> the headers taken for it (normalised by _norm).
ALIASES: dict[str, tuple[str, ...]] = {
    "id": ("id", "studentid", "student", "username", "user", "login", "netid", "studentnumber"),
    "name": ("name", "fullname", "studentname"),
    "first": ("firstname", "givenname"),
    "last": ("lastname", "surname", "familyname"),
    "email": ("email", "emailaddress", "mail"),
    "lms_id": ("lmsid", "canvasid", "canvasuserid", "moodleid"),
    "sis_user_id": ("sisuserid", "sisid", "idnumber"),
    "sis_login_id": ("sisloginid", "loginid"),
    "section": ("section", "sections", "group"),
}
MAX_PROBLEMS = 20
# An id names a folder (submissions/<id>/) and an LMS's column: a plain name.
_ID = re.compile(r"^[A-Za-z0-9@+][A-Za-z0-9._@+-]{0,127}$")


class RosterError(Exception):
    """The roster cannot be imported (the message names file, line and column)."""


@dataclass(frozen=True)
class Student:
    id: str
    name: str = ""
    email: str = ""
    lms_id: str = ""  # the LMS's own user id: Canvas's "ID", in its bulk-download names
    sis_user_id: str = ""
    sis_login_id: str = ""
    section: str = ""


@dataclass
class Roster:
    students: list[Student] = field(default_factory=list)
    kind: str = "plain"  # or "canvas", "moodle": which layout the header showed


def _norm(header: str) -> str:
    return re.sub(r"[\s_\-.]+", "", header.strip().lower())


def valid_id(text: str) -> bool:
    return bool(_ID.match(text)) and ".." not in text


def read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RosterError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise RosterError(
            f"{path}, line {line}: not UTF-8 text (byte {exc.start}); save it as "
            "'CSV UTF-8' and import it again"
        ) from None


def _columns(header: list[str], path: Path) -> tuple[dict[str, int], str]:
    """Canonical column -> index, and the layout ("canvas", "moodle", "plain")."""
    normed = [_norm(h) for h in header]
    kind = "plain"
    if "sisuserid" in normed and "student" in normed:
        kind = "canvas"  # Canvas: "Student" is the name, "ID" its own user id
    elif "idnumber" in normed and ("surname" in normed or "firstname" in normed):
        kind = "moodle"
    found: dict[str, int] = {}
    for col, aliases in ALIASES.items():
        for alias in aliases:
            if kind == "canvas" and alias in ("id", "student"):
                continue  # read below, with Canvas's meaning
            if alias in normed and col not in found:
                found[col] = normed.index(alias)
    if kind == "canvas":
        found["name"] = normed.index("student")
        if "id" in normed:
            found["lms_id"] = normed.index("id")
    if kind == "canvas" or "id" not in found:
        # The key: the university's id where the file has it, else a login,
        # else the LMS's own id, else the email.
        for key in ("sis_user_id", "sis_login_id", "lms_id", "email"):
            if key in found:
                found["id"] = found[key]
                break
    if "id" not in found:
        raise RosterError(
            f"{path}, line 1: no column for the student id (looked for "
            f"{', '.join(ALIASES['id'])}; found {', '.join(repr(h) for h in header)})"
        )
    if "name" not in found and "first" not in found and "last" not in found:
        raise RosterError(
            f"{path}, line 1: no column for the student's name (looked for "
            f"{', '.join(ALIASES['name'] + ALIASES['first'] + ALIASES['last'])})"
        )
    return found, kind


def parse_roster(path: Path) -> Roster:
    """Read `path`; RosterError lists every problem (file, line, column)."""
    text = read_text(path)
    if not text.strip():
        raise RosterError(f"{path}: the file is empty")
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(
            text[:4096], delimiters=",;\t"
        )
    except csv.Error:
        dialect = csv.excel
    rows = csv.reader(io.StringIO(text), dialect)
    try:
        header = next(rows)
    except csv.Error as exc:
        raise RosterError(f"{path}, line 1: {exc}") from None
    cols, kind = _columns(header, path)
    roster = Roster(kind=kind)
    problems: list[str] = []
    seen: dict[str, int] = {}
    try:
        for row in rows:
            line = rows.line_num
            if not any(cell.strip() for cell in row):
                continue
            if len(row) > len(header):
                problems.append(
                    f"{path}, line {line}: {len(row)} fields, the header has {len(header)} "
                    "(a name with a comma needs quotes)"
                )
                continue

            def cell(col: str, row: list[str] = row) -> str:
                i = cols.get(col)
                return row[i].strip() if i is not None and i < len(row) else ""

            name = cell("name") or " ".join(p for p in (cell("first"), cell("last")) if p)
            if name.strip().lower() == "points possible" or name.strip() == "Student, Test":
                continue  # Canvas's points row, and its test student
            sid = cell("id")
            if not sid:
                problems.append(
                    f"{path}, line {line}: no student id in column '{header[cols['id']]}'"
                )
                continue
            if not valid_id(sid):
                problems.append(
                    f"{path}, line {line}: student id {sid!r} cannot name a folder "
                    "(letters, digits and . _ - @ + only)"
                )
                continue
            if sid in seen:
                problems.append(
                    f"{path}, line {line}: student id {sid!r} is also on line {seen[sid]}"
                )
                continue
            seen[sid] = line
            roster.students.append(
                Student(
                    id=sid,
                    name=name,
                    email=cell("email"),
                    lms_id=cell("lms_id"),
                    sis_user_id=cell("sis_user_id"),
                    sis_login_id=cell("sis_login_id"),
                    section=cell("section"),
                )
            )
    except csv.Error as exc:
        problems.append(f"{path}, line {rows.line_num}: {exc}")
    if problems:
        more = len(problems) - MAX_PROBLEMS
        listed = problems[:MAX_PROBLEMS] + ([f"... and {more} more"] if more > 0 else [])
        raise RosterError("the roster was not imported:\n  " + "\n  ".join(listed))
    if not roster.students:
        raise RosterError(f"{path}: no students (only a header)")
    return roster
