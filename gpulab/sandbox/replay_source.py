"""The Triton kernels of a submission, as code that can run apart from it.

The judge re-runs the kernels a submission launched (gpulab.sandbox.replay)
in a fresh process that never imports the submission. What it runs is not
the file but what this module keeps of it: the `@triton.jit` functions at
its top level and the constants they read, checked node by node against
what a Triton kernel can say. A kernel body is Python to the interpreter,
so this check is what keeps the replay from running anything else: no
imports, no names but the kernel's own, triton.language, math and the
file's constants and kernels, no attribute that starts with `_` or leads
out of triton.language (a tensor's `.handle.data` is a numpy array, and
numpy can write files). Decorators become a plain `triton.jit`: autotune
and heuristics only choose the constexprs and launch options, and the
replay takes those from the launches recorded.

Line numbers are kept, so a message names the learner's own line.
"""

from __future__ import annotations

import ast
import copy
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

# The modules a kernel or a constant may name, and reach through attributes.
MODULES = {
    "triton",
    "triton.language",
    "triton.language.math",
    "triton.language.standard",
    "triton.language.random",
    "triton.language.extra",
    "triton.language.extra.cuda",
    "triton.language.extra.libdevice",
    "triton.language.extra.cuda.libdevice",
    "math",
    # Gluon (Triton's lower-level language: layouts, shared memory, TMA and
    # mbarriers by hand), as a Hopper kernel names it.
    "triton.experimental.gluon",
    "triton.experimental.gluon.language",
    "triton.experimental.gluon.language.nvidia",
    "triton.experimental.gluon.language.nvidia.hopper",
    "triton.experimental.gluon.language.nvidia.hopper.tma",
    "triton.experimental.gluon.language.nvidia.hopper.mbarrier",
    "triton.experimental.gluon.language.nvidia.ampere",
    "triton.experimental.gluon.language.nvidia.ampere.async_copy",
    "triton.experimental.gluon.language.nvidia.ampere.mbarrier",
}
GLUON = "triton.experimental.gluon"
# The packages whose objects a kernel may name (a module's functions, types
# and layouts), besides math.
LANGUAGES = ("triton.language", f"{GLUON}.language")
# What `triton.X` may be, besides triton.language.
TRITON_NAMES = {"cdiv", "next_power_of_2", "jit", "language", "autotune", "heuristics", "Config"}
BUILTINS = ("range", "min", "max", "int", "float", "bool", "abs", "len", "tuple", "print")
# Attributes a kernel may not touch on its values, whatever they are: the
# interpreter's tensors hold numpy arrays (`.handle.data`), and a jit
# function holds the Python function it wraps.
DENIED_ATTRIBUTES = {
    "handle",
    "data",
    "base",
    "ctypes",
    "tofile",
    "dump",
    "dumps",
    "fn",
    "src",
    "run",
    "rewriter",
    "cache",
    "kwargs",
    "gi_frame",
    "gi_code",
    "cr_frame",
    "ag_frame",
    "tb_frame",
    "tb_next",
    "f_back",
    "f_globals",
    "f_locals",
    "f_builtins",
    "f_code",
}
STATEMENTS = (
    ast.Assign,
    ast.AugAssign,
    ast.AnnAssign,
    ast.For,
    ast.While,
    ast.If,
    ast.Return,
    ast.Expr,
    ast.Pass,
    ast.Break,
    ast.Continue,
    ast.Assert,
)
EXPRESSIONS = (
    ast.BinOp,
    ast.UnaryOp,
    ast.BoolOp,
    ast.Compare,
    ast.IfExp,
    ast.Call,
    ast.Attribute,
    ast.Name,
    ast.Constant,
    ast.Subscript,
    ast.Slice,
    ast.Tuple,
    ast.List,
    ast.keyword,
    ast.Starred,
)
HELPERS = (
    ast.operator,
    ast.unaryop,
    ast.boolop,
    ast.cmpop,
    ast.expr_context,
    ast.arguments,
    ast.arg,
)


