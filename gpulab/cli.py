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
import sys

# name -> (module, help). Each module defines `run(args) -> int`; the
# options live in `_arguments` below, so `--help` imports no command module.
COMMANDS: dict[str, tuple[str, str]] = {
    "list": ("gpulab.commands.course", "list the lessons and your progress"),
    "lesson": ("gpulab.commands.course", "print a lesson's text"),
    "check": ("gpulab.commands.check", "grade an exercise (your workspace copy or --file)"),
    "watch": ("gpulab.commands.check", "re-check an exercise every time you save it"),
    "hint": ("gpulab.commands.course", "reveal the next hint of an exercise"),
    "reset": ("gpulab.commands.course", "restore an exercise's starter (your file is backed up)"),
    "solution": ("gpulab.commands.course", "show the reference solution (once you have passed)"),
    "where": ("gpulab.commands.course", "print the workspace folder and an exercise's file"),
    "serving": (
        "gpulab.commands.serving",
        "LLM serving roofline: prefill/decode FLOPs, bytes, bound, tokens/s",
    ),
    "bench": ("gpulab.commands.bench", "time the reference kernels beside their baselines (GPU)"),
    "profile": ("gpulab.commands.profile", "profile your solution: top ops, trace; --nsys/--ncu"),
    "dev": ("gpulab.commands.dev", "course tools for authors: `gpulab dev check|compile`"),
    "serve": (
        "gpulab.commands.serve",
        "the lab in a browser (a URL with a token; 127.0.0.1 or --unix)",
    ),
    "hardware": ("gpulab.commands.hardware", "datasheet figures of GPUs, ridge points, roadmap"),
    "roofline": ("gpulab.commands.roofline", "plot the roofline with your graded runs on it"),
    "glossary": ("gpulab.commands.glossary", "look up a term (no term: list them all)"),
    "probe": (
        "gpulab.commands.probe",
        "show this machine's GPUs; --watch live, --bench measure ceilings",
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
        # Options come from one light table per command in this file; see _arguments().
        for args, kwargs in _arguments(name):
            p.add_argument(*args, **kwargs)
    return parser


def _version() -> str:
    from gpulab import __version__

    return f"gpulab {__version__}"


def _arguments(name: str) -> list[tuple[tuple[str, ...], dict]]:
    """Arguments per subcommand, declared here so --help imports nothing heavy."""
    ex = (
        ("exercise",),
        {"metavar": "EXERCISE", "help": "exercise id (softmax) or lesson number (2)"},
    )
    # Parsed by the command (commands.common.parse_timeout), so that nan, inf
    # or 10**9 get the same one-line refusal as any other bad value.
    timeout = (
        ("--timeout",),
        {
            "default": None,
            "metavar": "SECONDS",
            "help": "kill the check after this long (default 60 on the "
            "CPU, 300 on a GPU; at most 3600)",
        },
    )
    table: dict[str, list[tuple[tuple[str, ...], dict]]] = {
        "list": [(("--json",), {"action": "store_true", "help": "machine-readable output"})],
        "lesson": [ex],
        "check": [
            ex,
            (
                ("--file",),
                {"metavar": "PATH", "help": "grade this file instead of the workspace copy"},
            ),
            (("--json",), {"action": "store_true", "help": "print one JSON object"}),
            timeout,
            (
                ("--device",),
                {
                    "choices": ["auto", "cpu", "cuda"],
                    "default": "auto",
                    "help": "cuda, or cpu (Triton interpreter); default: cuda if present",
                },
            ),
            (("--no-timing",), {"action": "store_true", "help": "correctness only, no timing"}),
            (
                ("--explain",),
                {
                    "action": "store_true",
                    "help": "say what limits the kernel, with evidence (on the CPU: "
                    "compile-time facts for the datasheet GPU)",
                },
            ),
            (
                ("--gpu",),
                {
                    "metavar": "NAME",
                    "help": "with --explain on the CPU: the datasheet "
                    "GPU to explain for (default: the roofline's)",
                },
            ),
        ],
        "watch": [
            ex,
            timeout,
            (("--device",), {"choices": ["auto", "cpu", "cuda"], "default": "auto"}),
            (("--poll",), {"action": "store_true", "help": "poll instead of file events"}),
        ],
        "hint": [
            ex,
            (("--all",), {"action": "store_true", "help": "show every hint revealed so far"}),
        ],
        "reset": [ex, (("--yes", "-y"), {"action": "store_true", "help": "don't ask"})],
        "solution": [ex],
        "where": [(("exercise",), {"metavar": "EXERCISE", "nargs": "?"})],
        "serving": [
            (
                ("--model",),
                {
                    "default": "llama-3-8b",
                    "metavar": "NAME|config.json",
                    "help": "a preset (see --models) or a Hugging Face config.json",
                },
            ),
            (("--batch",), {"type": int, "default": 1, "help": "sequences per step (default 1)"}),
            (
                ("--prompt",),
                {
                    "type": int,
                    "default": None,
                    "help": "prefill prompt tokens (2048, or the context if shorter)",
                },
            ),
            (
                ("--context",),
                {"type": int, "default": 4096, "help": "decode context tokens (4096)"},
            ),
            (("--weights",), {"choices": ["bf16", "fp8", "int4"], "default": "bf16"}),
            (("--kv",), {"choices": ["bf16", "fp8"], "default": "bf16", "help": "KV-cache dtype"}),
            (
                ("--gpu",),
                {"metavar": "NAME", "help": "a GPU of the hardware table (default H100 SXM)"},
            ),
            (("--plot",), {"action": "store_true", "help": "draw both steps on the roofline"}),
            (("--models",), {"action": "store_true", "help": "list the model presets"}),
            (("--json",), {"action": "store_true", "help": "machine-readable output"}),
        ],
        "probe": [
            (
                ("--json",),
                {
                    "action": "store_true",
                    "help": "print one JSON object (a line per refresh with --watch)",
                },
            ),
            (("--watch",), {"action": "store_true", "help": "refresh live until Ctrl-C"}),
            (
                ("--interval",),
                {
                    "type": float,
                    "default": 1.0,
                    "metavar": "SECONDS",
                    "help": "refresh period of --watch (default 1)",
                },
            ),
            (
                ("--bench",),
                {
                    "action": "store_true",
                    "help": "run the microbenchmarks (GPU; minutes) and cache the ceilings",
                },
            ),
            (
                ("--quick",),
                {"action": "store_true", "help": "with --bench: fewer sizes and shapes"},
            ),
            (
                ("--gpu",),
                {
                    "metavar": "NAME",
                    "help": "datasheet GPU for rooflines without a GPU (remembered)",
                },
            ),
        ],
        "serve": [
            (
                ("--host",),
                {
                    "default": "127.0.0.1",
                    "help": "address to bind (default 127.0.0.1: this machine only)",
                },
            ),
            (("--port",), {"type": int, "default": 8000, "help": "port (default 8000)"}),
            (
                ("--unix",),
                {
                    "metavar": "PATH",
                    "help": "serve on a Unix socket only you "
                    "can open (mode 0600) instead of a TCP port",
                },
            ),
            (
                ("--allow-remote",),
                {"action": "store_true", "help": "allow a --host other than this machine"},
            ),
        ],
        "bench": [
            (
                ("kernels",),
                {
                    "nargs": "*",
                    "metavar": "KERNEL",
                    "help": "bandwidth, softmax, matmul, flash_attention, "
                    "rope_rmsnorm (default: all)",
                },
            ),
            (("--json",), {"metavar": "PATH", "help": "also write the results as JSON"}),
            (
                ("--rounds",),
                {
                    "type": int,
                    "default": 1,
                    "metavar": "N",
                    "help": "time each reference and baseline N times, interleaved (default 1)",
                },
            ),
        ],
        "profile": [
            ex,
            (
                ("--file",),
                {"metavar": "PATH", "help": "profile this file instead of the workspace copy"},
            ),
            (("--steps",), {"type": int, "default": 5, "help": "steps recorded after warm-up (5)"}),
            (
                ("--nsys",),
                {"action": "store_true", "help": "run Nsight Systems (a timeline with NVTX)"},
            ),
            (
                ("--ncu",),
                {"action": "store_true", "help": "run Nsight Compute (per-kernel counters)"},
            ),
            (
                ("--print-command",),
                {
                    "action": "store_true",
                    "help": "print the nsys and ncu command lines, run nothing",
                },
            ),
        ],
        "dev": [
            (
                ("action",),
                {
                    "choices": ["check", "compile"],
                    "help": "check: every starter fails, every reference passes; "
                    "compile: every kernel for every target GPU (no GPU "
                    "needed)",
                },
            ),
            (("--device",), {"choices": ["auto", "cpu", "cuda"], "default": "auto"}),
            (
                ("--arch",),
                {
                    "metavar": "LIST",
                    "help": "compile: targets, e.g. "
                    "sm_75,sm_80,sm_86,sm_89,sm_90,sm_100,sm_120 (the default)",
                },
            ),
            (
                ("--only",),
                {
                    "metavar": "EXERCISE",
                    "action": "append",
                    "help": "compile: only this exercise's kernels (repeatable)",
                },
            ),
            (("--json",), {"action": "store_true", "help": "compile: one JSON object"}),
        ],
        "hardware": [
            (
                ("name",),
                {"metavar": "NAME", "nargs": "?", "help": "one GPU in detail (h200, B200)"},
            ),
            (("--json",), {"action": "store_true", "help": "machine-readable output"}),
            (("--roadmap",), {"action": "store_true", "help": "the generations the book names"}),
        ],
        "roofline": [
            (
                ("--gpu",),
                {
                    "metavar": "NAME",
                    "help": "datasheet GPU (default: this machine's, "
                    "else the workspace setting, else H100 SXM)",
                },
            ),
            (("--dtype",), {"metavar": "DTYPE", "help": "fp32, tf32, fp16, bf16, fp8, fp4"}),
            (("--measured",), {"action": "store_true", "help": "also draw measured ceilings"}),
            (
                ("--export",),
                {"metavar": "PATH", "help": "write PATH.svg (or .png with matplotlib)"},
            ),
            (
                ("--remember",),
                {"action": "store_true", "help": "save --gpu as the workspace setting"},
            ),
            (("--json",), {"action": "store_true", "help": "the model and points as JSON"}),
            (
                ("--width",),
                {"type": int, "metavar": "COLS", "help": "plot width (default: terminal)"},
            ),
            (("--height",), {"type": int, "metavar": "ROWS", "help": "plot height"}),
        ],
        "glossary": [
            (("term",), {"metavar": "TERM", "nargs": "*", "help": "a term, abbreviation or alias"}),
            (("--json",), {"action": "store_true", "help": "machine-readable output"}),
        ],
    }
    return table.get(name, [])


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
            print(json.dumps({"status": "error", "summary": summary}, indent=2))
        raise


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = _parse(parser, argv)
    if args.command is None:
        from gpulab.tui.app import run_app

        return run_app(workspace=args.workspace)
    module = importlib.import_module(args._module)
    try:
        return int(module.run(args) or 0)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
