"""The Results pane shows the "Explain" section of a timed check (issue 21).

Timed checks need a GPU, so the results here are canned: what the judge
returns after a timed check on an H200 (a diagnosis is attached to every
passing timed check, --explain or not). The pane must show it after the
check, and again when the lesson is reopened from the recorded result.
"""

from __future__ import annotations

import pytest

pytest.importorskip("textual")

from test_tui import make_app, shows, wait_for  # noqa: E402

from gpulab.tui.results import ResultsPane  # noqa: E402
from gpulab.wire.result import CheckResult

pytestmark = pytest.mark.anyio
SIZE = (110, 60)


@pytest.fixture
def anyio_backend():
    return "asyncio"


def timed_result() -> dict:
    """A passing timed softmax check on a GPU, with the judge's diagnosis."""
    return {
        "exercise": "softmax",
        "status": "passed",
        "passed": True,
        "summary": "14 cases passed; grade C: 41% of the roofline",
        "device": "NVIDIA H200",
        "duration_s": 21.0,
        "cases": [{"name": "3×17 fp16", "dtype": "fp16", "passed": True}],
        "timing": {
            "device": "NVIDIA H200",
            "grade": "C",
            "roofline_fraction": 0.41,
            "unit": "GB/s",
            "cases": [
                {
                    "name": "8192×4096 fp16",
                    "shape": "8192×4096",
                    "dtype": "fp16",
                    "ms": 0.0706,
                    "p20_ms": 0.0702,
                    "p80_ms": 0.0711,
                    "throughput": 1901.0,
                    "roofline_fraction": 0.41,
                    "speedup": 0.62,
                }
            ],
        },
        "diagnosis": [
            {
                "kind": "extra_bytes",
                "evidence": "softmax_kernel (BLOCK=1024, 4 warps) loads x_ptr at 3 places",
                "advice": "Load each element once (lesson 02, “Why softmax is memory-bound”)",
                "lesson": "02_triton_101_softmax",
                "section": "Why softmax is memory-bound",
                "severity": 0.3,
            }
        ],
        "explain": {
            "basis": ["hardware: this machine's GPU", "timing: measured on this GPU"],
            "advisory": "a diagnosis is advice: it never changes the grade",
            "error": "",
        },
    }


async def test_explain_section_after_a_timed_check(ws):
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        app.action_open_lesson("softmax")
        await pilot.pause()
        await pilot.press("3")  # the Results pane
        pane = app.query_one(ResultsPane)
        pane.finish(CheckResult.from_json(timed_result()), [])
        await pilot.pause(0.3)
        assert shows(app, "Explain: what limits this kernel")
        assert shows(app, "1. extra_bytes", "loads x_ptr at 3 places")
        assert shows(app, "lesson 02, “Why softmax is memory-bound”")
        assert shows(app, "it never changes the grade")


async def test_explain_section_from_the_recorded_result(ws):
    """Reopening the lesson shows the last result as recorded: the diagnosis too."""
    ws.record_result("softmax", CheckResult.from_json(timed_result()))
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        app.action_open_lesson("softmax")
        await pilot.pause()
        await pilot.press("3")
        await pilot.pause(0.3)
        assert shows(app, "Explain: what limits this kernel", "1. extra_bytes")


async def test_no_explain_section_without_a_diagnosis(ws):
    """A CPU check without --explain carries no diagnosis: no empty section."""
    result = {k: v for k, v in timed_result().items() if k not in ("diagnosis", "explain")}
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        app.action_open_lesson("softmax")
        await pilot.pause()
        await pilot.press("3")
        app.query_one(ResultsPane).finish(CheckResult.from_json(result), [])
        await pilot.pause(0.3)
        assert shows(app, "14 cases passed") and not shows(app, "Explain:")


async def test_shift_x_checks_with_explain_and_shows_it(ws, monkeypatch):
    """X asks for `--explain` (on a CPU too: compiled facts and the datasheet
    GPU); c does not. The check is faked: what reaches run_check is the test."""
    import gpulab.lab.check as lab_check  # Lab.check runs the judge

    calls: list[dict] = []

    def fake(lesson, path, **kw):
        calls.append(kw)
        return CheckResult.from_json(
            timed_result()
            if kw["explain"] is not None
            else {k: v for k, v in timed_result().items() if k not in ("diagnosis", "explain")}
        )

    monkeypatch.setattr(lab_check, "run_check", fake)
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        app.action_open_lesson("softmax")
        await pilot.pause()
        await pilot.press("c")
        await wait_for(pilot, lambda: len(calls) == 1 and not app.checking, 30, "the check")
        assert calls[0]["explain"] is None
        assert not shows(app, "Explain:")
        await pilot.press("X")
        await wait_for(pilot, lambda: len(calls) == 2 and not app.checking, 30, "the check")
        assert calls[1]["explain"] is not None and calls[1]["workspace"] == str(ws.root)
        assert calls[1]["timeout"] == calls[0]["timeout"] + 60  # the CLI's allowance
        await pilot.pause(0.3)
        assert shows(app, "Explain: what limits this kernel", "1. extra_bytes")
