"""What a Triton kernel may say: every name and every attribute step, resolved.

On the CPU the judge re-runs a learner's kernels in Triton's interpreter,
which runs a kernel's body as Python (gpulab.sandbox.replay). So the text it
runs is checked here first, by abstract evaluation: each expression gets a
*kind*, whatever expression it starts from:

- a module of the allow-list (`MODULES`, by its real name, however imported);
- an object of one (a triton.language function, dtype or class, `math.sqrt`,
  `triton.cdiv`), found by `getattr` at check time and allowed by where it
  comes from, or one of triton's decorators (jit, autotune, heuristics,
  Config), which only decorate;
- a JIT function of the file, a top-level constant, a builtin of a small set;
- a runtime value (a parameter, a local, what a call returns: a tensor, a
  scalar, a tuple, a pointer, a descriptor).

An attribute of a module must be an allowed module or object; an attribute
of anything else may only be a public member of Triton's language value
classes (`runtime_attributes`), never a denied one (an interpreter tensor's
`.handle.data` is a numpy array, and numpy can write files); a module may
only be the base of an attribute step, never a value (`(tl,)[0].core` and
`L = tl; L.core.builtins` reach `exec`). Anything else is refused, with the
line and the reason in the learner's terms.
"""

from __future__ import annotations

import ast

from gpulab.sandbox.kernel_allow import (
    BUILTIN,
    BUILTINS,
    CONSTANT,
    DECORATOR,
    DENIED_ATTRIBUTES,
    JIT,
    MAY_USE,
    MODULE,
    OBJECT,
    VALUE,
    VALUE_KIND,
    Kind,
    Lookup,
    NotReplayable,
    allowed_annotation,
    member,
    runtime_attributes,
    shown,
)


