"""The Triton kernels of a submission, as code that can run apart from it.

On the CPU the judge re-runs the kernels a submission launched
(gpulab.sandbox.replay) in a fresh process that never imports the
submission. What it runs is not the file but what this module keeps of it:
the JIT functions of its top level and its top-level constants, each
checked first (gpulab.sandbox.kernel_file says what every top-level name
is, gpulab.sandbox.kernel_check what every expression of a kernel is). The
interpreter runs a kernel's body as Python, so that check is what keeps the
replay from running anything else.

The kept text keeps the file's line numbers (a message names the learner's
own line): every other line is blank, and decorators are dropped. Below the
file's last line it makes each kept def a JIT function with the replay's
own `_gpulab_jit` (a plain triton.jit: autotune and heuristics only choose
the constexprs and launch options, and the replay takes those from the
launches recorded), and binds the names of `kernel = triton.jit(body)`.
"""

from __future__ import annotations

import ast
import copy
import re
from dataclasses import dataclass

from gpulab.sandbox.kernel_allow import (
    BUILTINS,
    CONSTANT,
    DECORATOR,
    DENIED_ATTRIBUTES,
    MODULE,
    MODULES,
    OBJECT,
    VALUE_KIND,
    Kind,
    NotReplayable,
    member,
    resolve,
    shown,
)
from gpulab.sandbox.kernel_file import TopLevel, unwrap

__all__ = ["NotReplayable", "ReplaySource", "extract", "namespace"]


@dataclass(frozen=True)
class ReplaySource:
    text: str  # the kept lines; the others blank, so line numbers match
    kernels: tuple[str, ...]  # the JIT functions kept, by their defs' names
    modules: dict[str, str]  # alias -> module (or allowed object), for the replay to bind
    problems: dict[str, str]  # JIT function -> why it cannot be replayed


