"""`gpulab dev compile`'s rows: typed in the CLI, the same JSON as ever.

The real matrix compiles with Triton (tests/perf/test_compile_info.py); these
rows are made by hand, so the shapes are checked without a compiler."""

from __future__ import annotations

import json

from rich.console import Console

from gpulab.cli.commands.dev_compile import CompileRow, failures, render
from gpulab.measure.compile_info import CompileInfo

GOOD = CompileInfo(
    "k", "sm_90", True, registers=40, spill_stores=8, spill_loads=0, shared=4096, num_warps=4,
    blocks_per_sm=8, limited_by="registers", tensor_cores="wgmma",
)  # fmt: skip
BROKEN = CompileInfo("k", "sm_75", False, error="ptxas said no")


def _text(renderable: object) -> str:
    con = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    con.print(renderable)
    return con.export_text()


def test_a_row_writes_the_json_it_always_wrote():
    compiled = CompileRow("softmax", "reference", "sm_90", GOOD)
    assert json.dumps(compiled.to_json()) == json.dumps(
        {"name": "softmax", "role": "reference", **GOOD.as_dict()}
    )
    unset = CompileRow("softmax", "starter", "sm_75", error="no spec")
    assert list(unset.to_json().items()) == [
        ("name", "softmax"),
        ("role", "starter"),
        ("arch", "sm_75"),
        ("ok", False),
        ("error", "no spec"),
    ]


def test_only_references_that_fail_are_failures_and_each_says_why():
    rows = [
        CompileRow("a", "reference", "sm_90", GOOD),
        CompileRow("b", "starter", "sm_75", BROKEN),
        CompileRow("c", "reference", "sm_75", BROKEN),
        CompileRow("d", "reference", "sm_90", error="could not load"),
    ]
    assert [r.name for r in failures(rows)] == ["c", "d"]
    text = _text(render(rows))
    assert "✘ b on sm_75: ptxas said no" in text and "✘ d on sm_90: could not load" in text
    assert "wgmma" in text


def test_compile_json_names_every_key_as_dict_writes():
    """CompileJson is as_dict's type: its keys (a field added to CompileInfo
    and not to it would leave the JSON's key untyped)."""
    from gpulab.measure.compile_info import CompileJson

    for info in (GOOD, BROKEN):
        assert set(info.as_dict()) == set(CompileJson.__annotations__)
