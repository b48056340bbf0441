"""A note for a learner who prints inside a Triton kernel.

In the Triton interpreter (a CPU check) `print(x)` in a kernel shows every
program's values as it runs; compiled for a GPU it runs once, at compile
time, and shows the tensor's type, not its values. `tl.device_print` is
the call that prints values from a kernel on a GPU (and in the interpreter
too), `tl.static_print` the one for compile time. A learner who debugs on a
laptop and then checks on a GPU meets the difference: the check says so.
"""

from __future__ import annotations

import ast

NOTE = (
    "Your kernel calls print(), at line {lines}. In the Triton interpreter (the CPU) "
    "it prints each program's values as it runs; compiled on a GPU it runs once, at "
    "compile time, and prints types, not values. To print from a kernel on a GPU, use "
    'tl.device_print("x", x) (the interpreter runs it too); tl.static_print prints '
    "at compile time. Printing in your wrapper (print(x) outside the kernel) works "
    "on both."
)


def kernel_prints(source: bytes) -> list[int]:
    """The lines of plain print() calls inside the file's @jit functions."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    lines: list[int] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef) or not any(
            _is_jit(d) for d in node.decorator_list
        ):
            continue
        for inner in ast.walk(node):
            if (
                isinstance(inner, ast.Call)
                and isinstance(inner.func, ast.Name)
                and inner.func.id == "print"
            ):
                lines.append(inner.lineno)
    return sorted(set(lines))


def _is_jit(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    return name == "jit"


def note(source: bytes | None) -> str | None:
    """The note for `source`, or None when no kernel prints."""
    lines = kernel_prints(source) if source else []
    if not lines:
        return None
    shown = ", ".join(map(str, lines[:3])) + (" …" if len(lines) > 3 else "")
    return NOTE.format(lines=shown)
