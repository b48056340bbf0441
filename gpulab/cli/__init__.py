"""The `gpulab` command line.

`gpulab` with no command starts the lab (the TUI). Each subcommand's module
is imported only when that subcommand runs, so `gpulab --help` stays fast and
loads none of torch, triton, jax or textual.

Exit codes of `check`: 0 passed, 1 the solution failed (wrong, crashed, timed
out, cheated), 2 gpulab could not run the check.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import signal
import sys

from gpulab.cli.options import arguments
from gpulab.wire.status import Status

# name -> (module, help). Each module defines `run(args) -> int`; the
# options live in gpulab.cli.options, so `--help` imports no command module.
COMMANDS: dict[str, tuple[str, str]] = {
    "list": ("gpulab.cli.commands.course", "list the lessons and your progress"),
    "lesson": ("gpulab.cli.commands.course", "print a lesson's text"),
    "check": ("gpulab.cli.commands.check", "grade an exercise (your workspace copy or --file)"),
    "watch": ("gpulab.cli.commands.check", "re-check an exercise every time you save it"),
    "hint": ("gpulab.cli.commands.course", "reveal the next hint of an exercise"),
    "reset": (
        "gpulab.cli.commands.course",
        "restore an exercise's starter (your file is backed up)",
    ),
    "solution": (
        "gpulab.cli.commands.course",
        "show the reference solution (once you have passed)",
    ),
    "where": ("gpulab.cli.commands.course", "print the workspace folder and an exercise's file"),
    "debug": (
        "gpulab.cli.commands.debug",
        "rerun a wrong case of your last check in Python, outside the sandbox",
    ),
    "compare": (
        "gpulab.cli.commands.debug",
        "your solution beside the reference, side by side (once you have passed)",
    ),
    "restore": (
        "gpulab.cli.commands.debug",
        "bring back the file a reset backed up (your current file is backed up too)",
    ),
    "next": (
        "gpulab.cli.commands.course",
        "where you are in the course, what is next, and how to open it",
    ),
    "serving": (
        "gpulab.cli.commands.serving",
        "LLM serving roofline: prefill/decode FLOPs, bytes, bound, tokens/s",
    ),
    "bench": (
        "gpulab.cli.commands.bench",
        "time the reference kernels beside their baselines (GPU)",
    ),
    "profile": (
        "gpulab.cli.commands.profile",
        "profile your solution: top ops, trace; --nsys/--ncu",
    ),
    "dev": ("gpulab.cli.commands.dev", "course tools for authors: `gpulab dev check|compile`"),
    "serve": (
        "gpulab.cli.commands.serve",
        "the lab in a browser (a URL with a token; 127.0.0.1 or --unix)",
    ),
    "hardware": (
        "gpulab.cli.commands.hardware",
        "datasheet figures of GPUs, ridge points, roadmap",
    ),
    "roofline": ("gpulab.cli.commands.roofline", "plot the roofline with your graded runs on it"),
    "glossary": ("gpulab.cli.commands.glossary", "look up a term (no term: list them all)"),
    "counters": (
        "gpulab.cli.commands.counters",
        "Nsight Compute's counters for the course's kernels (recorded; --ncu: on this GPU)",
    ),
    "probe": (
        "gpulab.cli.commands.probe",
        "show this machine's GPUs; --watch live, --bench measure ceilings",
    ),
    "grade": (
        "gpulab.cli.commands.grade",
        "instructors: grade a class, keep a gradebook, export it (`gpulab grade -h`)",
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpulab",
        description="gpulab: a terminal lab and tutor for GPU programming. "
        "Run without a command to start the lab.",
    )
    parser.add_argument("--version", action="version", version=_version())
    parser.add_argument(
        "--workspace", metavar="DIR", help="workspace folder (default: $GPULAB_HOME, else ~/gpulab)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        p.set_defaults(_name=name)
        # Options come from one light table per command; see gpulab.cli.options.
        for args, kwargs in arguments(name):
            p.add_argument(*args, **kwargs)
        if name == "grade":
            _grade_steps(p)
    return parser


def _grade_steps(parser: argparse.ArgumentParser) -> None:
    """`gpulab grade STEP`: each step a subparser with its own --help."""
    from gpulab.cli.grade_options import grade_steps

    steps = parser.add_subparsers(dest="step", metavar="STEP", required=True)
    for step, (help_text, args) in grade_steps().items():
        q = steps.add_parser(step, help=help_text, description=help_text)
        for flags, kwargs in args:
            q.add_argument(*flags, **kwargs)


def _version() -> str:
    from gpulab import __version__

    return f"gpulab {__version__}"


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """parse_args, plus a JSON error object on stdout for a bad command line
    that asked for --json (argparse itself only writes to stderr)."""
    if "--json" not in (sys.argv[1:] if argv is None else argv):
        return parser.parse_args(argv)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return parser.parse_args(argv)
    except SystemExit as exc:
        sys.stderr.write(err.getvalue())
        if exc.code == 2:
            lines = err.getvalue().strip().splitlines()
            summary = lines[-1] if lines else "invalid command line"
            print(json.dumps({"status": Status.ERROR, "summary": summary}, indent=2))
        raise


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = _parse(parser, argv)
    if args.command is None:
        from gpulab.tui.app import run_app

        return run_app(workspace=args.workspace)
    module = importlib.import_module(args._module)
    # SIGTERM (`timeout`, a batch system) unwinds like Ctrl-C: a running
    # check's judge and sandboxes are stopped and its folder removed.
    signal.signal(signal.SIGTERM, _terminated)
    try:
        return int(module.run(args) or 0)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except _Terminated:
        return 143


class _Terminated(BaseException):
    pass


def _terminated(signum: int, frame: object) -> None:
    raise _Terminated


if __name__ == "__main__":
    raise SystemExit(main())
