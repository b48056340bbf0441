"""What each top-level name of a learner's file is, for the kernels' check.

gpulab.sandbox.kernel_check gives every expression of a kernel a kind; this
gives the file's top-level names theirs (a Binding), all bindings collected
first, so the order of definitions does not matter:

- an import of an allowed module (under any alias, inside a top-level `try`
  too) or of an allowed object (`from triton.language import load`);
- a JIT function: a def decorated with triton.jit (autotune and heuristics
  beside it), or made one by a call (`kernel = triton.jit(body)`);
- a constant: literals, tuples of them, `tl.constexpr(...)`, arithmetic over
  them and the file's other constants, a few pure calls (`math.log(2)`,
  `triton.next_power_of_2(96)`, `int(...)`), an allowed object (`tl.float16`);
- anything else (torch, a Python function, `DEVICE = torch.device(...)`, a
  module bound by assignment, a name bound twice): not kept, and a kernel
  that uses it is refused with what the name is.
"""

from __future__ import annotations

import ast
from collections import Counter, defaultdict
from dataclasses import dataclass

from gpulab.sandbox.kernel_allow import (
    BUILTIN,
    CONSTANT,
    CONSTANT_BUILTINS,
    CONSTANT_KIND,
    JIT,
    MODULE,
    MODULES,
    NOT_CONSTANT,
    OBJECT,
    Binding,
    Kind,
    NotReplayable,
    member,
    pure,
    shown,
)
from gpulab.sandbox.kernel_check import Checker

WRAPPERS = ("jit", "autotune", "heuristics")  # what makes a def a JIT function
# How a statement the check does not keep binds a name, for a message.
HOW = {
    "ClassDef": "as a class",
    "AsyncFunctionDef": "as an async function",
    "AugAssign": "again (`X += ...`)",
    "Delete": "by deleting it",
    "If": "inside an `if` block",
    "For": "in a `for` loop",
    "While": "in a `while` loop",
    "With": "in a `with` block",
    "Expr": "with `:=`",
}


@dataclass(frozen=True)
class Raw:
    """One top-level binding of a name, as the file says it."""

    line: int
    sort: str  # "import", "def", "assign", "wrap" (X = triton.jit(def)), "other"
    target: str = ""  # import: the allowed module or object ("" if none); wrap: the def
    why: str = ""  # import: where from; other: how it binds
    node: ast.AST | None = None  # def: the FunctionDef; assign: the value; wrap: the call
    stmt: ast.stmt | None = None


def _last_name(node: ast.expr) -> str:
    node = node.func if isinstance(node, ast.Call) else node
    return (
        node.attr
        if isinstance(node, ast.Attribute)
        else node.id
        if isinstance(node, ast.Name)
        else ""
    )


def unwrap(value: ast.expr) -> tuple[str, list[ast.Call]] | None:
    """`triton.jit(body)`, `triton.jit(**kw)(body)`, `triton.autotune(...)(triton.jit(body))`:
    the def's name and the calls, outermost first; else None."""
    calls: list[ast.Call] = []
    node = value
    while (
        isinstance(node, ast.Call)
        and len(node.args) == 1
        and not isinstance(node.args[0], ast.Starred)
        and _last_name(node.func) in WRAPPERS
    ):
        calls.append(node)
        node = node.args[0]
    return (node.id, calls) if calls and isinstance(node, ast.Name) else None


def _imported(stmt: ast.Import | ast.ImportFrom) -> list[Raw]:
    out = []
    if isinstance(stmt, ast.Import):
        for a in stmt.names:
            # `import triton.language` binds `triton`.
            name = a.asname or a.name.split(".")[0]
            target = a.name if a.asname else name
            out.append(Raw(stmt.lineno, "import", target if target in MODULES else "", a.name))
        return out
    module = stmt.module or ""
    for a in stmt.names:
        if a.name == "*":
            continue  # binds names no one can list: a kernel's use of one is refused
        full = f"{module}.{a.name}"
        allowed = stmt.level == 0 and (full in MODULES or module in MODULES)
        out.append(Raw(stmt.lineno, "import", full if allowed else "", module or "."))
    return out