class NotReplayable(Exception):
    """The file's kernels cannot be run apart from it (says where and why)."""

    def __init__(self, line: int, why: str) -> None:
        super().__init__(f"line {line}: {why}")
        self.line = line
        self.why = why


@dataclass(frozen=True)
class ReplaySource:
    text: str  # the kept lines; the others blank, so line numbers match
    kernels: tuple[str, ...]  # the @triton.jit and @gluon.jit functions, by name
    modules: dict[str, str]  # alias -> module name, for the replay to bind
    problems: dict[str, str]  # kernel -> why it cannot be replayed


def _is_jit(decorator: ast.expr) -> bool:
    node = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (isinstance(node, ast.Attribute) and node.attr == "jit") or (
        isinstance(node, ast.Name) and node.id == "jit"
    )


def _imports(tree: ast.Module) -> dict[str, str]:
    """alias -> module for the file's imports of allowed modules, and
    alias -> 'triton.jit' style names for `from triton import jit`."""
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in MODULES:
                    # `import triton.language` binds `triton`.
                    out[a.asname or a.name.split(".")[0]] = (
                        a.name if a.asname else a.name.split(".")[0]
                    )
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if full in MODULES:
                    out[a.asname or a.name] = full
                elif node.module == "triton" and a.name in TRITON_NAMES:
                    out[a.asname or a.name] = full
                elif node.module == GLUON and a.name == "jit":
                    out[a.asname or a.name] = full
                elif node.module in MODULES and node.module.startswith(LANGUAGES):
                    out[a.asname or a.name] = full
                elif node.module == "math":
                    out[a.asname or a.name] = full
    return out


def _resolve(dotted: str) -> Any:
    """The object `dotted` names, walking attributes from the longest
    allowed module; every module passed on the way must be allowed too
    (`tl.extra.pkgutil` is a module, and it is not)."""
    import importlib
    import inspect

    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        name = ".".join(parts[:i])
        if name not in MODULES:
            continue
        obj: Any = importlib.import_module(name)
        for attr in parts[i:]:
            obj = getattr(obj, attr)
            if inspect.ismodule(obj) and obj.__name__ not in MODULES:
                raise AttributeError(dotted)
        return obj
    raise AttributeError(dotted)


def _allowed_object(obj: Any, dotted: str) -> bool:
    import inspect

    if inspect.ismodule(obj):
        return obj.__name__ in MODULES
    if isinstance(obj, (int, float, bool, str)) or obj is None:
        return True
    import triton

    if obj in (triton.cdiv, triton.next_power_of_2, triton.jit):
        return True
    if dotted == f"{GLUON}.jit":
        return True
    try:
        import triton.language as tl

        if isinstance(obj, (tl.dtype, tl.constexpr)):
            return True
    except ImportError:  # pragma: no cover - triton is there when kernels are
        return False
    # triton.language's own jit functions (tl.max, tl.sum) wrap a function
    # of that package; under the interpreter the wrapper's class is the
    # interpreter's, so the wrapped function says where it is from.
    inner = getattr(obj, "fn", None)
    module = getattr(inner if callable(inner) else obj, "__module__", None) or ""
    return module == "math" or module.startswith(LANGUAGES)


