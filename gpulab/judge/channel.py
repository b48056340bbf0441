"""The judge's channel to the lab: the frames of a check (gpulab.wire.protocol)
on the file descriptor named in GPULAB_EVENTS_FD, which only the judge holds,
and the stages' times the result reports."""

from __future__ import annotations

import threading
import time
from typing import Any

from gpulab.wire import protocol
from gpulab.wire.codec import PROTOCOL
from gpulab.wire.events import CaseDone, Correct, Graded, Stage
from gpulab.wire.protocol import JsonObject
from gpulab.wire.result import CheckResult
from gpulab.wire.status import StageKind


class Channel:
    def __init__(self, fd: int) -> None:
        self.fd = fd
        # Frames are written from the main thread and, once, from the thread
        # that answers the lab's SIGUSR1 (gpulab.judge.stuck): one at a time.
        self._lock = threading.Lock()
        self.marks: list[tuple[StageKind, float]] = [(StageKind.START, time.monotonic())]
        self.texts: list[str] = ["start"]  # each mark's own words
        self.said_version = False  # the first frame says the protocol's version

    def send(self, event: Stage | CaseDone | Correct | Graded) -> None:
        self.write(event.to_json())

    def write(self, frame: JsonObject) -> None:
        with self._lock:
            if not self.said_version:  # the lab refuses a judge of another version
                frame, self.said_version = {**frame, "protocol": PROTOCOL}, True
            protocol.write_frame(self.fd, frame)

    def finish(self, result: CheckResult) -> None:
        """The check's last frame: its result, as JSON (the lab reads it back
        field by field, trusting nothing of it)."""
        self.write({"type": "result", "result": result.to_json()})

    def stage(
        self,
        kind: StageKind,
        text: str,
        done: int | None = None,
        total: int | None = None,
        allow_s: float | None = None,
    ) -> None:
        """A stage: its kind, its words, and where there are steps, how many
        are done of how many (data, so the lab never reads them back out of
        words); `allow_s`, the seconds this stage may take (gpulab.judge.allowance)."""
        self.marks.append((kind, time.monotonic()))
        self.texts.append(text)
        if done is not None and total:
            self.send(Stage(text, int(done), int(total), allow_s, kind))
        else:
            self.send(Stage(text, allow_s=allow_s, kind=kind))

    def waiting(self, text: str) -> None:
        """A wait for the GPU (gpulab.gpu.gpulock's `on_wait`)."""
        self.stage(StageKind.WAITING, text)

    def stages(self) -> dict[str, float]:
        """Seconds in each kind of stage so far, in the order first seen
        (the result's `stages`: a slow check says where its time went)."""
        return protocol.stage_seconds(self.marks, time.monotonic())

    def slowest(self, n: int = 5) -> list[list[Any]]:
        """The n longest single steps, [words, seconds], longest first (the
        result's `slowest`: which case or timed shape the time went to)."""
        now = time.monotonic()
        ends = [t for _, t in self.marks[1:]] + [now]
        steps = sorted(
            (
                (round(end - t, 3), protocol.text(words, 120))
                for words, (_, t), end in zip(self.texts, self.marks, ends, strict=True)
            ),
            reverse=True,
        )
        return [[words, seconds] for seconds, words in steps[:n]]


def graded(channel: Channel, result: CheckResult) -> None:
    """The grade, sent as soon as the timing ends: on a GPU a diagnosis
    (advice, which never changes the grade) follows a timed check, and the
    learner need not wait for it to see the grade. On an H200 it came 0.8-1.4 s
    after the grade in a softmax check through the spare judge (feedback bench,
    torch 2.11, Triton 3.6, 2026-12-03), 3.7 s in a cold one under py-spy."""
    grade = result.timing.grade if result.timing is not None else None
    if not result.passed or not grade:
        return
    channel.send(Graded(protocol.text(grade, 8), protocol.text(result.summary, 300)))