def _bound(node: ast.AST) -> list[tuple[str, int]]:
    """The names a statement binds in the scope it stands in (not inside
    the functions, classes, lambdas and comprehensions it holds)."""
    out: list[tuple[str, int]] = []
    line = getattr(node, "lineno", 0)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [(node.name, line)]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [((a.asname or a.name).split(".")[0], line) for a in node.names if a.name != "*"]
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return [(node.id, line)]
    if isinstance(node, ast.ExceptHandler) and node.name:
        out.append((node.name, line))
    if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        out.append((node.name, line))
    if isinstance(node, ast.MatchMapping) and node.rest:
        out.append((node.rest, line))
    if isinstance(node, ast.Lambda):
        return out
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        # Only `:=` binds out of a comprehension.
        named = [n.target for n in ast.walk(node) if isinstance(n, ast.NamedExpr)]
        return out + [(t.id, line) for t in named if isinstance(t, ast.Name)]
    for child in ast.iter_child_nodes(node):
        out += _bound(child)
    return out


def collect(tree: ast.Module) -> dict[str, list[Raw]]:
    """Every top-level binding of every name, in the file's order."""
    raw: dict[str, list[Raw]] = defaultdict(list)

    def other(stmt: ast.AST, how: str) -> None:
        for name, line in _bound(stmt):
            raw[name].append(Raw(line, "other", why=f"line {line} binds it {how}"))

    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for r, (name, _) in zip(_imported(stmt), _bound(stmt), strict=True):
                raw[name].append(r)
        elif isinstance(stmt, ast.FunctionDef):
            raw[stmt.name].append(Raw(stmt.lineno, "def", node=stmt, stmt=stmt))
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is None:
            continue  # `X: int` binds nothing
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            _assignment(stmt, stmt.value, raw)
        elif isinstance(stmt, ast.Try):
            # Triton is there wherever kernels run: the handler of a failed
            # import (`tl = None`) never runs there, nor binds what it imported.
            imported = set()
            for inner in stmt.body:
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    for r, (name, _) in zip(_imported(inner), _bound(inner), strict=True):
                        raw[name].append(r)
                        imported.add(name)
                else:
                    other(inner, "inside a `try` block")
            for handler in stmt.handlers:
                for name, line in _bound(handler):
                    if name not in imported:
                        raw[name].append(
                            Raw(line, "other", why=f"line {line} binds it in `except`")
                        )
            for inner in [*stmt.orelse, *stmt.finalbody]:
                other(inner, "inside a `try` block")
        else:
            other(stmt, HOW.get(type(stmt).__name__, f"in a `{type(stmt).__name__}` statement"))
    # A function that rebinds a top-level name makes it two things.
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            for name in node.names:
                raw[name].append(Raw(node.lineno, "other", why=f"line {node.lineno} rebinds it"))
    return raw


def _assignment(
    stmt: ast.Assign | ast.AnnAssign, value: ast.expr, raw: dict[str, list[Raw]]
) -> None:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    target = targets[0] if len(targets) == 1 else None
    if isinstance(target, ast.Name):
        wrapped = unwrap(value)
        if wrapped is not None:
            raw[target.id].append(Raw(stmt.lineno, "wrap", wrapped[0], node=value, stmt=stmt))
        else:
            raw[target.id].append(Raw(stmt.lineno, "assign", node=value, stmt=stmt))
        return
    if (  # NAME_A, NAME_B = 64, 32
        isinstance(target, ast.Tuple)
        and isinstance(value, ast.Tuple)
        and len(target.elts) == len(value.elts)
        and all(isinstance(t, ast.Name) for t in target.elts)
        and not any(isinstance(v, ast.Starred) for v in value.elts)
    ):
        for t, v in zip(target.elts, value.elts, strict=True):
            raw[getattr(t, "id", "")].append(Raw(stmt.lineno, "assign", node=v, stmt=stmt))
        return
    for name, line in _bound(stmt):
        why = f"line {line} binds it in an assignment gpulab does not keep"
        raw[name].append(Raw(line, "other", why=why))