class _Checker:
    def __init__(self, modules: dict[str, str], constants: set[str], kernels: set[str]) -> None:
        self.modules = modules
        self.constants = constants
        self.kernels = kernels

    def chain(self, node: ast.expr) -> str | None:
        """`tl.math.exp` -> 'triton.language.math.exp' when rooted at a module alias."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id in self.modules:
            return ".".join([self.modules[node.id], *reversed(parts)])
        return None

    def expr(self, node: ast.AST, names: set[str]) -> None:
        if not isinstance(node, EXPRESSIONS + HELPERS):
            raise NotReplayable(
                getattr(node, "lineno", 0),
                f"{type(node).__name__} is not something a Triton kernel can contain",
            )
        if isinstance(node, ast.Attribute):
            if node.attr.startswith("_") or node.attr in DENIED_ATTRIBUTES:
                raise NotReplayable(
                    node.lineno, f"a kernel may not use the attribute `.{node.attr}`"
                )
            dotted = self.chain(node)
            if dotted is not None:
                try:
                    obj = _resolve(dotted)
                except (AttributeError, ImportError):
                    raise NotReplayable(node.lineno, f"`{dotted}` does not exist") from None
                if not _allowed_object(obj, dotted):
                    raise NotReplayable(
                        node.lineno, f"`{dotted}` is not part of triton.language or math"
                    )
                return
        if isinstance(node, ast.Name):
            if node.id not in names and node.id not in self.modules:
                raise NotReplayable(
                    node.lineno,
                    f"the kernel uses `{node.id}`, which is not its own, a constant of the "
                    "file's top level, triton.language or math",
                )
            if node.id in self.modules:
                try:
                    obj = _resolve(self.modules[node.id])
                except (AttributeError, ImportError):
                    raise NotReplayable(node.lineno, f"`{node.id}` cannot be resolved") from None
                if not _allowed_object(obj, self.modules[node.id]):
                    raise NotReplayable(node.lineno, f"`{node.id}` is not part of triton.language")
        if isinstance(node, ast.keyword) and (node.arg or "_").startswith("_"):
            raise NotReplayable(
                getattr(node, "lineno", 0), "a kernel may not pass `**` or `_`-named arguments"
            )
        if isinstance(node, ast.Constant) and isinstance(node.value, bytes):
            raise NotReplayable(node.lineno, "bytes constants are not Triton")
        for child in ast.iter_child_nodes(node):
            self.expr(child, names)

    def statements(self, body: list[ast.stmt], names: set[str]) -> None:
        for stmt in body:
            if not isinstance(stmt, STATEMENTS):
                raise NotReplayable(
                    stmt.lineno, f"a kernel may not contain a `{type(stmt).__name__}` statement"
                )
            for target in _targets(stmt):
                _bind(target, names)
            for child in ast.iter_child_nodes(stmt):
                if isinstance(child, ast.stmt):
                    continue
                if isinstance(child, list):  # pragma: no cover - iter_child_nodes flattens
                    continue
                self.expr(child, names)
            for field in ("body", "orelse"):
                inner = getattr(stmt, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    self.statements(inner, names)

    def function(self, fn: ast.FunctionDef) -> None:
        a = fn.args
        if a.vararg or a.kwarg or a.posonlyargs:
            raise NotReplayable(fn.lineno, "a kernel takes named parameters only")
        names = set(self.constants) | set(self.kernels) | set(BUILTINS)
        for arg in [*a.args, *a.kwonlyargs]:
            names.add(arg.arg)
            if arg.annotation is not None:
                self.expr(arg.annotation, set(self.constants) | {"int", "float", "bool"})
        for default in [*a.defaults, *(d for d in a.kw_defaults if d is not None)]:
            self.expr(default, set(self.constants))
        # Locals may be read before the line that binds them only in ways
        # Triton itself rejects; binding them up front keeps this simple.
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
        self.statements(fn.body, names)


def _targets(stmt: ast.stmt) -> list[ast.expr]:
    if isinstance(stmt, ast.Assign):
        return list(stmt.targets)
    if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        return [stmt.target]
    if isinstance(stmt, ast.For):
        return [stmt.target]
    return []


def _bind(target: ast.expr, names: set[str]) -> None:
    if isinstance(target, ast.Name):
        names.add(target.id)
    elif isinstance(target, (ast.Tuple, ast.List)):
        for t in target.elts:
            _bind(t, names)


def _constant(node: ast.stmt, checker: _Checker) -> str | None:
    """The name a top-level `NAME = <expression of constants>` binds, or None."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target, value = node.targets[0], node.value
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        target, value = node.target, node.value
    else:
        return None
    if not isinstance(target, ast.Name) or target.id in checker.modules:
        return None
    if target.id.startswith("_gpulab"):  # the replay's own names (the jit decorators)
        return None
    try:
        if _version_shim(value, checker):
            return target.id
        checker.expr(value, set(checker.constants) | {"int", "float", "bool", "min", "max"})
        if isinstance(node, ast.AnnAssign):
            checker.expr(node.annotation, set(checker.constants))
    except NotReplayable:
        return None
    return target.id


