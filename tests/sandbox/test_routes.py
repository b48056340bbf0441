"""The sandbox's dispatch (gpulab.sandbox.main.ROUTES): every request it
answers in one table, and a type not in it refused by name. No learner code
and no torch: the table and the loop, over a socket pair."""

from __future__ import annotations

import socket

import pytest

from gpulab.sandbox.main import ROUTES, Server, route_of
from gpulab.wire import requests
from gpulab.wire.protocol import ProtocolError, read_frame, write_frame
from gpulab.wire.replies import Broken, read_reply
from gpulab.wire.sandbox_start import Exit, Ok, Policy, SandboxConfig

# The one request read by gpulab.wire.requests' own rule: a `call` is a
# CallRequest or a PlainCall.
KERNEL_PATH = {"call"}


def test_every_request_the_wire_reads_has_a_route_and_no_other():
    assert set(ROUTES) == set(requests._REQUESTS) | KERNEL_PATH
    for kind, route in ROUTES.items():
        if kind in KERNEL_PATH:
            assert route.read is requests.request, kind
        else:  # a codec frame: read by its own class
            assert route.read == requests._REQUESTS[kind], kind
    assert ROUTES[Exit.TYPE].answer is None  # ends the loop, unanswered


@pytest.mark.parametrize("kind", ["on_load", "nope", "", 7, None])
def test_a_type_not_in_the_table_is_refused_by_name(kind):
    with pytest.raises(ProtocolError, match="a request of unknown type") as refused:
        route_of({"type": kind})
    assert repr(kind if isinstance(kind, str) else "") in str(refused.value)


def test_the_loop_answers_an_unknown_type_broken_and_goes_on(tmp_path):
    """What the judge reads back: a `broken` reply naming the type; the next
    request is answered as before, and `exit` ends the loop."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        server = Server(theirs.fileno(), SandboxConfig("cpu", str(tmp_path / "x.py"), Policy()))
        write_frame(ours.fileno(), {"type": "forge_a_pass"})
        write_frame(ours.fileno(), {"type": "arena_of_nothing"})
        write_frame(ours.fileno(), Exit().to_json())
        server.serve()  # returns at `exit`
        for name in ("forge_a_pass", "arena_of_nothing"):
            reply = read_reply(read_frame(ours.fileno()), Ok)
            assert isinstance(reply, Broken), reply
            assert f"unknown type {name!r}" in reply.summary
