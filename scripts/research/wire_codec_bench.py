# ruff: noqa: B023
# (each timed lambda runs within the loop turn that made it)
"""The wire's codec measured (issue 45): hand-written parsers, msgspec and
gpulab.wire.codec's generic dataclass codec, on the frames of a real check
(recorded by wire_frames_record.py), for decode speed and for strictness.

    python scripts/research/wire_codec_bench.py /tmp/frames.jsonl

"hand" is gpulab's own reader of each frame: the hand-written parsers when
this was measured (commit 4f40641, gpulab.wire.frames_other), the codec's
once the frames moved to it.
"""

from __future__ import annotations

import json
import sys
import timeit
from dataclasses import dataclass, field
from typing import Any

import msgspec

from gpulab.wire import replay as hand_replay
from gpulab.wire import sandbox_start as hand
from gpulab.wire.codec import Frame, Tolerant, decode, encode, wire
from gpulab.wire.protocol import ProtocolError

# --- the same frames, declared for the codec ----------------------------------


@dataclass(frozen=True, slots=True)
class Ready(Tolerant):
    TYPE = "ready"
    isolation: tuple[str, ...] = wire((), limit=200)


@dataclass(frozen=True, slots=True)
class Loaded(Tolerant):
    TYPE = "loaded"
    functions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Replayed(Tolerant):
    TYPE = "replayed"
    problem: str = wire("", limit=400)
    counts: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class LoadRequest(Frame):
    TYPE = "load"
    functions: tuple[str, ...]
    before_load: tuple[str, ...] = ()
    source: str | None = None
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class Policy(Frame):
    read: list[str] = field(default_factory=list)
    listable: list[str] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)
    write: list[str] = field(default_factory=list)
    cpu_seconds: int = 600
    file_bytes: int = 256 * 1024 * 1024
    address_space: int | None = None
    blocked_modules: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SandboxConfig(Frame):
    TYPE = "config"
    device: str
    file: str
    policy: Policy
    sys_path: tuple[str, ...] = ()
    source: str | None = None
    problem: str | None = None
    hold: bool = False


# --- and for msgspec ---------------------------------------------------------


class MReady(msgspec.Struct):
    isolation: list[str] = []


class MLoaded(msgspec.Struct):
    functions: list[str] = []


class MReplayed(msgspec.Struct):
    problem: str = ""
    counts: dict[str, Any] | None = None


class MLoadRequest(msgspec.Struct):
    functions: list[str]
    before_load: list[str] = []
    source: str | None = None
    problem: str | None = None


class MPolicy(msgspec.Struct):
    read: list[str] = []
    listable: list[str] = []
    hidden: list[str] = []
    write: list[str] = []
    cpu_seconds: int = 600
    file_bytes: int = 256 * 1024 * 1024
    address_space: int | None = None
    blocked_modules: list[str] = []


class MSandboxConfig(msgspec.Struct):
    device: str
    file: str
    policy: MPolicy
    sys_path: list[str] = []
    source: str | None = None
    problem: str | None = None
    hold: bool = False


KINDS = {
    "ready": (hand.Ready, Ready, MReady),
    "loaded": (hand.Loaded, Loaded, MLoaded),
    "replayed": (hand_replay.Replayed, Replayed, MReplayed),
    "load": (hand.LoadRequest, LoadRequest, MLoadRequest),
    "config": (hand.SandboxConfig, SandboxConfig, MSandboxConfig),
}


def per_frame_us(fn: Any, n: int) -> float:
    return min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6


def speed(frames: list[dict[str, Any]]) -> None:
    print(
        "| frame | count | bytes | json.loads | hand parse | codec decode | msgspec convert "
        "| msgspec json.decode(bytes) | codec encode |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for kind, (h, c, m) in KINDS.items():
        got = [f for f in frames if f["type"] == kind]
        if not got:
            continue
        msg = got[0]
        raw = json.dumps(msg).encode()
        obj = decode(c, msg)
        n = 20000
        print(
            f"| `{kind}` | {len(got)} | {len(raw)} "
            f"| {per_frame_us(lambda: json.loads(raw), n):.2f} "
            f"| {per_frame_us(lambda: h.parse(msg), n):.2f} "
            f"| {per_frame_us(lambda: decode(c, msg), n):.2f} "
            f"| {per_frame_us(lambda: msgspec.convert(msg, m), n):.2f} "
            f"| {per_frame_us(lambda: msgspec.json.decode(raw, type=m), n):.2f} "
            f"| {per_frame_us(lambda: encode(obj), n):.2f} |"
        )


HOSTILE = {
    "wrong type": {"type": "ready", "isolation": [1, "net", True, None, "fs"]},
    "wrong type (whole field)": {"type": "ready", "isolation": "everything"},
    "missing field": {"type": "ready"},
    "extra field": {"type": "ready", "isolation": ["net"], "x": 1},
    "huge string": {"type": "ready", "isolation": ["n" * 10**6]},
    "huge int": {"type": "replayed", "problem": "", "counts": {"n": 10**400}},
    "bool for a string": {"type": "replayed", "problem": True},
}


def strictness() -> None:
    print("\n| untrusted reply | hand | codec | msgspec convert |")
    print("|---|---|---|---|")
    for what, msg in HOSTILE.items():
        h, c, m = KINDS[msg["type"]]
        row = []
        for fn in (lambda: h.parse(msg), lambda: decode(c, msg), lambda: msgspec.convert(msg, m)):
            try:
                row.append(short(fn()))
            except (ProtocolError, msgspec.ValidationError) as exc:
                row.append(f"refused: {str(exc)[:50]}")
        print(f"| {what} | " + " | ".join(row) + " |")
    bad = {"type": "load", "functions": "softmax"}
    print("\n| trusted request | hand | codec | msgspec convert |\n|---|---|---|---|")
    for what, msg in {
        "list is a string": bad,
        "missing field": {"type": "load"},
        "int for a string": {"type": "load", "functions": [], "source": 3},
    }.items():
        h, c, m = KINDS["load"]
        row = []
        for fn in (lambda: h.parse(msg), lambda: decode(c, msg), lambda: msgspec.convert(msg, m)):
            try:
                row.append(short(fn()))
            except (ProtocolError, msgspec.ValidationError) as exc:
                row.append(f"refused: {str(exc)[:60]}")
        print(f"| {what} | " + " | ".join(row) + " |")


def short(value: Any) -> str:
    out = repr(value).replace("|", "/")
    return out if len(out) < 60 else out[:57] + "..."


def main() -> None:
    frames = [json.loads(line)["frame"] for line in open(sys.argv[1])]
    speed(frames)
    strictness()


if __name__ == "__main__":
    main()
