"""The sandbox's own messages, declared once: what each side may say, how it is built, and how
the supervisor checks what it reads.

Supervisor -> worker, on the job pipe (``sandbox._frames``): the job (``Job``) as two frames,
its layers and then its payload (``encode_job``). The worker takes the layers (its uid, its
Landlock domain, its workspace) and may fork its clean template (``sandbox._template``) before
it reads the payload, the arguments and secrets: what holds no payload cannot leak one.

Worker -> supervisor, frames on the result pipe, in this order:

* ``{"t": "setup_error", "error": str}``: a layer could not be applied; no tool ran;
* ``{"t": "event", "kind": str, "data": {...}}``: an event, in emission order;
* ``{"t": "share", "what": str, "data": {...}}``: something the tool offers to later calls
  (``sandbox._sharing``), for the supervisor's store of its plugin to check and keep or drop;
* ``{"t": "result", "ok": true, "data": ..., "usage": {...}}`` or
  ``{"t": "result", "ok": false, "error": str, "data": ..., "retryable": bool, "usage": {...}}``
  (and ``"reason"`` when the tool named one): the end, with the worker's own account of itself
  (``usage``: ``cpu_ms``, ``maxrss_kb``).

Supervisor <-> zygote, JSON datagrams on the control socket: ``spawn`` and ``stop`` one way;
``ready``, ``worker`` (with the worker's fds), ``exit``, ``spawn_failed`` and ``fatal`` the
other.

The worker is hostile (tool code runs in it and can write anything to its pipe): every frame is
checked here before anything of it is used (``check_worker_frame``). The zygote is ours, but
its messages are still checked for shape (``check_control``): a malformed one is an error
message, not a crash of the supervisor. Plain data only: workers and the zygote import no
pydantic, and nothing here is ever unpickled.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict, cast

from a2e.caps.tools._reasons import TOOL_REASONS, FailureReason
from a2e_engine.sandbox._frames import encode_frame, frame_of_body, read_frame
from a2e_engine.sandbox.layers import LayerReport

__all__ = [
    "CONTROL",
    "CONTROL_MAX",
    "AboutWorkers",
    "ControlMessage",
    "Event",
    "EventFrame",
    "Exited",
    "FailureFrame",
    "Fatal",
    "Forked",
    "Job",
    "MalformedMessage",
    "Ready",
    "Result",
    "SetupError",
    "SetupErrorFrame",
    "Share",
    "ShareFrame",
    "Spawn",
    "SpawnFailed",
    "Stop",
    "check_control",
    "check_worker_frame",
    "control",
    "encode_job",
    "event_frame",
    "failure_frame",
    "job_with_payload",
    "read_job",
    "read_layers",
    "read_payload",
    "result_frame",
    "setup_error_frame",
    "share_frame",
]


class MalformedMessage(ValueError):
    """A message that breaks its declaration; the sentence says how."""


# -- supervisor -> worker --


class Job(TypedDict):
    """One tool execution, as the supervisor sends it and the worker reads it: plain data (the
    worker builds no models)."""

    zygote: str  # the name of the zygote that forks its worker (the pool's ZygoteSpec)
    plugin: int  # the index of its plugin in that zygote's list
    tool: str
    arguments: dict[str, Any]
    profile: str
    workspace: str
    tmp_dir: str
    streaming: bool
    read_roots: list[str]
    call_id: str
    uid: int | None  # the session's uid, when the sandbox has the identity layer
    cancel_grace_s: float  # SIGTERM, then this long to clean up, then SIGKILL
    secrets: dict[str, str]  # this call's only (ToolPlugin.secrets_for)
    #: The first job of a resident worker, which stays for its session's next jobs of the
    #: same tool (``sandbox._resident``); absent: the worker exits after this one.
    resident: NotRequired[bool]
    #: Whose call it is, for fair turns at the worker slots (``sandbox._slots``).
    tenant: NotRequired[str]
    #: Another path the workspace answers to in the worker, and its ``HOME`` (E2B's
    #: ``/home/user``): a link there, where the run layer gives it a ``/home`` of its own.
    home: NotRequired[str]
    #: The call takes input after its start (``sandbox._call_input``): the job pipe stays open
    #: for it.
    input: NotRequired[bool]
    #: A kept worker's turn that forks it into this many copies rather than running a tool
    #: (``sandbox._forks``).
    copies: NotRequired[int]


#: What of a job is its payload, sent after its layers: the arguments and the secrets.
PAYLOAD_FIELDS = ("arguments", "secrets")


def encode_job(job: Job) -> bytes:
    """``job`` as its two frames, written at once: its layers (the payload empty), then its
    payload."""
    payload = {name: job[name] for name in PAYLOAD_FIELDS}  # type: ignore[literal-required]
    layers = {**job, **{name: {} for name in PAYLOAD_FIELDS}}
    return encode_frame(layers) + encode_frame(payload)


def read_layers(fd: int, max_frame: int) -> Job:
    """The first frame of a job: the job without its payload (``arguments`` and ``secrets``
    empty)."""
    return cast(Job, read_frame(fd, max_frame))


def read_payload(fd: int, max_frame: int) -> dict[str, Any]:
    """The second frame of a job: its arguments and secrets."""
    return read_frame(fd, max_frame)


def read_job(fd: int, max_frame: int) -> Job:
    """A whole job, its two frames read at once."""
    return job_with_payload(read_layers(fd, max_frame), read_payload(fd, max_frame))


def job_with_payload(layers: Job, payload: dict[str, Any]) -> Job:
    """The whole job, from its two frames (fields of the payload that are not one are
    ignored)."""
    given = {name: payload.get(name) or {} for name in PAYLOAD_FIELDS}
    if not all(isinstance(value, dict) for value in given.values()):
        raise ValueError("a job's arguments and secrets are objects")
    return cast(Job, {**layers, **given})


# -- worker -> supervisor: built by the worker --


class EventFrame(TypedDict):
    t: Literal["event"]
    kind: str
    data: dict[str, Any]


class SetupErrorFrame(TypedDict):
    t: Literal["setup_error"]
    error: str


class ShareFrame(TypedDict):
    t: Literal["share"]
    what: str
    data: dict[str, Any]


class Usage(TypedDict):
    cpu_ms: int
    maxrss_kb: int


class FailureFrame(TypedDict):
    """A result frame for a call that failed (a success's is spliced: ``result_frame``)."""

    t: Literal["result"]
    ok: Literal[False]
    error: str
    data: Any
    retryable: bool
    reason: NotRequired[str]  # one of TOOL_REASONS, when the tool named one
    usage: NotRequired[Usage]  # the worker's own account, added last


def event_frame(kind: str, data: dict[str, Any]) -> EventFrame:
    return {"t": "event", "kind": kind, "data": data}


def setup_error_frame(error: str) -> SetupErrorFrame:
    return {"t": "setup_error", "error": error}


def share_frame(what: str, data: dict[str, Any]) -> ShareFrame:
    return {"t": "share", "what": what, "data": data}


def failure_frame(
    error: str, data: Any = None, retryable: bool = True, reason: str | None = None
) -> FailureFrame:
    """A result frame for a call that failed; the worker adds ``usage``."""
    frame: FailureFrame = {
        "t": "result",
        "ok": False,
        "error": error,
        "data": data,
        "retryable": retryable,
    }
    if reason is not None:
        frame["reason"] = reason
    return frame


def result_frame(result: str | FailureFrame, cpu_ms: int, maxrss_kb: int) -> bytes:
    """The worker's last frame, with its account of itself (``usage``): a failure frame as it
    is, or a success whose data, JSON the worker encoded once (it may be megabytes), is spliced
    in rather than decoded and encoded again."""
    usage: Usage = {"cpu_ms": cpu_ms, "maxrss_kb": maxrss_kb}
    if isinstance(result, dict):
        return encode_frame({**result, "usage": usage})
    head = f'{{"t":"result","ok":true,"usage":{{"cpu_ms":{cpu_ms:d},"maxrss_kb":{maxrss_kb:d}}}'
    return frame_of_body(f'{head},"data":{result}}}'.encode())


# -- worker -> supervisor: checked by the supervisor --


# Plain slotted classes: one of these is made per frame, on the supervisor's hot path.


@dataclass(slots=True)
class Event:
    kind: str
    data: dict[str, Any]


@dataclass(slots=True)
class SetupError:
    error: str


@dataclass(slots=True)
class Share:
    """What a worker offered to share: unchecked but for its shape, which is all the sandbox
    knows of it (the plugin's store checks the rest)."""

    what: str
    data: dict[str, Any]


@dataclass(slots=True)
class Result:
    """A worker's result, checked; ``cpu_ms`` and ``maxrss_kb`` are its own account."""

    ok: bool
    data: Any = None
    error: str | None = None
    retryable: bool = True
    cpu_ms: int | None = None
    maxrss_kb: int | None = None
    reason: FailureReason | None = None  # what the tool said of its failure: TOOL_REASONS


def check_worker_frame(frame: Mapping[str, Any]) -> Event | Result | SetupError | Share:
    """What a frame from a worker says, or ``MalformedMessage`` saying what is wrong."""
    kind = frame.get("t")
    if kind == "event":
        event_kind, data = frame.get("kind"), frame.get("data")
        if not isinstance(event_kind, str) or not isinstance(data, dict):
            raise MalformedMessage("the worker wrote an event frame without kind and data")
        return Event(event_kind, data)
    if kind == "result":
        ok = frame.get("ok")
        error = frame.get("error")
        if not (ok is True or (ok is False and isinstance(error, str))):
            raise MalformedMessage("the worker wrote a malformed result frame")
        usage = frame.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        return Result(
            ok=ok,
            data=frame.get("data"),
            error=error if isinstance(error, str) else None,
            retryable=frame.get("retryable") is not False,
            cpu_ms=_count(usage.get("cpu_ms")),
            maxrss_kb=_count(usage.get("maxrss_kb")),
            reason=_tool_reason(frame.get("reason")),
        )
    if kind == "setup_error" and isinstance(frame.get("error"), str):
        return SetupError(frame["error"])
    if kind == "share":
        what, data = frame.get("what"), frame.get("data")
        if not isinstance(what, str) or not isinstance(data, dict):
            raise MalformedMessage("the worker wrote a share frame without what and data")
        return Share(what, data)
    raise MalformedMessage(f"the worker wrote a frame of unknown type {str(kind)[:40]!r}")


def _tool_reason(value: Any) -> FailureReason | None:
    """A reason a tool may give for its own failure; anything else is not the worker's to say."""
    return FailureReason(value) if isinstance(value, str) and value in TOOL_REASONS else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


# -- supervisor <-> zygote --

#: The largest control message (a datagram on a SOCK_SEQPACKET socket).
CONTROL_MAX = 64 * 1024


# supervisor -> zygote


class Spawn(TypedDict):
    op: Literal["spawn"]
    profile: str
    count: int


class Stop(TypedDict):
    op: Literal["stop"]


class Narrow(TypedDict):
    """A worker now kept for a session: its mount namespace is to keep that session's mount
    alone (``sandbox._quota.narrow``)."""

    op: Literal["narrow"]
    pid: int
    keep: str


class Adopt(TypedDict):
    """The copies kept worker ``pid`` forked (``sandbox._forks``), to be checked and made
    sandboxes of their own (``sandbox._adoption``): ``copies`` as the worker reported them,
    ``binds`` per copy, its (own directory, worker's directory) pairs, and ``uids`` its
    session's uid (null: it keeps the one it has)."""

    op: Literal["adopt"]
    pid: int
    copies: list[dict[str, int]]
    binds: list[list[list[str]]]
    uids: list[int | None]


# zygote -> supervisor


class Ready(TypedDict):
    op: Literal["ready"]
    layers: dict[str, LayerReport]
    pid: int
    footprint: dict[str, Any]  # footprint.check_footprint reads it


class Forked(TypedDict):
    """A worker, with its job pipe, result pipe and pidfd alongside (``SCM_RIGHTS``)."""

    op: Literal["worker"]
    pid: int
    profile: str


class Exited(TypedDict):
    op: Literal["exit"]
    pid: int
    status: int  # the raw wait status
    cpu_ms: int
    maxrss_kb: int
    oom: bool


class SpawnFailed(TypedDict):
    op: Literal["spawn_failed"]
    profile: str
    error: str


class Copied(TypedDict):
    """One adopted copy of worker ``parent``, its job pipe, result pipe and pidfd alongside
    (``SCM_RIGHTS``)."""

    op: Literal["copied"]
    parent: int
    pid: int


class Adopted(TypedDict):
    """The end of an ``adopt``: every copy sent (``error`` empty), or none, and why."""

    op: Literal["adopted"]
    parent: int
    error: str


class Placed(TypedDict):
    """The copies an ``adopt`` sent (``pid``: the first of them; a worker that goes on beside
    its copies may be forked again before they are placed) are in place (``error`` empty:
    mounted, in their cgroup slots), or were killed, and why; none may run before."""

    op: Literal["placed"]
    parent: int
    pid: int
    error: str


class Fatal(TypedDict):
    op: Literal["fatal"]
    error: str
    traceback: str


#: What a zygote says of its workers (a ``ZygoteListener`` hears these).
AboutWorkers = Forked | Exited | SpawnFailed
ControlMessage = (
    Spawn | Stop | Narrow | Adopt | Ready | AboutWorkers | Copied | Adopted | Placed | Fatal
)


def _declared(message: type) -> tuple[str, dict[str, type]]:
    """A message's op and each other field's type as JSON decodes it (``bool`` is not ``int``
    here; ``dict[...]`` is a ``dict``)."""
    hints = typing.get_type_hints(message)
    (op,) = typing.get_args(hints.pop("op"))
    return op, {name: typing.get_origin(hint) or hint for name, hint in hints.items()}


#: Each control message's fields and their exact types, read from the declarations above.
CONTROL: dict[str, dict[str, type]] = dict(
    _declared(message)
    for message in (
        Spawn,
        Stop,
        Narrow,
        Adopt,
        Ready,
        Forked,
        Exited,
        SpawnFailed,
        Copied,
        Adopted,
        Placed,
        Fatal,
    )
)


def control(message: ControlMessage) -> bytes:
    """A control message (its reader checks it: ``check_control``)."""
    return json.dumps(message).encode()


def check_control(message: Any) -> ControlMessage:
    """``message`` if it is a declared control message with every field of its type."""
    if not isinstance(message, dict) or message.get("op") not in CONTROL:
        op = message.get("op") if isinstance(message, dict) else None
        raise MalformedMessage(f"not a control message: op {str(op)[:40]!r}")
    for name, kind in CONTROL[message["op"]].items():
        value = message.get(name)
        if type(value) is not kind:
            raise MalformedMessage(f"control message {message['op']}: bad {name} {value!r:.40}")
    return cast(ControlMessage, message)
