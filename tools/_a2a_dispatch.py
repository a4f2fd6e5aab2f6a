"""One ``use_a2a_agent`` call: a task sent to one A2A peer with the ``a2a-sdk`` client, followed
to its end, relayed as events while it runs.

Runs inside the sandboxed worker (the zygote imports this module once, see
``A2APeers.preload``). Everything here is per call: the HTTP client and the SDK client are made
for the call and closed before it returns, so nothing of one call reaches the next.

The peer is followed by streaming when its card says it can stream (then its status and artifact
updates become ``status``, ``progress`` and ``artifact`` events, if the call streams), and by
polling the task otherwise; either way the task id is known from the peer's first answer, so
that a task we stop waiting for can be cancelled on the peer: when the peer's ``timeout``
passes, when the call is cancelled or times out in the engine (SIGTERM, see
``ToolPlugin.cancel_grace_s``), and when the exchange fails half-way. A call that ends after
its instruction went out but before that first answer came back still waits for the answer
(within the time it has to cancel) and then cancels: the task may already run on the peer.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, create_client
from a2a.helpers import new_text_message
from a2a.types.a2a_pb2 import (
    AgentCard,
    Artifact,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.json_format import MessageToDict, ParseDict

from a2e.caps.tools._plugin import ToolCancelled
from a2e_engine.tools._checked_httpx import CheckedTransport
from a2e_engine.tools._destinations import DestinationRefused, Destinations

__all__ = ["PeerCall", "PeerFailure", "dispatch", "parse_card"]

Emit = Callable[[str, dict[str, Any]], None]

FINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
}
#: The peer waits for the caller: the call ends, the task stays open on the peer.
PAUSED = {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}
#: States that end the call as a failure, and the ``error_type`` each gets.
FAILURES = {
    TaskState.TASK_STATE_FAILED: "A2ATaskFailedError",
    TaskState.TASK_STATE_CANCELED: "A2ATaskCanceledError",
    TaskState.TASK_STATE_REJECTED: "A2ATaskRejectedError",
    TaskState.TASK_STATE_AUTH_REQUIRED: "A2AAuthRequiredError",
}
#: Largest ``chunk`` of one ``artifact`` event; longer parts go out as several events.
EVENT_CHUNK_CHARS = 32 * 1024
#: Polling a peer that cannot stream: first wait, and the longest.
POLL_FIRST_S, POLL_MAX_S = 0.05, 1.0
#: Of the time a call has to cancel its task, what waiting for the task id leaves to the cancel.
CANCEL_RESERVE_S = 1.0


class PeerFailure(Exception):
    """The call failed; ``error_type`` names how, for the caller to re-plan on."""

    def __init__(self, error_type: str, message: str, task_id: str = "", state: str = "") -> None:
        super().__init__(message)
        self.error_type = error_type
        self.message = message
        self.task_id = task_id
        self.state = state


@dataclass
class PeerCall:
    """What one call needs: the peer (``agent`` is its base URL or its card as JSON), the
    instruction, the policy, and how to report."""

    peer: str
    agent: str | dict[str, Any]
    task: str
    timeout: float
    destinations: Destinations
    task_id: str = ""
    card_path: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    emit: Emit | None = None  # None: the call does not stream
    cancel_budget_s: float = 3.0
    max_result_bytes: int = 1024 * 1024


def parse_card(card: dict[str, Any]) -> AgentCard:
    """An agent card from its JSON form (as served at ``/.well-known/agent-card.json``)."""
    return ParseDict(card, AgentCard(), ignore_unknown_fields=True)


def dispatch(call: PeerCall) -> dict[str, Any]:
    """Run the call to its end in a fresh event loop: the result, or ``PeerFailure``, or
    ``ToolCancelled`` once the peer was asked to cancel."""
    return asyncio.run(_dispatch(call))


async def _dispatch(call: PeerCall) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    me = asyncio.current_task()
    assert me is not None
    # The engine's SIGTERM (the call was cancelled or timed out) becomes a cancellation of this
    # task, so the remote cancel below is sent from a loop that still works.
    worker_handler = signal.getsignal(signal.SIGTERM)
    loop.add_signal_handler(signal.SIGTERM, me.cancel)
    task = RemoteTask(call)
    # The exchange may outlive the call's own timeout by the time it has to cancel the task
    # (RemoteTask.abandon): the peer's first answer may still be on its way then.
    timeout = httpx.Timeout(call.timeout + call.cancel_budget_s, connect=min(call.timeout, 10.0))
    transport = CheckedTransport(call.destinations)
    try:
        async with httpx.AsyncClient(
            transport=transport, headers=call.headers, timeout=timeout
        ) as http:
            client: Client | None = None
            following: asyncio.Task[None] | None = None
            try:
                async with asyncio.timeout(call.timeout):
                    card = await _card(call, http)
                    streams = bool(card.capabilities.streaming)
                    config = ClientConfig(streaming=streams, polling=not streams, httpx_client=http)
                    client = await create_client(card, client_config=config)
                    # Shielded: when the call ends, the exchange goes on until the peer's first
                    # answer names the task to cancel (RemoteTask.abandon).
                    following = asyncio.ensure_future(_follow(client, call, task))
                    await asyncio.shield(following)
            except TimeoutError:
                note = await task.abandon(client, following)
                raise PeerFailure(
                    "A2ATimeoutError",
                    f"{call.peer} did not finish within {call.timeout:g} s{note}",
                    task.task_id,
                    task.state_name,
                ) from None
            except asyncio.CancelledError:
                await task.abandon(client, following)
                raise ToolCancelled(
                    "the call was cancelled; the peer was asked to cancel"
                ) from None
            except PeerFailure:
                raise
            except Exception as exc:
                note = await task.abandon(client, following)
                raise _failure_of(exc, call.peer, task, note) from None
            finally:
                if client is not None:
                    with contextlib.suppress(Exception):
                        await client.close()
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        if worker_handler is not None:  # asyncio leaves SIG_DFL behind
            signal.signal(signal.SIGTERM, worker_handler)
    return task.result()


async def _card(call: PeerCall, http: httpx.AsyncClient) -> AgentCard:
    if isinstance(call.agent, dict):
        return parse_card(call.agent)
    if call.card_path:
        resolver = A2ACardResolver(http, call.agent, agent_card_path=call.card_path)
    else:
        resolver = A2ACardResolver(http, call.agent)
    return await resolver.get_agent_card()


async def _follow(client: Client, call: PeerCall, task: RemoteTask) -> None:
    """Send the instruction; take the answers until the task ends or waits for us."""
    message = new_text_message(text=call.task, task_id=call.task_id or None, role=Role.ROLE_USER)
    task.sent = True  # from here on the peer may have started a task
    async for response in client.send_message(SendMessageRequest(message=message)):
        task.take(response)
        if task.settled:
            break
    delay = POLL_FIRST_S
    while not task.settled:  # a peer that cannot stream, or a stream that ended early
        if not task.task_id:
            raise PeerFailure("A2AProtocolError", "the peer answered with neither task nor message")
        await asyncio.sleep(delay)
        delay = min(delay * 2, POLL_MAX_S)
        task.take_task(await client.get_task(GetTaskRequest(id=task.task_id)))


def _failure_of(exc: Exception, peer: str, task: RemoteTask, note: str) -> PeerFailure:
    """The failure as the caller sees it: the innermost cause that says most."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, DestinationRefused):
            return PeerFailure("DestinationRefused", f"{peer}: {cause}", task.task_id)
        cause = cause.__cause__ or cause.__context__
    message = str(exc) or type(exc).__name__
    return PeerFailure(type(exc).__name__, f"{message}{note}", task.task_id, task.state_name)