def extract(source: str) -> ReplaySource:
    """What of `source` the replay may run. Raises NotReplayable for a file
    that does not parse; a kernel that fails the check is named in
    `problems` (the replay refuses a launch of it, not the whole file)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise NotReplayable(exc.lineno or 0, f"the file does not parse: {exc.msg}") from None
    except ValueError as exc:  # a NUL byte
        raise NotReplayable(0, f"the file does not parse: {exc}") from None
    # Lines as Python counts them: str.splitlines() also breaks at \x1c,
    # \x0c, \u2028 and others, which Python leaves inside a line (a
    # comment), and every line after one would be copied from a line the
    # check never looked at.
    lines = re.split(r"\r\n|\r|\n", source)
    if lines and lines[-1] == "":
        lines.pop()
    top = TopLevel(tree)
    problems: dict[str, str] = {}
    uses: dict[str, set[str]] = {}
    for name in sorted(top.jit):
        fn = top.defs[name]
        try:
            _check_kernel(top, name, fn, lines)
            uses[name] = set(top.checker.used_jit)
        except NotReplayable as exc:
            problems[name] = str(exc)
        finally:
            top.checker.used_jit.clear()
    # A kernel that calls one the replay cannot run cannot run either.
    changed = True
    while changed:
        changed = False
        for name, used in list(uses.items()):
            bad = sorted(u for u in used if u in problems)
            if bad:
                line = top.defs[name].lineno
                problems[name] = (
                    f"line {line}: `{name}` uses `{bad[0]}`, which gpulab cannot run apart from "
                    f"your file ({problems[bad[0]]})"
                )
                del uses[name]
                changed = True
    kept = _kept_constants(top) + [top.defs[name] for name in uses]
    kept.sort(key=lambda n: n.lineno)
    keep = [""] * len(lines)
    for node in kept:
        for i in range(node.lineno - 1, node.end_lineno or node.lineno):
            keep[i] = lines[i]
    tail = _tail(top, sorted(uses))
    text = "\n".join(keep) + "\n" + tail
    _same_nodes(kept, tail, text)
    return ReplaySource(
        text=text,
        kernels=tuple(sorted(uses)),
        modules=_modules(top),
        problems=problems,
    )


def _check_kernel(top: TopLevel, name: str, fn: ast.FunctionDef, lines: list[str]) -> None:
    binding = top.binding(name)
    if binding is None or binding.why:
        why = binding.why.removeprefix("which ") if binding else "is not bound"
        raise NotReplayable(fn.lineno, f"`{name}` {why}")
    if not top.alone(fn):
        raise NotReplayable(fn.lineno, "another statement shares a line with this kernel")
    # Triton's interpreter reads a kernel's source back from the file and
    # runs it from the *last* line that begins with `def `: one inside a
    # string of the kernel would make it run lines this check read as text.
    for i in range(fn.lineno, fn.end_lineno or fn.lineno):
        if lines[i].strip().startswith("def ") or re.match(r"\s*def\s", lines[i]):
            raise NotReplayable(
                i + 1,
                "a line inside the kernel begins with `def` (in a string?): Triton's "
                "interpreter would read the kernel from there",
            )
    _decorators(top, fn)
    top.checker.function(fn)


# --- the decorators: checked, then dropped -------------------------------------------


def _decorators(top: TopLevel, fn: ast.FunctionDef) -> None:
    """triton.jit once, with autotune and heuristics beside it, as
    decorators or as the calls that wrap the def (`kernel =
    triton.jit(body)`, `tuned = triton.autotune(...)(kernel)`)."""
    own = _jits(top, fn, [_decorator(d) for d in fn.decorator_list])
    wraps = top.wraps.get(fn.name, [])
    for wrap in wraps:
        found = unwrap(wrap.node) if isinstance(wrap.node, ast.expr) else None
        calls = found[1] if found else []
        if own + _jits(top, fn, [_wrapping(c) for c in calls]) != 1:
            raise NotReplayable(wrap.line, f"`{fn.name}` is made a JIT function twice")
    if not wraps and own != 1:
        raise NotReplayable(fn.lineno, f"`{fn.name}` must be made a JIT function by triton.jit")


def _decorator(d: ast.expr) -> tuple[ast.expr, list[ast.expr]]:
    """A decorator: what is called, and its arguments."""
    if isinstance(d, ast.Call):
        return d.func, [*d.args, *(k.value for k in d.keywords)]
    return d, []


def _wrapping(call: ast.Call) -> tuple[ast.expr, list[ast.expr]]:
    """One call of `kernel = triton.jit(body)`, as a decorator."""
    if not isinstance(call.func, ast.Call):  # triton.jit(body, **kw)
        return call.func, [k.value for k in call.keywords]
    inner = call.func  # triton.jit(**kw)(body), triton.autotune(...)(inner)
    extra = [k.value for k in call.keywords]
    return inner.func, [*inner.args, *(k.value for k in inner.keywords), *extra]


def _jits(top: TopLevel, fn: ast.FunctionDef, found: list[tuple[ast.expr, list[ast.expr]]]) -> int:
    """How many of `found` (decorator, its arguments) are triton.jit;
    NotReplayable where one is not triton's jit, autotune or heuristics."""
    jits = 0
    for callee, args in found:
        try:
            kind = top.top.expr(callee)
        except NotReplayable:
            kind = VALUE_KIND
        if kind.tag != DECORATOR or kind.name == "triton.Config":
            raise NotReplayable(
                getattr(callee, "lineno", fn.lineno),
                f"the decorator `{shown(callee)}` is not triton.jit, triton.autotune or "
                "triton.heuristics (on the CPU gpulab runs Triton kernels)",
            )
        jits += kind.name == "triton.jit"
        for arg in args:
            _outside(top, arg)
    return jits


def _outside(top: TopLevel, node: ast.expr) -> None:
    """A decorator's argument. The replay never runs it (the decorator is
    replaced by a plain triton.jit), so it may name the file's Python
    (configs, a prune function, lambdas); but no attribute step in it may
    leave what is allowed, and a module is only ever a base."""
    bases = {id(n.value) for n in ast.walk(node) if isinstance(n, ast.Attribute)}
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and (
            sub.attr.startswith("_") or sub.attr in DENIED_ATTRIBUTES
        ):
            raise NotReplayable(sub.lineno, f"a decorator's argument may not use `.{sub.attr}`")
        if isinstance(sub, (ast.Name, ast.Attribute)) and id(sub) not in bases:
            if _loose(top, sub).tag == MODULE:
                raise NotReplayable(
                    sub.lineno,
                    f"`{shown(sub)}` is a module: a decorator's argument may only name what "
                    "is in it",
                )


