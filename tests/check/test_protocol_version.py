"""The check protocol's version from the judge to the lab: the judge's
first frame says it (gpulab.judge.main.Channel), and the lab refuses a
first frame that says another or none (gpulab.lab.runner._relay), as a
result of status error naming both versions. No judge runs here."""

from __future__ import annotations

import os

import pytest

from gpulab.wire.codec import PROTOCOL
from gpulab.wire.events import Stage
from gpulab.wire.protocol import read_frame
from gpulab.wire.status import StageKind, Status


class _Events:
    """child.Events as _relay reads it."""

    def __init__(self, frames: list[dict]) -> None:
        self.frames, self.deadline = frames, 0.0

    def __iter__(self):
        return iter(self.frames)


def _relay(frames: list[dict]):
    from gpulab.lab.runner import _relay

    seen: list = []
    return _relay(_Events(frames), seen.append), seen  # type: ignore[arg-type]


STAGE = Stage("starting", kind=StageKind.START).to_json()
RESULT = {"type": "result", "result": {"status": "passed", "summary": "ok"}}


def test_the_same_version_is_read():
    result, seen = _relay([{**STAGE, "protocol": PROTOCOL}, RESULT])
    assert result is not None and result.passed
    assert seen == [Stage("starting", kind=StageKind.START)]


@pytest.mark.parametrize(
    ("said", "words"),
    [(PROTOCOL + 1, f"version {PROTOCOL + 1}"), (None, "no version"), ("1.0", "version 1.0")],
)
def test_another_version_or_none_is_refused_naming_both(said, words):
    from gpulab.lab.runner import _OtherVersion

    first = {**STAGE, "protocol": said} if said is not None else STAGE
    with pytest.raises(_OtherVersion) as refused:
        _relay([first, RESULT])
    result = refused.value.result
    assert result.status is Status.ERROR and not result.passed
    assert f"speaks {words} of gpulab's check protocol" in result.summary
    assert f"this gpulab version {PROTOCOL}" in result.summary
    assert result.message and "Reinstall gpulab" in result.message


def test_a_first_result_frame_is_checked_too():
    from gpulab.lab.runner import _OtherVersion

    with pytest.raises(_OtherVersion):
        _relay([RESULT])
    result, _ = _relay([{**RESULT, "protocol": PROTOCOL}])
    assert result is not None and result.passed


def test_the_judges_first_frame_says_its_version_and_only_the_first():
    from gpulab.judge.main import Channel

    read_fd, write_fd = os.pipe()
    try:
        channel = Channel(write_fd)
        channel.stage(StageKind.START, "starting")
        channel.waiting("waiting for the GPU: another check times on it")
        first, second = read_frame(read_fd), read_frame(read_fd)
    finally:
        os.close(read_fd)
        os.close(write_fd)
    assert first["protocol"] == PROTOCOL and first["kind"] == "start"
    assert "protocol" not in second and second["kind"] == "waiting for the GPU"
    assert [kind for kind, _ in channel.marks] == [
        StageKind.START,
        StageKind.START,
        StageKind.WAITING,
    ]