@dataclass
class _ArtifactSoFar:
    artifact_id: str
    name: str
    description: str
    parts: list[dict[str, Any]] = field(default_factory=list)


class RemoteTask:
    """What the peer has said about the task, merged from the answers as they come, and the
    events that relay them."""

    def __init__(self, call: PeerCall) -> None:
        self.call = call
        self.task_id = ""
        self.context_id = ""
        self.state: int = TaskState.TASK_STATE_UNSPECIFIED
        self.status_text = ""
        self.reply: Message | None = None
        self.artifacts: dict[str, _ArtifactSoFar] = {}
        self.sent = False  # the instruction went out
        self.identified = asyncio.Event()  # the peer's answers named the task

    @property
    def settled(self) -> bool:
        return self.reply is not None or self.state in FINAL or self.state in PAUSED

    @property
    def state_name(self) -> str:
        return state_name(self.state) if self.task_id else ""

    # -- taking answers --

    def take(self, response: StreamResponse) -> None:
        kind = response.WhichOneof("payload")
        if kind == "task":
            self.take_task(response.task)
        elif kind == "message":
            self.reply = response.message
        elif kind == "status_update":
            self._take_status_update(response.status_update)
        elif kind == "artifact_update":
            self._take_artifact_update(response.artifact_update)

    def _identify(self, task_id: str) -> None:
        self.task_id = self.task_id or task_id
        if self.task_id:
            self.identified.set()

    def take_task(self, task: Task) -> None:
        first = not self.task_id
        self.task_id, self.context_id = task.id, task.context_id
        self._identify(task.id)
        self.artifacts = {}
        for artifact in task.artifacts:
            self._merge(artifact, append=False)
        changed = self._take_status(task.status)
        if first or changed:
            self._emit_status(f"task {task.id}" if first else "")

    def _take_status_update(self, update: TaskStatusUpdateEvent) -> None:
        self._identify(update.task_id)
        self._take_status(update.status)
        self._emit_status("")
        self._emit_progress(MessageToDict(update.metadata) if update.HasField("metadata") else {})

    def _take_status(self, status: TaskStatus) -> bool:
        text = message_text(status.message) if status.HasField("message") else ""
        changed = (status.state, text) != (self.state, self.status_text)
        self.state, self.status_text = status.state, text or self.status_text
        return changed

    def _take_artifact_update(self, update: TaskArtifactUpdateEvent) -> None:
        self._identify(update.task_id)
        artifact = update.artifact
        self._merge(artifact, append=update.append)
        if self.call.emit is None:
            return
        name = artifact.name or artifact.artifact_id or "artifact"
        for index, part in enumerate(artifact.parts):
            last_part = index == len(artifact.parts) - 1
            mime, chunk = part_chunk(part)
            size = EVENT_CHUNK_CHARS
            pieces = [chunk[i : i + size] for i in range(0, len(chunk), size)] or [""]
            for number, piece in enumerate(pieces):
                final = update.last_chunk and last_part and number == len(pieces) - 1
                self.call.emit(
                    "artifact", {"name": name, "mime": mime, "chunk": piece, "final": final}
                )

    def _merge(self, artifact: Artifact, append: bool) -> None:
        key = artifact.artifact_id or artifact.name or str(len(self.artifacts))
        parts = [part_json(part) for part in artifact.parts]
        known = self.artifacts.get(key)
        if append and known is not None:
            known.parts.extend(parts)
        else:
            self.artifacts[key] = _ArtifactSoFar(key, artifact.name, artifact.description, parts)

    # -- relaying --

    def _emit_status(self, detail: str) -> None:
        if self.call.emit is None:
            return
        line = f"{self.call.peer}: {state_name(self.state)}"
        for extra in (detail, self.status_text):
            if extra:
                line += f" - {extra}"
        self.call.emit("status", {"message": line[:1000]})

    def _emit_progress(self, metadata: dict[str, Any]) -> None:
        """Peers say how far they are in the status update's metadata: ``pct`` (0-100) or
        ``progress`` (a fraction, 0-1); A2A itself has no field for it."""
        if self.call.emit is None:
            return
        pct: float | None = None
        if isinstance(metadata.get("pct"), int | float):
            pct = float(metadata["pct"])
        elif isinstance(metadata.get("progress"), int | float):
            pct = float(metadata["progress"]) * 100
        if pct is not None and pct == pct:  # not NaN
            pct = min(100.0, max(0.0, pct))
            self.call.emit("progress", {"pct": int(pct), "message": self.status_text[:1000]})

    # -- ending --

    async def abandon(self, client: Client | None, following: asyncio.Task[None] | None) -> str:
        """Ask the peer to cancel a task we stop waiting for; what happened, for the message.

        ``following`` is the exchange with the peer, still running if the call ended before
        it did. If the instruction went out and no answer has named the task yet, the peer may
        be running it already: the answer is awaited first, within ``cancel_budget_s``, which
        also bounds the cancel itself."""
        loop = asyncio.get_running_loop()
        ends = loop.time() + self.call.cancel_budget_s
        if following is not None and not following.done():
            if self.sent and not self.task_id:
                named = asyncio.ensure_future(self.identified.wait())
                await asyncio.wait(
                    [named, following],
                    timeout=max(0.0, ends - CANCEL_RESERVE_S - loop.time()),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                named.cancel()
            following.cancel()
            await asyncio.wait([following])
        if client is None or not self.task_id or self.settled:
            return ""
        try:
            cancelled = await asyncio.wait_for(
                client.cancel_task(CancelTaskRequest(id=self.task_id)),
                max(CANCEL_RESERVE_S, ends - loop.time()),
            )
        except Exception as exc:
            return f"; cancelling its task {self.task_id} failed ({type(exc).__name__}: {exc})"
        self.state = cancelled.status.state
        return f"; its task {self.task_id} was cancelled (now {state_name(self.state)})"

    def result(self) -> dict[str, Any]:
        """The call's data, or ``PeerFailure`` for a task that ended badly."""
        peer = self.call.peer
        if self.reply is not None:
            data: dict[str, Any] = {
                "a2a_agent": peer,
                "state": "replied",
                "text": message_text(self.reply),
                "parts": [part_json(p) for p in self.reply.parts],
            }
            if self.task_id:
                data["task_id"] = self.task_id
            return fit(data, self.call.max_result_bytes)
        name = state_name(self.state)
        if self.state in FAILURES:
            message = self.status_text or f"the peer's task ended {name}"
            raise PeerFailure(FAILURES[self.state], message, self.task_id, name)  # type: ignore[index]
        data = {"a2a_agent": peer, "state": name, "task_id": self.task_id}
        if self.context_id:
            data["context_id"] = self.context_id
        if self.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            data["text"] = self.status_text or "the peer needs more input"
            data["resume"] = (
                f"call use_a2a_agent again with name={peer!r}, task_id={self.task_id!r} and "
                "the requested information as task"
            )
            return data
        texts = [text for a in self.artifacts.values() if (text := artifacts_text(a.parts))]
        data["text"] = "\n\n".join(texts) if texts else self.status_text
        data["artifacts"] = [
            {"name": a.name, "artifact_id": a.artifact_id, "parts": a.parts}
            | ({"description": a.description} if a.description else {})
            for a in self.artifacts.values()
        ]
        if self.status_text:
            data["message"] = self.status_text
        return fit(data, self.call.max_result_bytes)


def state_name(state: int) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` -> ``input-required``."""
    try:
        name = TaskState.Name(state)  # type: ignore[arg-type]
    except ValueError:
        return f"unknown-{state}"
    return name.removeprefix("TASK_STATE_").lower().replace("_", "-")


def message_text(message: Message) -> str:
    return "\n".join(part.text for part in message.parts if part.HasField("text"))


def artifacts_text(parts: list[dict[str, Any]]) -> str:
    return "".join(part["text"] for part in parts if part.get("kind") == "text")


def part_json(part: Part) -> dict[str, Any]:
    """One part as plain JSON; bytes as base64."""
    kind = part.WhichOneof("content")
    data: dict[str, Any] = {"kind": kind or "empty"}
    if kind == "text":
        data["text"] = part.text
    elif kind == "raw":
        data["base64"] = base64.b64encode(part.raw).decode()
    elif kind == "url":
        data["url"] = part.url
    elif kind == "data":
        data["data"] = MessageToDict(part.data)
    if part.media_type:
        data["mime"] = part.media_type
    if part.filename:
        data["filename"] = part.filename
    return data


def part_chunk(part: Part) -> tuple[str, str]:
    """The ``mime`` and ``chunk`` of an ``artifact`` event for one part."""
    kind = part.WhichOneof("content")
    if kind == "text":
        return part.media_type or "text/plain", part.text
    if kind == "raw":
        mime = part.media_type or "application/octet-stream"
        return f"{mime};base64", base64.b64encode(part.raw).decode()
    if kind == "url":
        return "text/uri-list", part.url
    if kind == "data":
        return part.media_type or "application/json", json.dumps(MessageToDict(part.data))
    return part.media_type or "text/plain", ""


def fit(data: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """``data`` cut to ``max_bytes`` of JSON by shortening its longest strings; marked
    ``truncated`` when anything was cut."""
    limit = max_bytes
    while len(json.dumps(data)) > max_bytes and limit > 64:
        limit //= 2
        data = _cut_strings(data, limit)
        data["truncated"] = True
    return data


def _cut_strings(value: Any, limit: int) -> Any:
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + f"... [{len(value) - limit} characters cut]"
    if isinstance(value, dict):
        return {key: _cut_strings(item, limit) for key, item in value.items()}
    if isinstance(value, list):
        return [_cut_strings(item, limit) for item in value]
    return value