def _loose(top: TopLevel, node: ast.expr) -> Kind:
    """The kind of a name or an attribute chain in a decorator's argument:
    a module's attributes resolved and checked, anything else a value."""
    if isinstance(node, ast.Name):
        b = top.binding(node.id)
        return b.kind if b is not None and b.kind is not None else VALUE_KIND
    if isinstance(node, ast.Attribute) and isinstance(node.value, (ast.Name, ast.Attribute)):
        base = _loose(top, node.value)
        if base.tag == MODULE:
            return member(base.name, node.attr, node.lineno, shown(node))
    return VALUE_KIND


def _kept_constants(top: TopLevel) -> list[ast.stmt]:
    """The statements binding the file's constants: each kept whole, so
    only where every name it binds is a constant a kernel may use."""
    stmts: dict[int, ast.stmt] = {}
    names: dict[int, list[str]] = {}
    for name, raws in top.raw.items():
        for r in raws:
            if r.sort == "assign" and r.stmt is not None:
                stmts[id(r.stmt)] = r.stmt
                names.setdefault(id(r.stmt), []).append(name)
    out = []
    for key, stmt in stmts.items():
        bindings = [top.binding(n) for n in names[key]]
        if all(
            b is not None and not b.why and b.kind is not None and b.kind.tag in (CONSTANT, OBJECT)
            for b in bindings
        ):
            out.append(stmt)
    return out


def _tail(top: TopLevel, kernels: list[str]) -> str:
    """Below the file's lines: the kept defs made JIT functions, and the
    other names `kernel = triton.jit(body)` binds."""
    out = [f"{name} = _gpulab_jit({name})\n" for name in kernels]
    for alias, raws in sorted(top.raw.items()):
        binding = top.binding(alias)
        if binding is None or binding.why or binding.kind is None:
            continue
        if any(r.sort == "wrap" for r in raws) and binding.kind.name in kernels:
            if alias != binding.kind.name:
                out.append(f"{alias} = {binding.kind.name}\n")
    return "".join(out)


def _modules(top: TopLevel) -> dict[str, str]:
    """alias -> module or object, for each name an allowed import binds."""
    out = {}
    for name in top.raw:
        raws = top.distinct(name)
        binding = top.binding(name)
        if len(raws) != 1 or raws[0].sort != "import" or binding is None or binding.why:
            continue
        if binding.kind is not None and binding.kind.tag in (MODULE, OBJECT):
            out[name] = binding.kind.name
    return out


def _same_nodes(kept: list[ast.stmt], tail: str, text: str) -> None:
    """The kept text holds the nodes checked, and nothing else: what the
    replay runs is this text, not the tree the check walked, so any way
    a copied line carries more than its node (above) ends here."""

    def plain(node: ast.stmt) -> str:
        if isinstance(node, ast.FunctionDef):  # its decorators are dropped
            node = copy.copy(node)
            node.decorator_list = []
        return ast.dump(node)

    try:
        got = [plain(n) for n in ast.parse(text).body]
    except SyntaxError as exc:
        raise NotReplayable(exc.lineno or 0, "the kernels kept do not parse apart") from None
    want = [plain(n) for n in kept] + [ast.dump(n) for n in ast.parse(tail).body]
    if got != want:
        raise NotReplayable(0, "the kept kernels and constants are not the file's as checked")


def namespace(src: ReplaySource) -> dict[str, object]:
    """The globals the kept text runs in: the allowed modules and objects
    under the file's names, a few builtins, and nothing else (no
    `__import__`)."""
    import builtins
    import importlib

    import triton

    # Every allowed module imported, so that `tl.extra.libdevice` is there
    # as it was in the learner's process, which imported it.
    for module in sorted(MODULES):
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001, S110 - a Triton without it: a kernel naming it fails alone
            pass
    g: dict[str, object] = {
        "__builtins__": {name: getattr(builtins, name) for name in BUILTINS},
        "__name__": "gpulab_replay",
        "_gpulab_jit": triton.jit,
    }
    for alias, dotted in src.modules.items():
        g[alias] = resolve(dotted)
    return g
