"""The options of each `gpulab` subcommand, as a light table.

Declared here rather than in each command's module, so that `gpulab --help`
(gpulab.cli builds every subparser) imports no command module and nothing
heavy. One function per group of commands keeps each table short.
"""

from __future__ import annotations


def arguments(name: str) -> list[tuple[tuple[str, ...], dict]]:
    """Arguments of the subcommand `name`, as (flags, add_argument keywords)."""
    table = {
        **_course_arguments(),
        **_check_arguments(),
        **_serving_arguments(),
        **_probe_arguments(),
        **_serve_arguments(),
        **_bench_arguments(),
        **_dev_arguments(),
        **_reference_arguments(),
        **_debug_arguments(),
    }
    return table.get(name, [])


Arguments = dict[str, list[tuple[tuple[str, ...], dict]]]

_EXERCISE = (
    ("exercise",),
    {"metavar": "EXERCISE", "help": "exercise id (softmax) or lesson number (2)"},
)
# Parsed by the command (commands.common.parse_timeout), so that nan, inf
# or 10**9 get the same one-line refusal as any other bad value.
_TIMEOUT = (
    ("--timeout",),
    {
        "default": None,
        "metavar": "SECONDS",
        "help": "kill the check after this long (default 60 on the "
        "CPU, 300 on a GPU; at most 3600)",
    },
)


def _course_arguments() -> Arguments:
    """list, lesson, hint, reset, solution, where, next."""
    ex = _EXERCISE
    return {
        "list": [(("--json",), {"action": "store_true", "help": "machine-readable output"})],
        "hint": [
            ex,
            (("--all",), {"action": "store_true", "help": "show every hint revealed so far"}),
        ],
        "reset": [ex, (("--yes", "-y"), {"action": "store_true", "help": "don't ask"})],
        "solution": [ex],
        "where": [(("exercise",), {"metavar": "EXERCISE", "nargs": "?"})],
        "lesson": [
            ex,
            (
                ("--deep",),
                {"action": "store_true", "help": "unfold the deep dives (shown folded otherwise)"},
            ),
            (
                ("--no-pager",),
                {"action": "store_true", "help": "print it all at once, even in a terminal"},
            ),
        ],
        "next": [
            (
                ("--edit",),
                {
                    "action": "store_true",
                    "help": "open the exercise's file in $VISUAL or $EDITOR",
                },
            ),
            (("--json",), {"action": "store_true", "help": "machine-readable output"}),
        ],
    }


def _check_arguments() -> Arguments:
    """check, watch."""
    ex, timeout = _EXERCISE, _TIMEOUT
    return {
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
            (
                ("--off",),
                {
                    "action": "append",
                    # gpulab.wire.protocol.KERNEL_PATHS's names (kept literal: no import here)
                    "choices": ["fa3", "softmax_smem", "matmul_tma"],
                    "metavar": "PATH",
                    "help": "run the reference kernels without this Hopper-only path "
                    "(fa3, softmax_smem, matmul_tma; repeatable), to time the "
                    "path every other GPU takes",
                },
            ),
        ],
        "watch": [
            ex,
            timeout,
            (("--device",), {"choices": ["auto", "cpu", "cuda"], "default": "auto"}),
            (("--poll",), {"action": "store_true", "help": "poll instead of file events"}),
        ],
    }


def _serving_arguments() -> Arguments:
    """serving: the LLM serving calculator."""
    return {
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
            (
                ("--weights",),
                {
                    # gpulab.gpu.serving.WEIGHT_DTYPES (kept literal: no import here)
                    "choices": ["bf16", "fp8", "fp8-a16", "int4"],
                    "default": "bf16",
                    "help": "fp8: W8A8 (the fp8 roof); fp8-a16: fp8 weights, bf16 "
                    "activations (the bf16 roof); int4: W4A16",
                },
            ),
            (("--kv",), {"choices": ["bf16", "fp8"], "default": "bf16", "help": "KV-cache dtype"}),
            (
                ("--gpu",),
                {"metavar": "NAME", "help": "a GPU of the hardware table (default H100 SXM)"},
            ),
            (("--plot",), {"action": "store_true", "help": "draw both steps on the roofline"}),
            (("--models",), {"action": "store_true", "help": "list the model presets"}),
            (("--json",), {"action": "store_true", "help": "machine-readable output"}),
        ],
    }


def _probe_arguments() -> Arguments:
    """probe: this machine's GPUs and their ceilings."""
    return {
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
    }


def _serve_arguments() -> Arguments:
    """serve: the lab in a browser."""
    return {
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
            (
                ("--gradebook",),
                {
                    "metavar": "DIR",
                    "help": "serve a course's gradebook view (`gpulab grade view`) instead of the lab",
                },
            ),
        ],
    }


def _bench_arguments() -> Arguments:
    """bench and profile: timing the references, profiling a solution."""
    ex = _EXERCISE
    return {
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
    }


def _dev_arguments() -> Arguments:
    """dev: the course authors' tools."""
    return {
        "dev": [
            (
                ("action",),
                {
                    "choices": ["check", "compile", "new-exercise"],
                    "help": "check: every starter fails, every reference passes; "
                    "compile: every kernel for every target GPU (no GPU "
                    "needed); new-exercise: a new exercise folder to edit "
                    "(docs/new-exercise.md)",
                },
            ),
            (
                ("name",),
                {
                    "metavar": "NAME",
                    "nargs": "?",
                    "help": "check: only this exercise; new-exercise: its name",
                },
            ),
            (
                ("--dir",),
                {
                    "metavar": "PATH",
                    "help": "new-exercise: the folder to make it in (default: here)",
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
    }


def _reference_arguments() -> Arguments:
    """hardware, roofline, glossary: the reference tables and plots."""
    return {
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
        "counters": [
            (("name",), {"metavar": "NAME", "nargs": "?", "help": "one kernel (none: list them)"}),
            (
                ("--ncu",),
                {"action": "store_true", "help": "profile it on this GPU with Nsight Compute"},
            ),
        ],
    }


def _debug_arguments() -> Arguments:
    """debug, compare, restore: after a check, in place."""
    ex = _EXERCISE
    return {
        "debug": [
            ex,
            (
                ("--case",),
                {
                    "type": int,
                    "metavar": "N",
                    "help": "the wrong case's number in the check's table (default: the first)",
                },
            ),
            (
                ("--script",),
                {"action": "store_true", "help": "write a script that reruns the case, and stop"},
            ),
            (("--list",), {"action": "store_true", "help": "list the saved wrong cases"}),
        ],
        "compare": [ex],
        "restore": [
            ex,
            (("--list",), {"action": "store_true", "help": "list the backups, newest first"}),
            (
                ("--pick",),
                {"type": int, "metavar": "N", "help": "restore the Nth newest (default 1)"},
            ),
            (("--yes", "-y"), {"action": "store_true", "help": "don't ask"}),
        ],
    }
