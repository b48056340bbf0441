"""What a Triton kernel may name: the allow-lists and the kinds of values.

gpulab.sandbox.kernel_check evaluates a kernel's expressions to kinds (a
module, an allowed object, a JIT function, a constant, a builtin, a runtime
value); this module says which modules and objects are allowed (found by
`getattr` at check time, by where they come from), which attributes a
runtime value may have (the public members of Triton's language value
classes, computed from them, less DENIED_ATTRIBUTES), and what a top-level
binding is (Binding).
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# The modules a kernel or a constant may name, and reach through attributes.
# fmt: off
MODULES = frozenset({
    "triton", "triton.language", "triton.language.math", "triton.language.standard",
    "triton.language.random", "triton.language.extra", "triton.language.extra.cuda",
    "triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice", "math",
})
# fmt: on
# What `triton.X` may be, besides triton.language: two helpers a kernel may
# call, and the decorators, which only decorate (at the file's top level).
TRITON_HELPERS = frozenset({"cdiv", "next_power_of_2"})
TRITON_DECORATORS = frozenset({"jit", "autotune", "heuristics", "Config"})
BUILTINS = ("range", "min", "max", "int", "float", "bool", "abs", "len", "tuple", "print")
# The builtins a top-level constant may call (pure functions of numbers).
CONSTANT_BUILTINS = frozenset({"int", "float", "bool", "min", "max", "abs"})
# Attributes a kernel may not touch on its values, whatever they are, even
# where a language class has one of that name: the interpreter's tensors
# hold numpy arrays (`.handle.data`), a descriptor its torch tensor
# (`.base`), a jit function the Python function it wraps (`.fn`, `.src`).
# fmt: off
DENIED_ATTRIBUTES = frozenset({
    "handle", "data", "base", "ctypes", "tofile", "dump", "dumps", "fn", "src", "run",
    "rewriter", "rewritten_fn", "cache", "kwargs", "format", "format_map", "mro",
    "gi_frame", "gi_code", "cr_frame", "ag_frame", "tb_frame", "tb_next",
    "f_back", "f_globals", "f_locals", "f_builtins", "f_code",
})
# fmt: on
# The kinds an expression can have.
MODULE, OBJECT, DECORATOR, JIT = "module", "object", "decorator", "jit"
CONSTANT, BUILTIN, VALUE = "constant", "builtin", "value"
MAY_USE = (
    "a kernel may use its parameters and locals, the numbers, strings and "
    "tl.constexpr(...) constants of the file's top level, its JIT functions, "
    "triton.language and math"
)
NOT_CONSTANT = (
    "which is not a number, a string or tl.constexpr(...) at the file's top level, "
    "a JIT function, triton.language or math"
)


class NotReplayable(Exception):
    """The file's kernels cannot be run apart from it (says where and why)."""

    def __init__(self, line: int, why: str) -> None:
        super().__init__(f"line {line}: {why}")
        self.line = line
        self.why = why


@dataclass(frozen=True)
class Kind:
    tag: str  # MODULE, OBJECT, ... above
    name: str = ""  # a module's or object's dotted name; a JIT function's def


VALUE_KIND = Kind(VALUE)
CONSTANT_KIND = Kind(CONSTANT)


@dataclass(frozen=True)
class Binding:
    """What a top-level name is. `why` (the rest of "the kernel uses `X`,
    ...") where a kernel may not use it; `kind` may still say what it is
    (a module bound by assignment), for the decorators' looser check."""

    line: int
    kind: Kind | None
    why: str = ""


Lookup = Callable[[str], Binding | None]


def shown(node: ast.AST) -> str:
    """An expression as the learner wrote it, for a message."""
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."


def load_module(name: str) -> Any:
    return importlib.import_module(name)


