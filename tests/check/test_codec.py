"""gpulab.wire.codec: a frame declared once, read strictly as a request and
tolerantly as a reply (issue 45)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pytest

from gpulab.wire.codec import (
    ABSENT,
    PROTOCOL,
    Frame,
    Tolerant,
    Unfit,
    check_version,
    decode,
    encode,
    keys,
    plain,
    wire,
)
from gpulab.wire.protocol import ProtocolError, TensorRef


@dataclass(frozen=True, slots=True)
class Row(Tolerant):
    name: str
    calls: int = 0


@dataclass(frozen=True, slots=True)
class Reply(Tolerant):
    TYPE = "reply"
    words: tuple[str, ...] = wire((), limit=5)
    count: int = 0
    ms: float | None = None
    rows: tuple[Row, ...] = ()
    first: Row | None = None
    value: Any = wire(None, read=plain)
    note: str = wire("", key="why", omit=True)


@dataclass(frozen=True, slots=True)
class Ask(Frame):
    TYPE = "ask"
    function: str
    outs: tuple[TensorRef, ...] = ()
    source: str | None = wire(None, omit=True)
    shape: tuple[int, int, int] | None = None


REF = TensorRef(0, 0, 16, "float32", (4,), (1,))


def test_a_reply_reads_its_wrong_types_as_absent():
    r = decode(
        Reply,
        {
            "type": "reply",
            "words": ["abcdefgh", 3, True, "ok"],
            "count": True,
            "ms": float("nan"),
            "rows": [{"name": "a", "calls": "x"}, 5, {"calls": 2}, {"name": "b", "calls": 3}],
            "first": "row",
            "value": [10**400, {"n": -(10**400)}],
            "extra": 1,
        },
    )
    assert r.words == ("abcde", "ok")
    assert r.count == 0 and r.ms is None and r.first is None
    assert r.rows == (Row("a", 0), Row("b", 3))  # a row without its name is left out
    assert r.value == [math.inf, {"n": -math.inf}]
    assert decode(Reply, "not an object") == Reply()


def test_a_frame_round_trips_with_its_keys():
    r = Reply(words=("a",), count=2, ms=1.5, rows=(Row("k", 1),), note="n")
    msg = encode(r)
    assert msg["type"] == "reply" and msg["why"] == "n" and "note" not in msg
    assert msg["rows"] == [{"name": "k", "calls": 1}]
    assert decode(Reply, msg) == r
    assert "why" not in encode(Reply())  # omitted at its default
    ask = Ask("f", (REF,), shape=(1, 2, 3))
    assert decode(Ask, encode(ask)) == ask
    assert encode(ask)["outs"] == [REF.to_json()] and "source" not in encode(ask)


@pytest.mark.parametrize(
    ("msg", "words"),
    [
        ({"type": "ask"}, "without its `function`"),
        ({"type": "ask", "function": 3}, "`function` is int"),
        ({"type": "ask", "function": "f", "source": 3}, "`source` is int"),
        ({"type": "ask", "function": "f", "outs": "x"}, "`outs` is str"),
        ({"type": "ask", "function": "f", "outs": [{"x": 1}]}, "tensor reference"),
        ({"type": "ask", "function": "f", "shape": [1, 2]}, "`shape` is list"),
        ({"type": "ask", "function": "f", "shape": [1, True, 3]}, "`shape` is bool"),
    ],
)
def test_a_request_refuses_a_wrong_field_by_name(msg, words):
    with pytest.raises(ProtocolError, match=words.replace("`", ".")):
        decode(Ask, msg)


def test_a_frame_may_refuse_extra_keys():
    @dataclass(frozen=True, slots=True)
    class Closed(Frame):
        TYPE = "closed"
        EXTRA = False
        a: int = 0

    assert decode(Closed, {"a": 1}) == Closed(1)
    with pytest.raises(ProtocolError, match="unknown fields: b"):
        decode(Closed, {"a": 1, "b": 2})


def test_another_protocol_version_is_refused_naming_both():
    check_version(PROTOCOL, "the sandbox")
    for got, said in ((None, "no version"), (PROTOCOL + 1, f"version {PROTOCOL + 1}")):
        with pytest.raises(ProtocolError, match=f"the sandbox speaks {said}.*version {PROTOCOL}"):
            check_version(got, "the sandbox")


def test_the_first_frame_each_way_carries_the_version():
    from gpulab.wire.sandbox_start import Policy, Ready, SandboxConfig

    config = SandboxConfig("cpu", "/w/f.py", Policy())
    assert config.to_json()["protocol"] == PROTOCOL == Ready().to_json()["protocol"]
    assert SandboxConfig.parse(config.to_json()) == config
    older = {k: v for k, v in config.to_json().items() if k != "protocol"}
    with pytest.raises(ProtocolError, match="the judge speaks no version"):
        check_version(SandboxConfig.parse(older).protocol, "the judge")
    with pytest.raises(ProtocolError, match=f"the sandbox speaks version {PROTOCOL + 1}"):
        check_version(
            Ready.parse({"type": "ready", "protocol": PROTOCOL + 1}).protocol, "the sandbox"
        )


def test_a_request_s_strings_travel_whole_and_a_reply_s_are_cut():
    long = "A" * 50_000  # a file's source, base64: longer than any reply's string
    assert decode(Ask, {"type": "ask", "function": long}).function == long
    assert decode(Row, {"name": long}).name == long[:20000]


@dataclass(frozen=True, slots=True)
class Point:
    """A part that writes its own JSON (a list), read by its own reader."""

    x: int
    y: int

    def to_json(self) -> list[int]:
        return [self.x, self.y]


def _point(value: Any) -> Point | None:
    return Point(*value) if isinstance(value, list) and len(value) == 2 else None


def _only_with_grid(frame: Any) -> bool:
    return not frame.grid


def _count(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise Unfit("is not a count")
    return value


@dataclass(frozen=True, slots=True)
class Inner(Frame):
    launches: int = wire(0, read=lambda v: 0 if v is None else _count(v))


@dataclass(frozen=True, slots=True)
class Outer(Frame):
    TYPE = "outer"
    grid: tuple[int, ...] = wire((), omit=True)
    at: Point | None = wire(None, read=_point, omit=_only_with_grid)
    # Whether `at` was sent at all: read from its key, never written (`at` says it).
    sent: bool = wire(
        False, key="at", read=lambda v: v is not ABSENT, absent=ABSENT, omit=lambda f: True
    )
    inner: Inner = wire(factory=Inner, read=lambda v: decode(Inner, v or {}))


def test_a_field_may_go_with_another_write_its_own_json_and_see_its_absence():
    with_grid = Outer(grid=(2,), at=Point(1, 2), sent=True)
    msg = encode(with_grid)
    assert msg["at"] == [1, 2] and msg["grid"] == [2]
    assert decode(Outer, msg) == with_grid
    assert "at" not in encode(Outer(at=Point(1, 2)))  # no grid: not sent
    assert decode(Outer, {"type": "outer"}).sent is False
    assert decode(Outer, {"type": "outer", "at": None}).sent is True  # sent, as null


def test_an_unfit_field_is_named_by_its_path():
    with pytest.raises(Unfit) as info:
        decode(Outer, {"type": "outer", "inner": {"launches": -1}})
    assert info.value.field == "inner.launches" and info.value.problem == "is not a count"


def _positive(value: Any) -> Any:
    return value if isinstance(value, int) and value > 0 else ABSENT


@dataclass(frozen=True, slots=True)
class Sized(Tolerant):
    size: int = wire(read=_positive)  # a row without a positive size is left out


@dataclass(frozen=True, slots=True)
class Sizes(Tolerant):
    TYPE = "sizes"
    rows: tuple[Sized, ...] = ()
    first: int = wire(7, read=_positive)


def test_a_fields_own_reader_may_read_a_value_as_absent():
    got = decode(Sizes, {"rows": [{"size": 2}, {"size": -1}, {}], "first": 0})
    assert got == Sizes((Sized(2),), 7)  # the row left out, the field its default


class Part:
    """A part that writes its own JSON (as the launch record's views)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def to_json(self) -> list[int]:
        return [self.n]


def _parts(value: Any) -> tuple[Part, ...]:
    return tuple(Part(v[0]) for v in value)


@dataclass(frozen=True, slots=True)
class Holds(Frame):
    TYPE = "holds"
    parts: tuple[Part, ...] = wire(read=_parts)


def test_a_part_that_writes_its_own_json_is_written_by_it():
    msg = encode(Holds((Part(1), Part(2))))
    assert msg == {"type": "holds", "parts": [[1], [2]]}
    assert [p.n for p in decode(Holds, msg).parts] == [1, 2]


def test_a_requests_number_past_a_floats_range_is_refused_not_an_overflow():
    @dataclass(frozen=True, slots=True)
    class Rate(Frame):
        TYPE = "rate"
        hz: float

    assert decode(Rate, {"hz": 3}).hz == 3.0
    with pytest.raises(ProtocolError, match="`hz` is int"):
        decode(Rate, {"hz": 10**400})


def _level(value: Any, fallback: Any) -> str:
    return value if isinstance(value, str) else "high" if fallback is True else "low"


@dataclass(frozen=True, slots=True)
class Open(Tolerant):
    """A frame that keeps what it does not read: the keys no field reads
    (`extra`), the order its keys came in (`whole`), and a field that falls
    back on another key (`also`)."""

    TYPE = "open"
    level: str = wire("", read=_level, also=("loud",))
    name: str = ""
    others: dict[str, Any] = wire(factory=dict, extra=True)
    order: tuple[str, ...] = wire((), whole=True, read=lambda msg: tuple(msg))


def test_a_frame_may_keep_its_other_keys_their_order_and_read_a_field_from_two_keys():
    msg = {"zz": None, "name": "n", "type": "open", "loud": True, "order": 1, "others": 2}
    got = decode(Open, msg)
    # `loud` is the level's, `type` the frame's, the rest kept as they came, in order
    assert got.others == {"zz": None, "order": 1, "others": 2}
    assert list(got.others) == ["zz", "order", "others"]
    assert got.order == ("zz", "name", "type", "loud", "order", "others")
    assert got.level == "high" and decode(Open, {"level": "mid"}).level == "mid"
    assert decode(Open, {"loud": 1}).level == "low"  # a missing key reads as None
    # The order and the catch-all write no key of their own; the catch-all's
    # keys follow the fields', one with a field's key over it.
    assert encode(got) == {
        "type": "open",
        "level": "high",
        "name": "n",
        "zz": None,
        "order": 1,
        "others": 2,
    }
    assert encode(Open(name="a", others={"name": "b", "x": 1})) == {
        "type": "open",
        "level": "",
        "name": "b",
        "x": 1,
    }
    assert keys(Open) == ("level", "name")


def test_a_frame_that_refuses_extra_keys_knows_those_a_field_also_reads():
    @dataclass(frozen=True, slots=True)
    class Closed(Tolerant):
        EXTRA = False
        level: str = wire(read=_level, also=("loud",))

    assert decode(Closed, {"loud": True}).level == "high"
    with pytest.raises(ProtocolError, match="unknown fields: quiet"):
        decode(Closed, {"loud": True, "quiet": 1})


def test_a_field_read_from_more_than_its_key_needs_its_own_reader():
    @dataclass(frozen=True, slots=True)
    class Bad(Tolerant):
        level: str = wire("", also=("loud",))

    with pytest.raises(TypeError, match="own `read`"):
        decode(Bad, {})