class TopLevel:
    """The file's top-level names, each resolved once, on demand."""

    def __init__(self, tree: ast.Module) -> None:
        self.raw = collect(tree)
        self._memo: dict[str, Binding | None] = {}
        self._busy: set[str] = set()
        # Lines that hold more than one top-level statement (`C = 1; evil()`):
        # a kept node's lines are copied whole, so nothing may share them.
        self._owners = Counter(
            line for n in tree.body for line in range(n.lineno, (n.end_lineno or n.lineno) + 1)
        )
        self.checker = Checker(self.binding)  # the kernels'
        # What the top level evaluates (constants, decorators), in the
        # middle of a kernel's check too: a checker of its own, no locals,
        # no JIT functions counted as the kernel's.
        self.top = Checker(self.binding)
        self.wraps: dict[str, list[Raw]] = defaultdict(list)  # def -> the calls wrapping it
        for rs in self.raw.values():
            for r in rs:
                if r.sort == "wrap":
                    self.wraps[r.target].append(r)
        self.defs = {
            r.node.name: r.node
            for rs in self.raw.values()
            for r in rs
            if r.sort == "def" and isinstance(r.node, ast.FunctionDef)
        }
        # The defs meant as JIT functions (their check says whether they are).
        self.jit = {
            name
            for name, fn in self.defs.items()
            if name in self.wraps or any(_last_name(d) in WRAPPERS for d in fn.decorator_list)
        }

    def alone(self, node: ast.stmt) -> bool:
        last = node.end_lineno or node.lineno
        return all(self._owners[i] == 1 for i in range(node.lineno, last + 1))

    def distinct(self, name: str) -> list[Raw]:
        """`name`'s bindings, less those that say the same again (`import
        triton` twice; `f = triton.jit(f)` after `def f`)."""
        out: list[Raw] = []
        for r in self.raw.get(name, []):
            if r.sort == "import" and r.target and any(d.target == r.target for d in out):
                continue
            if r.sort == "wrap" and r.target == name:
                continue  # the def's own binding says it
            out.append(r)
        return out

    def binding(self, name: str) -> Binding | None:
        if name in self._memo:
            return self._memo[name]
        raws = self.distinct(name)
        if not raws:
            return None
        if name in self._busy:
            return Binding(raws[0].line, None, "which is defined in terms of itself")
        self._busy.add(name)
        try:
            found = self._resolve(name, raws)
        finally:
            self._busy.discard(name)
        self._memo[name] = found
        return found

    def _resolve(self, name: str, raws: list[Raw]) -> Binding:
        r = raws[0]
        if len(raws) > 1:
            lines = ", ".join(str(x.line) for x in raws)
            return Binding(
                r.line,
                None,
                f"which is bound more than once at the file's top level (lines {lines})",
            )
        if name.startswith(("__", "_gpulab")):
            return Binding(r.line, None, "which is a name of Python's or of gpulab's replay")
        if r.sort == "import":
            if not r.target:
                return Binding(
                    r.line, None, f"{NOT_CONSTANT} (line {r.line} imports it from `{r.why}`)"
                )
            if r.target in MODULES:
                return Binding(r.line, Kind(MODULE, r.target))
            module, attr = r.target.rsplit(".", 1)
            try:
                return Binding(r.line, member(module, attr, r.line, r.target))
            except NotReplayable as exc:
                return Binding(r.line, None, f"{NOT_CONSTANT} (line {r.line}: {exc.why})")
        if r.sort == "def":
            if name in self.jit:
                return Binding(r.line, Kind(JIT, name))
            return Binding(
                r.line, None, f"a Python function (line {r.line}), not a @triton.jit function"
            )
        if r.sort == "wrap":
            if r.target in self.jit:
                return Binding(r.line, Kind(JIT, r.target))
            return Binding(
                r.line,
                None,
                f"{NOT_CONSTANT} (line {r.line}: `{r.target}` is not a def of the file's top level)",
            )
        if r.sort == "assign" and isinstance(r.node, ast.expr) and r.stmt is not None:
            return self._constant(name, r.node, r.stmt)
        return Binding(r.line, None, f"{NOT_CONSTANT} ({r.why})")

    def _constant(self, name: str, value: ast.expr, stmt: ast.stmt) -> Binding:
        line = stmt.lineno
        if not self.alone(stmt):
            return Binding(
                line, None, f"{NOT_CONSTANT} (line {line} shares its line with another statement)"
            )
        text = shown(value)
        try:
            if isinstance(stmt, ast.AnnAssign):
                self.top.annotation(stmt.annotation)
            kind = self.constant(value)
        except NotReplayable:
            return Binding(line, None, f"{NOT_CONSTANT} (line {line} binds it to `{text}`)")
        # `A, B = 1, DEVICE` is kept whole or not at all.
        if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Tuple):
            for other in stmt.targets[0].elts:
                other_name = getattr(other, "id", "")
                if other_name != name and not self._constant_sibling(other_name):
                    why = f"line {line} binds it with `{other_name}`, which is not a constant"
                    return Binding(line, None, f"{NOT_CONSTANT} ({why})")
        if kind.tag == MODULE:
            return Binding(
                line,
                kind,
                f"a module bound by assignment at line {line}: bind a module with `import` "
                f"(`import {kind.name} as {name}`), not `{name} = {text}`",
            )
        return Binding(line, kind)

    def _constant_sibling(self, name: str) -> bool:
        """Whether `name`, bound beside another by one unpacking, is a
        constant (evaluated here, not through its binding, which asks the
        same of the first)."""
        raws = self.distinct(name)
        if len(raws) != 1 or raws[0].sort != "assign" or not isinstance(raws[0].node, ast.expr):
            return False
        if name.startswith(("__", "_gpulab")):
            return False
        try:
            return self.constant(raws[0].node).tag in (CONSTANT, OBJECT)
        except NotReplayable:
            return False

    def constant(self, node: ast.expr) -> Kind:
        """The kind of a top-level constant's value: CONSTANT, OBJECT (an
        allowed object, `tl.float16`) or MODULE (refused where used);
        NotReplayable for anything else."""
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bytes):
                raise NotReplayable(line, "bytes")
            return CONSTANT_KIND
        if isinstance(node, (ast.Name, ast.Attribute)):
            kind = self.top.expr(node)
            if kind.tag in (CONSTANT, OBJECT, MODULE):
                return kind
            raise NotReplayable(line, "not a constant")
        if isinstance(node, ast.Call):
            func = self.top.expr(node.func)
            allowed = func.tag == OBJECT and pure(func.name)
            allowed |= func.tag == BUILTIN and func.name in CONSTANT_BUILTINS
            if node.keywords or not allowed:
                raise NotReplayable(line, "not a call a constant may make")
            parts: list[ast.expr] = list(node.args)
        elif isinstance(node, ast.Tuple):
            parts = list(node.elts)
        elif isinstance(node, ast.BinOp):
            parts = [node.left, node.right]
        elif isinstance(node, ast.UnaryOp):
            parts = [node.operand]
        elif isinstance(node, ast.BoolOp):
            parts = list(node.values)
        elif isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
        elif isinstance(node, ast.IfExp):
            parts = [node.test, node.body, node.orelse]
        elif isinstance(node, ast.Subscript):
            parts = [node.value, node.slice]
        else:
            raise NotReplayable(line, "not a constant expression")
        for part in parts:
            if self.constant(part).tag == MODULE:
                raise NotReplayable(line, "a module as a value")
        return CONSTANT_KIND
