"""A check with the sandbox's handlers called in the test's own process.

The grader, the judge's checks and the sandbox's request handlers are the
real ones; only the process boundary (and so the confinement) is left out.
A check costs what its work costs, not two interpreters starting: for
exercises whose many variants would otherwise each start a judge and a
sandbox. Each exercise still has tests through the real check path.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


class Channel:
    def send(self, event: Any) -> None:
        pass

    def stage(self, kind: Any, text: str, *progress: int) -> None:
        pass


class InProcessSandbox:
    """The sandbox's Server answering in this process, its arenas mapped from
    the judge's own memory descriptors."""

    pending = False
    learner_ran = True  # the file runs in this process: a broken reply may be its own

    def __init__(self, file: Path, before_load: list[str], device: str = "cpu") -> None:
        from gpulab.sandbox.main import Server
        from gpulab.wire.sandbox_start import Policy, SandboxConfig

        self.device = device
        self.server = Server(-1, SandboxConfig(device, str(file), Policy()))
        # No channel here (fd -1): the importing mark has no judge to reach,
        # and the learner's file runs in this process anyway.
        self.server.mark_importing = lambda: None  # type: ignore[method-assign]
        self.before_load = before_load
        self.arenas: list = []

    def arena(self, nbytes: int) -> Any:
        from gpulab.judge.remote import Arena
        from gpulab.sandbox import tensors

        arena = Arena(len(self.arenas), max(nbytes, 256), self.device)
        self.server.arenas[arena.spec.id] = tensors.open_arena(arena.spec, os.dup(arena.fd))
        self.arenas.append(arena)
        return arena

    def ask(self, message: Any, kind: Any) -> Any:
        """As gpulab.judge.remote.Sandbox.ask: the reply read as a `kind`."""
        from gpulab.wire.replies import read_reply

        return read_reply(self.request(message), kind)

    def send(self, message: Any) -> None:
        """As gpulab.judge.remote.Sandbox.send (the replay's sandbox is sent
        its request and asked for the reply later): answered now, kept."""
        self._answer = self.request(message)

    def reply(self, kind: Any) -> Any:
        from gpulab.wire.replies import read_reply

        return read_reply(self._answer, kind)

    def close(self) -> None:
        pass

    def request(self, message: Any) -> dict:
        """The typed request through JSON, as the sandbox reads it; the
        typed reply back as the JSON the judge reads."""
        import dataclasses
        import json

        from gpulab.sandbox.failure import LearnerFailure
        from gpulab.sandbox.main import route_of
        from gpulab.wire import sandbox_start
        from gpulab.wire.replies import Raised

        msg = json.loads(json.dumps(message.to_json()))
        route = route_of(msg)  # the sandbox's own dispatch
        request = route.read(msg)
        if isinstance(request, sandbox_start.LoadRequest):
            request = dataclasses.replace(request, before_load=tuple(self.before_load))
        assert route.answer is not None, msg
        try:
            reply = route.answer(self.server, request)
        except LearnerFailure as exc:
            reply = Raised(exc.summary, exc.message)
        return json.loads(json.dumps(reply.to_json()))


def grade_here(exercise: str, function: str, path: Path) -> dict:
    """The result dict `gpulab check` would give for `path`, on the CPU."""
    from gpulab.judge import loader
    from gpulab.judge.harness import grade_request
    from gpulab.wire.check_request import CheckRequest

    request = CheckRequest(exercise=exercise, function=function, file=str(path))
    sandbox = InProcessSandbox(path, [r for r in loader.records(exercise) if r != "trace"])
    return grade_request(request, "cpu", Channel(), sandbox=sandbox).to_json()