def resolve(dotted: str) -> Any:
    """The object `dotted` names: the longest allowed module, then getattr."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        name = ".".join(parts[:i])
        if name in MODULES:
            obj = load_module(name)
            for attr in parts[i:]:
                obj = getattr(obj, attr)
            return obj
    raise ImportError(dotted)


def member(module: str, attr: str, line: int, text: str) -> Kind:
    """The kind of `<module>.<attr>`, or NotReplayable where a kernel may not
    reach it. `text`: the expression as the learner wrote it."""
    dotted = f"{module}.{attr}"
    if dotted in MODULES:
        return Kind(MODULE, dotted)
    try:
        obj = getattr(load_module(module), attr)
    except (AttributeError, ImportError):
        raise NotReplayable(line, f"`{text}` does not exist") from None
    if inspect.ismodule(obj):
        raise NotReplayable(
            line,
            f"`{text}` is a module a kernel may not use (it does not exist in "
            "triton.language or math)",
        )
    tag = _classify(obj, module, attr)
    if tag is None:
        raise NotReplayable(line, f"`{text}` is not part of triton.language or math")
    return Kind(tag, dotted)


def _classify(obj: Any, module: str, attr: str) -> str | None:
    if module == "triton":
        return (
            OBJECT if attr in TRITON_HELPERS else DECORATOR if attr in TRITON_DECORATORS else None
        )
    if isinstance(obj, (int, float, bool, str)) or obj is None:
        return OBJECT
    if module.startswith("triton.language") and attr == "PropagateNan":  # an enum of Triton's C++
        return OBJECT
    import triton.language as tl

    if isinstance(obj, (tl.dtype, tl.constexpr)):
        return OBJECT
    # triton.language's own jit functions (tl.max, tl.sum) wrap a function
    # of that package; under the interpreter the wrapper's class is the
    # interpreter's, so the wrapped function says where it is from.
    inner = getattr(obj, "fn", None)
    where = getattr(inner if callable(inner) else obj, "__module__", None) or ""
    return OBJECT if where == "math" or where.startswith("triton.language") else None


@functools.cache
def runtime_attributes() -> frozenset[str]:
    """The attributes a kernel may take of a value that is not a module: the
    public members of Triton's language value classes (tensors, types,
    pointers, blocks, descriptors, tuples, constexprs, slices, ranges), the
    ones set on instances included, less the denied."""
    import triton.language as tl

    classes: tuple[str, ...] = ("tensor", "dtype", "pointer_type", "block_type", "constexpr")
    classes += ("tensor_descriptor", "tuple", "tuple_type", "slice", "range", "static_range")
    classes += ("PropagateNan",)
    samples: list[Any] = [getattr(tl, c) for c in classes if hasattr(tl, c)]
    samples += [tuple, slice, range]
    makers: list[Callable[[], Any]] = [
        lambda: tl.float32,
        lambda: tl.pointer_type(tl.float32),
        lambda: tl.block_type(tl.float32, [1]),
        lambda: tl.tensor(None, tl.block_type(tl.float32, [1])),
        lambda: tl.tensor_descriptor(None, [], [], tl.block_type(tl.float32, [1])),
        lambda: tl.constexpr(1),
        lambda: tl.tuple([1]),
        lambda: tl.range(1),
        lambda: slice(1),
        lambda: range(1),
    ]
    names: set[str] = set()
    for sample in samples:
        names |= set(dir(sample))
    for make in makers:
        try:
            made = make()
        except Exception:  # noqa: BLE001, S112 - a class this Triton makes otherwise
            continue
        names |= set(dir(made)) | set(getattr(made, "__dict__", {}))
    return frozenset(n for n in names if not n.startswith("_") and n not in DENIED_ATTRIBUTES)


def allowed_type(text: str) -> bool:
    """A type's name as Triton reads an annotation ("tl.constexpr", "*fp32",
    "const *fp16"): Triton writes it into source it generates (on a GPU),
    so nothing more."""
    return re.fullmatch(r"\s*(const\s+)?\*?[A-Za-z_][A-Za-z0-9_.]*\*?\s*", text) is not None


def allowed_annotation(node: ast.expr) -> bool:
    """Whether a string annotation is a type's name (allowed_type)."""
    if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
        return True
    return allowed_type(node.value)


def pure(dotted: str) -> bool:
    """Whether a top-level constant may call the object `dotted` names."""
    import triton
    import triton.language as tl

    obj = resolve(dotted)
    if dotted.startswith("math."):
        return callable(obj)
    return obj is tl.constexpr or obj is triton.cdiv or obj is triton.next_power_of_2