def _version_shim(value: ast.expr, checker: _Checker) -> bool:
    """Whether `value` is a name that moved between Triton releases, taken
    from whichever this one has: `getattr(gl, "barrier", None) or
    gl.thread_barrier`. Each operand reads one attribute of an allowed
    module, so evaluating it can do nothing else; the one this Triton
    resolves first must be allowed. False where `value` is not this form;
    raises NotReplayable where it is and the name is not allowed."""
    operands = (
        value.values if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.Or) else [value]
    )
    names = [_getattr_name(v, checker) for v in operands]
    if not any(isinstance(v, ast.Call) for v in operands) or None in names:
        return False
    for v, dotted in zip(operands, names, strict=True):
        try:
            obj = _resolve(dotted or "")
        except (AttributeError, ImportError):
            continue  # not in this release: the next operand is read
        if not obj or not _allowed_object(obj, dotted or ""):
            raise NotReplayable(v.lineno, f"`{dotted}` is not part of triton.language or math")
        return True
    raise NotReplayable(value.lineno, f"none of {', '.join(map(str, names))} exists here")


def _getattr_name(node: ast.expr, checker: _Checker) -> str | None:
    """The dotted name `getattr(<module>, "<name>", None)` or `<module>.<name>`
    reads, where <module> is an allowed module; else None."""
    if isinstance(node, ast.Call):
        if not (
            isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) == 3
            and not node.keywords
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and isinstance(node.args[2], ast.Constant)
            and node.args[2].value is None
        ):
            return None
        base, attr = node.args[0], node.args[1].value
    elif isinstance(node, ast.Attribute):
        base, attr = node.value, node.attr
    else:
        return None
    if not attr.isidentifier() or attr.startswith("_") or attr in DENIED_ATTRIBUTES:
        return None
    module = checker.modules.get(base.id) if isinstance(base, ast.Name) else None
    if isinstance(base, ast.Attribute):
        module = checker.chain(base)
    if module not in MODULES:
        return None
    return f"{module}.{attr}"


