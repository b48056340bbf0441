"""The gradebook: one SQLite file (stdlib sqlite3, WAL) in the course folder.

Students, the exercises assigned, every submission collected (its file's
sha256 and when it was handed in), every run of the judge on one (grader
version, reference, device and GPU, status, score, the stages and the whole
result), each run's cases, and the instructor's manual overrides with their
comments. Old runs are never deleted: a regrade adds runs. An override is
never touched by grading; it is cleared only by `gpulab grade override
--clear`, and its row stays.

One writer: the lab's commands (`init`, `roster`, `collect`, `ingest`,
`override`), each in a `BEGIN IMMEDIATE` transaction. Workers never open
it: they write result files that `ingest` reads (gpulab.gradebook.ingest),
so a cluster's workers need only a shared folder. WAL lets the view and
`status` read while a write runs.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

DB_NAME = "gradebook.sqlite"
SCHEMA_VERSION = "1"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS students (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL DEFAULT '',
  email TEXT NOT NULL DEFAULT '',
  lms_id TEXT NOT NULL DEFAULT '',
  sis_user_id TEXT NOT NULL DEFAULT '',
  sis_login_id TEXT NOT NULL DEFAULT '',
  section TEXT NOT NULL DEFAULT '',
  active INTEGER NOT NULL DEFAULT 1,
  updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS exercises (
  id TEXT PRIMARY KEY,
  title TEXT NOT NULL,
  points REAL NOT NULL,
  speed_points REAL NOT NULL,
  due TEXT,
  position INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS submissions (
  id INTEGER PRIMARY KEY,
  student TEXT NOT NULL REFERENCES students(id),
  exercise TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  path TEXT NOT NULL,
  source TEXT NOT NULL,
  submitted_at TEXT NOT NULL,
  collected_at TEXT NOT NULL,
  lms_late INTEGER NOT NULL DEFAULT 0,
  size INTEGER NOT NULL,
  UNIQUE (student, exercise, sha256)
);
CREATE TABLE IF NOT EXISTS runs (
  id INTEGER PRIMARY KEY,
  submission_id INTEGER NOT NULL REFERENCES submissions(id),
  result_key TEXT NOT NULL UNIQUE,
  batch TEXT NOT NULL,
  grader_version TEXT NOT NULL,
  reference_sha TEXT NOT NULL,
  device TEXT NOT NULL,
  gpu TEXT NOT NULL,
  stack TEXT NOT NULL,
  host TEXT NOT NULL,
  status TEXT NOT NULL,
  passed INTEGER NOT NULL,
  summary TEXT NOT NULL,
  message TEXT NOT NULL,
  timed INTEGER NOT NULL,
  speed_ratio REAL,
  score REAL NOT NULL,
  max_score REAL NOT NULL,
  grade TEXT,
  stages TEXT NOT NULL,
  result TEXT NOT NULL,
  reference TEXT NOT NULL,
  started_at TEXT NOT NULL,
  finished_at TEXT NOT NULL,
  ingested_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_by_submission ON runs (submission_id, id);
CREATE TABLE IF NOT EXISTS cases (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  kind TEXT NOT NULL,
  idx INTEGER NOT NULL,
  name TEXT NOT NULL,
  passed INTEGER,
  detail TEXT,
  max_abs REAL,
  max_rel REAL,
  ms REAL,
  reference_ms REAL,
  PRIMARY KEY (run_id, kind, idx)
);
CREATE TABLE IF NOT EXISTS overrides (
  id INTEGER PRIMARY KEY,
  student TEXT NOT NULL,
  exercise TEXT NOT NULL,
  points REAL NOT NULL,
  comment TEXT NOT NULL,
  author TEXT NOT NULL,
  created_at TEXT NOT NULL,
  cleared_at TEXT
);
"""


class GradebookError(Exception):
    """The gradebook file cannot be used (the message names it)."""


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def connect(path: Path, *, create: bool = False) -> sqlite3.Connection:
    """The gradebook at `path` (made, with its tables, when `create`)."""
    if not create and not path.is_file():
        raise GradebookError(f"{path}: no gradebook here; `gpulab grade init` makes one")
    try:
        conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA foreign_keys=ON")
        if create:
            conn.executescript(SCHEMA)
            conn.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', ?)", (SCHEMA_VERSION,)
            )
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    except sqlite3.DatabaseError as exc:
        raise GradebookError(f"{path}: not a gradebook gpulab can read ({exc})") from None
    if version is None or version[0] != SCHEMA_VERSION:
        found = version[0] if version else "none"
        raise GradebookError(
            f"{path}: gradebook schema {found}, this gpulab reads {SCHEMA_VERSION}"
        )
    return conn


@contextmanager
def writing(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction, taken at once (BEGIN IMMEDIATE): a second
    writer waits for it instead of failing half-way."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
