"""The steps of `gpulab grade` and their options, as a light table (the
instructor's side: gpulab.gradebook). Like gpulab.cli.options, declared
apart from the command's module so that `--help` imports nothing heavy."""

from __future__ import annotations

Arg = tuple[tuple[str, ...], dict]

_COURSE: Arg = (
    ("--course",),
    {
        "metavar": "DIR",
        "help": "the course folder (default: the one holding gradebook.toml, "
        "from the current folder up)",
    },
)
_JSON: Arg = (("--json",), {"action": "store_true", "help": "print one JSON object"})
_EXERCISES: Arg = (
    ("--exercise",),
    {"metavar": "EX", "action": "append", "help": "only this exercise (repeatable)"},
)


def grade_steps() -> dict[str, tuple[str, list[Arg]]]:
    """step -> (help, arguments)."""
    return {
        "init": (
            "make a course folder: gradebook.toml, and the roster if given",
            [
                (("folder",), {"metavar": "DIR", "help": "the folder to make (may exist, empty)"}),
                (("--name",), {"help": "the course's name (default: the folder's)"}),
                (
                    ("--exercises",),
                    {
                        "metavar": "LIST",
                        "help": "exercises assigned, comma-separated (default: each lesson's final one)",
                    },
                ),
                (
                    ("--due",),
                    {
                        "metavar": "WHEN",
                        "help": "due date of each, 2026-12-20 or 2026-12-20T23:59Z",
                    },
                ),
                (("--points",), {"type": float, "default": 10.0, "help": "points of each (10)"}),
                (
                    ("--speed-points",),
                    {
                        "type": float,
                        "default": 3.0,
                        "help": "of which for speed on a GPU (3; 0 for steps)",
                    },
                ),
                (
                    ("--late",),
                    {"choices": ["none", "zero", "percent_per_day"], "default": "percent_per_day"},
                ),
                (("--roster",), {"metavar": "CSV", "help": "import this roster too"}),
            ],
        ),
        "roster": (
            "import the class list (CSV: plain, or Canvas's or Moodle's export)",
            [(("csv",), {"metavar": "CSV"}), _COURSE],
        ),
        "collect": (
            "place submissions: a folder or .zip (student folders, Canvas or Moodle bulk download)",
            [
                (("source",), {"metavar": "PATH", "help": "a folder or a .zip"}),
                (
                    ("--layout",),
                    {"choices": ["auto", "folder", "canvas", "moodle"], "default": "auto"},
                ),
                (
                    ("--exercise",),
                    {
                        "metavar": "EX",
                        "help": "every file is this exercise (one assignment's download)",
                    },
                ),
                (
                    ("--submitted-at",),
                    {
                        "metavar": "WHEN",
                        "help": "when they were handed in (default: each file's time)",
                    },
                ),
                _COURSE,
                _JSON,
            ],
        ),
        "run": (
            "grade what is new or stale (local workers, or a Slurm array), then ingest",
            [
                (("--executor",), {"choices": ["local", "slurm"], "default": "local"}),
                (
                    ("--jobs", "-j"),
                    {
                        "type": int,
                        "metavar": "N",
                        "help": "local workers (default: one per GPU, else 1)",
                    },
                ),
                (
                    ("--device",),
                    {"choices": ["auto", "cpu", "cuda"], "help": "default: gradebook.toml's"},
                ),
                (
                    ("--timeout",),
                    {"metavar": "SECONDS", "help": "a check's limit (default: gradebook.toml's)"},
                ),
                (
                    ("--all",),
                    {"action": "store_true", "help": "grade every latest submission again"},
                ),
                _EXERCISES,
                (
                    ("--student",),
                    {"metavar": "ID", "action": "append", "help": "only this student (repeatable)"},
                ),
                (
                    ("--dry-run",),
                    {"action": "store_true", "help": "list what would be graded and why"},
                ),
                (
                    ("--emit-sbatch",),
                    {
                        "metavar": "PATH",
                        "help": "write a plain sbatch array script instead of running",
                    },
                ),
                (("--partition",), {"default": "", "help": "Slurm partition"}),
                (("--account",), {"default": "", "help": "Slurm account"}),
                (
                    ("--time",),
                    {
                        "type": int,
                        "default": 60,
                        "metavar": "MIN",
                        "help": "Slurm time per student (60)",
                    },
                ),
                (
                    ("--gpus",),
                    {
                        "type": int,
                        "default": 1,
                        "help": "Slurm --gres=gpu:N per student (1; 0: none)",
                    },
                ),
                (
                    ("--parallel",),
                    {
                        "type": int,
                        "default": 16,
                        "metavar": "P",
                        "help": "array tasks at once (%%P; 16)",
                    },
                ),
                (("--cpus",), {"type": int, "default": 4, "help": "Slurm CPUs per task (4)"}),
                (("--no-wait",), {"action": "store_true", "help": "slurm: submit and return"}),
                _COURSE,
            ],
        ),
        "ingest": ("read the workers' result files into the gradebook", [_COURSE, _JSON]),
        "status": ("the grades: students x exercises, and what is left to grade", [_COURSE, _JSON]),
        "override": (
            "set a grade by hand, with a comment (kept through every regrade)",
            [
                (("student",), {"metavar": "STUDENT"}),
                (("exercise",), {"metavar": "EXERCISE"}),
                (
                    ("points",),
                    {
                        "metavar": "POINTS",
                        "nargs": "?",
                        "help": "the grade (leave out with --clear)",
                    },
                ),
                (("--comment", "-m"), {"default": "", "help": "why (required to set one)"}),
                (
                    ("--clear",),
                    {"action": "store_true", "help": "remove the override (its row is kept)"},
                ),
                _COURSE,
            ],
        ),
        "export": (
            "Canvas CSV, Moodle CSV, a long CSV, Gradescope results.json, feedback",
            [
                (("--to",), {"metavar": "DIR", "help": "folder (default: exports/ in the course)"}),
                (
                    ("--format",),
                    {
                        "action": "append",
                        "choices": ["canvas", "moodle", "long", "gradescope", "feedback"],
                        "help": "one of them (repeatable; default: all)",
                    },
                ),
                (
                    ("--no-points-row",),
                    {"action": "store_true", "help": "Canvas: leave out Points Possible"},
                ),
                (("--moodle-id",), {"choices": ["email", "idnumber"], "default": "email"}),
                _COURSE,
            ],
        ),
        "similar": (
            "pairs of submissions that share too much code (copydetect; starters ignored)",
            [
                (
                    ("--threshold",),
                    {"type": float, "default": 0.5, "help": "share of a file to flag (0.5)"},
                ),
                _EXERCISES,
                (
                    ("--report",),
                    {"metavar": "PATH", "help": "HTML report (default: exports/similarity.html)"},
                ),
                _COURSE,
                _JSON,
            ],
        ),
        "view": ("the gradebook in the terminal (students x exercises)", [_COURSE]),
    }