def extract(source: str) -> ReplaySource:
    """What of `source` the replay may run. Raises NotReplayable for a file
    that does not parse; a kernel that fails the check is named in
    `problems` (the replay refuses a launch of it, not the whole file)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise NotReplayable(exc.lineno or 0, f"the file does not parse: {exc.msg}") from None
    # Lines as Python counts them: str.splitlines() also breaks at \x1c,
    # \x0c, \u2028 and others, which Python leaves inside a line (a
    # comment), and every line after one would be copied from a line the
    # check never looked at.
    lines = re.split(r"\r\n|\r|\n", source)
    if lines and lines[-1] == "":
        lines.pop()
    keep = [""] * len(lines)
    # Lines that hold more than one top-level statement (`C = 1; evil()`):
    # a kept node's lines are copied whole, so nothing may share them.
    owners = Counter(
        line for n in tree.body for line in range(n.lineno, (n.end_lineno or n.lineno) + 1)
    )

    def alone(node: ast.stmt) -> bool:
        return all(owners[i] == 1 for i in range(node.lineno, (node.end_lineno or node.lineno) + 1))

    modules = _imports(tree)
    module_aliases = modules  # checked where used: a module, or one of its names
    kernels = {
        n.name
        for n in tree.body
        if isinstance(n, ast.FunctionDef) and any(_is_jit(d) for d in n.decorator_list)
    }
    checker = _Checker(module_aliases, set(), kernels)
    problems: dict[str, str] = {}
    kept: list[ast.stmt] = []
    for node in tree.body:
        name = _constant(node, checker)
        if name is not None and name not in kernels and alone(node):
            checker.constants.add(name)
            _copy(lines, keep, node.lineno, node.end_lineno or node.lineno)
            kept.append(node)
            continue
        if isinstance(node, ast.FunctionDef) and node.name in kernels:
            try:
                if not alone(node):
                    raise NotReplayable(
                        node.lineno, "another statement shares a line with this kernel"
                    )
                checker.function(node)
            except NotReplayable as exc:
                problems[node.name] = str(exc)
                continue
            first = min([d.lineno for d in node.decorator_list] + [node.lineno])
            # Decorator lines blanked; a plain jit on the line just above `def`
            # (Gluon's for a Gluon kernel: the same body is another language).
            _copy(lines, keep, node.lineno, node.end_lineno or node.lineno)
            kept.append(node)
            indent = " " * node.col_offset
            jit = "_gpulab_gluon_jit" if _is_gluon(node, checker) else "_gpulab_jit"
            if node.lineno - 1 > first - 1:
                keep[node.lineno - 2] = f"{indent}@{jit}"
            else:  # decorator on the def's own line cannot happen in Python
                raise NotReplayable(node.lineno, "a kernel's decorator must stand on its own line")
    for name in kernels:
        if name in checker.constants:  # rebound after its def: ambiguous
            problems[name] = f"`{name}` is rebound at the top level after its definition"
    text = "\n".join(keep) + "\n"
    _same_nodes(kept, text)
    return ReplaySource(
        text=text,
        kernels=tuple(sorted(kernels - set(problems))),
        modules=module_aliases,
        problems=problems,
    )


def _is_gluon(fn: ast.FunctionDef, checker: _Checker) -> bool:
    """Whether `fn` is decorated with Gluon's jit (`@gluon.jit`, or `jit`
    imported from triton.experimental.gluon)."""
    for d in fn.decorator_list:
        node = d.func if isinstance(d, ast.Call) else d
        dotted = checker.chain(node) if isinstance(node, ast.Attribute) else None
        if isinstance(node, ast.Name):
            dotted = checker.modules.get(node.id)
        if dotted == f"{GLUON}.jit":
            return True
    return False


def _same_nodes(kept: list[ast.stmt], text: str) -> None:
    """The kept text holds the nodes checked, and nothing else: what the
    replay runs is this text, not the tree the check walked, so any way
    a copied line carries more than its node (above) ends here."""

    def plain(node: ast.stmt) -> str:
        if isinstance(node, ast.FunctionDef):  # its decorators are replaced
            node = copy.copy(node)
            node.decorator_list = []
        return ast.dump(node)

    try:
        got = [plain(n) for n in ast.parse(text).body]
    except SyntaxError as exc:
        raise NotReplayable(exc.lineno or 0, "the kernels kept do not parse apart") from None
    if got != [plain(n) for n in kept]:
        raise NotReplayable(0, "the kept kernels and constants are not the file's as checked")


def _copy(lines: list[str], keep: list[str], first: int, last: int) -> None:
    for i in range(first - 1, last):
        keep[i] = lines[i]


def namespace(src: ReplaySource) -> dict[str, object]:
    """The globals the kept text runs in: the allowed modules under the
    file's aliases, a few builtins, and nothing else (no `__import__`)."""
    import builtins

    import triton

    # getattr for the version shims the check let through (_version_shim):
    # a kernel cannot name it (it is not in BUILTINS, the names it may use).
    g: dict[str, object] = {  # exec's globals: modules, builtins, triton.jit
        "__builtins__": {name: getattr(builtins, name) for name in (*BUILTINS, "getattr")},
        "__name__": "gpulab_replay",
        "_gpulab_jit": triton.jit,
    }
    if "_gpulab_gluon_jit" in src.text:
        from triton.experimental import gluon

        g["_gpulab_gluon_jit"] = gluon.jit
    for alias, module in src.modules.items():
        g[alias] = _resolve(module)
    g.setdefault("math", math)
    return g