class Checker:
    """Kinds of expressions, in a kernel (its locals set) or at the file's
    top level (no locals: defaults, annotations, decorators, constants)."""

    def __init__(self, lookup: Lookup) -> None:
        self.lookup = lookup
        self.locals: frozenset[str] = frozenset()
        self.used_jit: set[str] = set()  # the file's JIT functions the checked code names

    # --- names and attributes --------------------------------------------------

    def name(self, node: ast.Name) -> Kind:
        if node.id in self.locals:
            return VALUE_KIND
        binding = self.lookup(node.id)
        if binding is None:
            if node.id in BUILTINS:
                return Kind(BUILTIN, node.id)
            raise NotReplayable(
                node.lineno,
                f"the kernel uses `{node.id}`, which is not defined at the file's top "
                f"level: {MAY_USE}",
            )
        if binding.why or binding.kind is None:
            raise NotReplayable(node.lineno, f"the kernel uses `{node.id}`, {binding.why}")
        if binding.kind.tag == JIT:
            self.used_jit.add(binding.kind.name)
        return binding.kind

    def attribute(self, node: ast.Attribute) -> Kind:
        attr = node.attr
        if attr.startswith("_") or attr in DENIED_ATTRIBUTES:
            raise NotReplayable(node.lineno, f"a kernel may not use the attribute `.{attr}`")
        base = self.expr(node.value)
        if base.tag == MODULE:
            return member(base.name, attr, node.lineno, shown(node))
        if base.tag in (OBJECT, CONSTANT, VALUE):
            if attr in runtime_attributes():
                return VALUE_KIND
            raise NotReplayable(
                node.lineno,
                f"`.{attr}` (in `{shown(node)}`) is not an attribute of Triton's tensors, "
                "types or values",
            )
        raise NotReplayable(
            node.lineno, f"a kernel may not take an attribute of `{shown(node.value)}`"
        )

    # --- expressions -------------------------------------------------------------

    def value(self, node: ast.expr, role: str, jit_ok: bool = False) -> Kind:
        """The kind of `node`, used as `role` ("an argument"): a module, a
        decorator or (unless `jit_ok`) a JIT function may not be one."""
        kind = self.expr(node)
        if kind.tag not in (MODULE, DECORATOR, JIT) or (kind.tag == JIT and jit_ok):
            return kind
        text = shown(node)
        if kind.tag == MODULE:
            raise NotReplayable(
                node.lineno,
                f"`{text}` is a module: a kernel may only name what is in it "
                f"(`{text}.name`), not use it as {role}",
            )
        if kind.tag == DECORATOR:
            raise NotReplayable(
                node.lineno,
                f"`{text}` decorates a kernel at the file's top level: a kernel may "
                f"not use it as {role}",
            )
        if kind.tag == JIT and not jit_ok:
            raise NotReplayable(
                node.lineno,
                f"`{text}` is a JIT function: a kernel may call it or pass it to a "
                f"call, not use it as {role}",
            )
        return kind

    def expr(self, node: ast.expr) -> Kind:
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.Attribute):
            return self.attribute(node)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bytes):
                raise NotReplayable(node.lineno, "bytes constants are not Triton")
            return VALUE_KIND
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, (ast.Tuple, ast.List)):
            for elt in node.elts:
                self.value(elt, "an element of a tuple or list")
        elif isinstance(node, ast.Starred):
            self.value(node.value, "a starred value")
        elif isinstance(node, ast.Subscript):
            self.value(node.value, "what is subscripted")
            self.value(node.slice, "an index")
        elif isinstance(node, ast.Slice):
            for part in (node.lower, node.upper, node.step):
                if part is not None:
                    self.value(part, "a slice's bound")
        elif isinstance(node, ast.BinOp):
            self.value(node.left, "an operand")
            self.value(node.right, "an operand")
        elif isinstance(node, ast.UnaryOp):
            self.value(node.operand, "an operand")
        elif isinstance(node, (ast.BoolOp, ast.Compare)):
            parts = node.values if isinstance(node, ast.BoolOp) else [node.left, *node.comparators]
            for part in parts:
                self.value(part, "an operand")
        elif isinstance(node, ast.IfExp):
            for part in (node.test, node.body, node.orelse):
                self.value(part, "a part of `x if c else y`")
        elif isinstance(node, ast.JoinedStr):
            for part in node.values:
                self.value(part, "a part of an f-string")
        elif isinstance(node, ast.FormattedValue):
            self.value(node.value, "a part of an f-string")
            if node.format_spec is not None:
                self.value(node.format_spec, "an f-string's format")
        else:
            raise NotReplayable(
                getattr(node, "lineno", 0),
                f"{type(node).__name__} is not something a Triton kernel can contain",
            )
        return VALUE_KIND

    def call(self, node: ast.Call) -> Kind:
        func = self.expr(node.func)
        if func.tag in (MODULE, DECORATOR):
            raise NotReplayable(node.lineno, f"a kernel may not call `{shown(node.func)}`")
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                self.value(arg.value, "a starred argument")
            else:
                self.value(arg, "an argument", jit_ok=True)
        for kw in node.keywords:
            if kw.arg is None or kw.arg.startswith("_"):
                raise NotReplayable(
                    node.lineno, "a kernel may not pass `**` or `_`-named arguments"
                )
            self.value(kw.value, "an argument", jit_ok=True)
        return VALUE_KIND

    def annotation(self, node: ast.expr) -> None:
        kind = self.value(node, "an annotation")
        if kind.tag in (CONSTANT, VALUE) and not isinstance(node, ast.Constant):
            raise NotReplayable(
                node.lineno,
                f"the annotation `{shown(node)}` is not a type (tl.constexpr, tl.tensor, int...)",
            )
        # Triton writes a string annotation into code it generates (on a
        # GPU): it must be a type's name. (A constant's string is refused above.)
        if not allowed_annotation(node):
            raise NotReplayable(node.lineno, f"the annotation {shown(node)} is not a Triton type")

    # --- statements and functions -------------------------------------------------

    def function(self, fn: ast.FunctionDef) -> None:
        a = fn.args
        if a.vararg or a.kwarg or a.posonlyargs:
            raise NotReplayable(fn.lineno, "a kernel takes named parameters only")
        params = [*a.args, *a.kwonlyargs]
        # Annotations and defaults are evaluated where the def runs: the
        # file's top level, where the parameters are not names yet.
        self.locals = frozenset()
        for p in params:
            if p.annotation is not None:
                self.annotation(p.annotation)
        if fn.returns is not None:
            self.annotation(fn.returns)
        for default in [*a.defaults, *(d for d in a.kw_defaults if d is not None)]:
            self.value(default, "a parameter's default")
        # A name bound anywhere in a function is its own throughout (Python's
        # rule): never the top level's.
        stored = {
            n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        self.locals = frozenset({p.arg for p in params} | stored)
        try:
            self.body(fn.body)
        finally:
            self.locals = frozenset()

    def body(self, statements: list[ast.stmt]) -> None:
        for stmt in statements:
            self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                self.target(target)
            self.value(stmt.value, "a value assigned")
        elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
            self.target(stmt.target, names_only=True)
            if isinstance(stmt, ast.AnnAssign):
                self.annotation(stmt.annotation)
            if stmt.value is not None:
                self.value(stmt.value, "a value assigned")
        elif isinstance(stmt, (ast.For, ast.While, ast.If)):
            if isinstance(stmt, ast.For):
                self.target(stmt.target)
                self.value(stmt.iter, "what a loop runs over")
            else:
                self.value(stmt.test, "a condition")
            self.body(stmt.body)
            self.body(stmt.orelse)
        elif isinstance(stmt, ast.Return):
            if stmt.value is not None:
                self.value(stmt.value, "a return value")
        elif isinstance(stmt, ast.Expr):
            self.value(stmt.value, "a statement")
        elif isinstance(stmt, ast.Assert):
            self.value(stmt.test, "a condition")
            if stmt.msg is not None:
                self.value(stmt.msg, "an assertion's message")
        elif not isinstance(stmt, (ast.Pass, ast.Break, ast.Continue)):
            raise NotReplayable(
                stmt.lineno, f"a kernel may not contain a `{type(stmt).__name__}` statement"
            )

    def target(self, node: ast.expr, names_only: bool = False) -> None:
        if isinstance(node, ast.Name):
            return
        if isinstance(node, (ast.Tuple, ast.List)) and not names_only:
            for elt in node.elts:
                self.target(elt)
            return
        raise NotReplayable(
            node.lineno,
            f"a kernel may assign only to names (`x = ...`, `a, b = ...`), not to `{shown(node)}`",
        )
