"""The sandbox's reading of a request from the judge: each request's type
to its frame, declared in its conversation's module (calls, timed_batch,
sandbox_start, replay, dynamo, training, benches, explain).

This module imports nothing heavy.
"""

from __future__ import annotations

from collections.abc import Callable

from gpulab.wire.benches import BenchRequest, ExportRequest, MatmulBenchRequest
from gpulab.wire.calls import AuditEnd, CallRequest
from gpulab.wire.dynamo import (
    CompileRequest,
    DynamoConfigRequest,
    DynamoRequest,
    ModesRequest,
    OverheadRequest,
    StreamRequest,
)
from gpulab.wire.explain import ExplainCompile, ExplainPrepare, ExplainRequest, ProfileRequest
from gpulab.wire.protocol import JsonObject, ProtocolError, text
from gpulab.wire.replay import ReplayRequest, ReplayTimeRequest
from gpulab.wire.sandbox_start import (
    ArenaRequest,
    CompileAhead,
    Exit,
    LoadRequest,
    PlainCall,
    Prepare,
    Warm,
)
from gpulab.wire.timed_batch import TimeRequest
from gpulab.wire.training import BottleneckRequest, TrainRequest

# --- the sandbox's reading of a request ---------------------------------------------

Request = (
    LoadRequest
    | ArenaRequest
    | Warm
    | Prepare
    | ReplayRequest
    | ReplayTimeRequest
    | AuditEnd
    | CallRequest
    | PlainCall
    | DynamoRequest
    | DynamoConfigRequest
    | ModesRequest
    | CompileRequest
    | StreamRequest
    | BenchRequest
    | MatmulBenchRequest
    | ExportRequest
    | TrainRequest
    | BottleneckRequest
    | OverheadRequest
    | CompileAhead
    | TimeRequest
    | ExplainRequest
    | ExplainPrepare
    | ExplainCompile
    | ProfileRequest
    | Exit
)

_REQUESTS: dict[str, Callable[[JsonObject], Request]] = {
    cls.TYPE: cls.parse
    for cls in (
        LoadRequest,
        ArenaRequest,
        Warm,
        Prepare,
        ReplayRequest,
        ReplayTimeRequest,
        TimeRequest,
        AuditEnd,
        CompileAhead,
        DynamoRequest,
        DynamoConfigRequest,
        ModesRequest,
        CompileRequest,
        StreamRequest,
        BenchRequest,
        MatmulBenchRequest,
        ExportRequest,
        TrainRequest,
        BottleneckRequest,
        OverheadRequest,
        ExplainRequest,
        ExplainPrepare,
        ExplainCompile,
        ProfileRequest,
        Exit,
    )
}


def request(msg: JsonObject) -> Request:
    """The sandbox's reading of a frame from the judge; a ProtocolError for
    a type it does not know or a request it cannot use."""
    kind = msg.get("type")
    if kind == "call":
        return PlainCall.parse(msg) if msg.get("plain") else CallRequest.parse(msg)
    parse = _REQUESTS.get(kind) if isinstance(kind, str) else None
    if parse is None:
        raise ProtocolError(f"a request of unknown type {text(kind, 40)!r}")
    return parse(msg)
