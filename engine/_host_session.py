"""``LocalSession``: one session of the engine, typed, with no protocol in between.

Every front-end works through it: the A2E wire connection (``engine._connection``) opens one per
handshake; REST, SandboxFusion's ``/run_code`` and MCP ask the host for one directly
(``Host.open_session``), with no handshake and no message routing, and a request that keeps
nothing (``stateless``) takes one that was prepared ahead (``engine._session_pool``).

A call is admitted here (``PendingCalls``: the engine's bound on calls pending, and the session's
own), gets its one deadline from the moment it arrived, and runs as a task of its own
(``engine._calls.run_call``), so that a session runs many at once. Its events go to whoever
started it as they come; closing the session cancels what still runs and ends the session once
the last call is done.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from a2e._messages import A2ECapability, A2EError, A2EMessage, ErrorCode
from a2e.caps.tools._models import (
    ToolCallRequest,
    ToolCallResponse,
    ToolErrorCode,
    ToolEvent,
    ToolListRequest,
    ToolListResponse,
    ToolResult,
)
from a2e_engine.engine._calls import CallContext, run_call
from a2e_engine.engine._host import Bursts, Refused
from a2e_engine.engine._loop import EngineLoop
from a2e_engine.engine._policy import Policy, check_policies
from a2e_engine.engine._session import SessionState
from a2e_engine.engine._sessions import Sessions
from a2e_engine.sandbox._call_input import CallInput
from a2e_engine.sandbox._deadline import Deadline
from a2e_engine.sandbox._pool import StopSignal

__all__ = [
    "SUPPORTED_CAPABILITIES",
    "CallScope",
    "LocalSession",
    "PendingCalls",
    "Services",
    "response_to",
]

log = logging.getLogger("a2e.host")

#: What a session may be granted.
SUPPORTED_CAPABILITIES = frozenset(capability.value for capability in A2ECapability)


class PendingCalls:
    """Calls pending in the whole engine, against ``Admission.max_pending_calls``: past it a
    call is refused at once (retryably) instead of queueing without bound; and one tenant's
    (``SessionState.tenant_key``) against half of it, so that the others always find room."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0
        self.by_tenant: collections.Counter[str] = collections.Counter()

    @property
    def per_tenant(self) -> int:
        return max(1, (self.limit + 1) // 2)

    def admit(self, tenant: str = "") -> bool:
        if self.count >= self.limit or self.by_tenant[tenant] >= self.per_tenant:
            return False
        self.count += 1
        self.by_tenant[tenant] += 1
        return True

    def release(self, tenant: str = "") -> None:
        self.count -= 1
        self.by_tenant[tenant] -= 1
        if self.by_tenant[tenant] <= 0:
            del self.by_tenant[tenant]


@dataclass(frozen=True)
class Services:
    """What a session and a connection use of the engine, handed over explicitly."""

    calls: CallContext
    policy: Policy  # the engine's own, for every session
    sessions: Sessions
    pending: PendingCalls
    loop: EngineLoop


@dataclass
class _RunningCall:
    task: asyncio.Task[ToolResult]
    cancelled: StopSignal


def _refusal(code: str, message: str, req_id: str = "", retryable: bool = False) -> Refused:
    return Refused(A2EError(req_id=req_id, code=code, message=message, retryable=retryable))


class CallScope:
    """Where request ids must differ and the calls in flight are bounded
    (``admission.max_calls_per_connection``): a connection's, whose sessions share one since
    its replies are routed by request id, or a lone session's (``Host.open_session``)."""

    def __init__(self, name: str) -> None:
        """``name``: what refusals call it ("connection", "session")."""
        self.name = name
        self.ids: set[str] = set()


class LocalSession:
    """Implements ``engine._host.HostSession``; every method runs on the engine's loop."""

    def __init__(
        self,
        services: Services,
        session: SessionState,
        on_closed: Callable[[LocalSession], None] | None = None,
        end: Callable[[SessionState, list[asyncio.Task[Any]]], None] | None = None,
        scope: CallScope | None = None,
    ) -> None:
        """``end``: what becomes of the session once it is closed and its calls are done
        (by default it ends; a pooled one goes back to its pool); ``scope``: the connection's
        when it has one, else its own."""
        self.services = services
        self.session = session
        self._end = end
        self.session_id = session.id
        self._on_closed = on_closed
        self._scope = scope if scope is not None else CallScope("session")
        self._calls: dict[str, _RunningCall] = {}
        self.closed = False
        #: Why the engine ended it (``evict``), for the calls that come after.
        self.ended_because = ""
        #: Told why, when the engine ends it (a holder elsewhere: ``cluster._served``).
        self.on_evicted: list[Callable[[str], None]] = []
        session.evict = self.evict

    @property
    def workspace(self) -> str:
        return self.session.workspace

    def in_flight(self) -> list[asyncio.Task[ToolResult]]:
        return [running.task for running in self._calls.values()]

    def running(self, call_id: str) -> bool:
        """Whether a call of that id runs in this session."""
        return call_id in self._calls

    # -- list --

    def tools(self, request: ToolListRequest) -> ToolListResponse:
        """The tools this session may see that ``request`` selects; ``Refused``
        (``tool_denied``) without the ``tools`` capability."""
        session = self.session
        if A2ECapability.TOOLS not in session.capabilities:
            raise _refusal(
                ToolErrorCode.TOOL_DENIED,
                "this session did not negotiate the 'tools' capability",
                request.id,
            )
        tools = [
            tool
            for tool in self.services.calls.registry.select(request)
            if check_policies(session.policies, session, tool.name) is None
        ]
        return ToolListResponse(req_id=request.id, tools=tools)

    async def list_tools(self, request: ToolListRequest) -> ToolListResponse:
        return self.tools(request)

    # -- calls --

    def start(
        self,
        request: ToolCallRequest,
        on_event: Callable[[ToolEvent], None],
        given: CallInput | None = None,
    ) -> asyncio.Task[ToolResult]:
        """Admit the call and start it; its events go to ``on_event``, its result is the
        task's; ``given``: its input after its start. ``Refused`` (``overloaded``, retryable)
        past the engine's or the session's bound on calls, while the session is paused, or
        once it is closed."""
        config = self.services.calls.config
        if self.closed:
            why = f": {self.ended_because}" if self.ended_because else ""
            raise _refusal(ErrorCode.UNKNOWN_SESSION, f"the session has ended{why}", request.id)
        if self.session.paused:
            raise _refusal(
                ErrorCode.OVERLOADED, "the session is paused; resume it first", request.id
            )
        scope = self._scope
        if request.id in scope.ids:
            raise _refusal(
                ErrorCode.DUPLICATE_REQUEST,
                f"a call with id {request.id!r} is already in flight in this {scope.name}",
                request.id,
            )
        most = config.admission.max_calls_per_connection
        if len(scope.ids) >= most:
            raise _refusal(
                ErrorCode.OVERLOADED,
                f"this {scope.name} already has {most} calls in flight; wait for one to end",
                request.id,
                retryable=True,
            )
        pending, tenant = self.services.pending, self.session.tenant_key
        if not pending.admit(tenant):
            raise _refusal(
                ErrorCode.OVERLOADED,
                f"{pending.count} calls are pending, {pending.by_tenant[tenant]} of them of "
                f"this client (at most {pending.per_tenant}); try again later",
                request.id,
                retryable=True,
            )
        # The call's one deadline, from the moment it arrived, within the engine's cap.
        loop = asyncio.get_running_loop()
        deadline = Deadline.after(min(request.timeout, config.max_timeout), loop)
        cancelled = StopSignal()
        task = loop.create_task(self._run(request, deadline, on_event, cancelled, tenant, given))
        self._calls[request.id] = _RunningCall(task, cancelled)
        scope.ids.add(request.id)
        # Still in flight until the callbacks its caller adds next have run (the reply sent):
        # a connection that ends meanwhile waits for it rather than dropping its answer.
        task.add_done_callback(lambda _: self._ended(request.id))
        return task

    def _ended(self, call_id: str) -> None:
        self._calls.pop(call_id, None)
        self._scope.ids.discard(call_id)

    async def _run(
        self,
        request: ToolCallRequest,
        deadline: Deadline,
        on_event: Callable[[ToolEvent], None],
        cancelled: StopSignal,
        tenant: str,
        given: CallInput | None,
    ) -> ToolResult:
        try:
            return await run_call(
                self.services.calls, self.session, request, deadline, on_event, cancelled, given
            )
        except Exception:
            log.exception("call %s (%s) failed inside the engine", request.id, request.tool_name)
            raise
        finally:
            self.services.pending.release(tenant)

    async def call(self, request: ToolCallRequest, given: CallInput | None = None) -> Bursts:
        """The call's events in the bursts they came in (what a worker wrote between two reads
        of its pipe), the last burst ending with its ``ToolResult``. ``Refused`` when it is
        turned away, or when the engine failed it (``internal_error``). A caller that stops
        iterating before the result cancels the call."""
        arrived: asyncio.Queue[ToolEvent | None] = asyncio.Queue()
        task = self.start(request, arrived.put_nowait, given)
        task.add_done_callback(lambda _: arrived.put_nowait(None))  # after its last event
        try:
            while True:
                batch: list[ToolEvent | ToolResult] = []
                event = await arrived.get()
                while event is not None:
                    batch.append(event)
                    if arrived.empty():
                        break
                    event = arrived.get_nowait()
                if event is None:  # the end: every event was queued before it
                    batch.append(_result_of(task, request))
                    yield batch
                    return
                yield batch
        finally:
            if not task.done():
                self.cancel(request.id)

    def cancel(self, call_id: str) -> bool:
        """End the call as its timeout would (its worker killed, its result still comes);
        False if no such call runs in this session."""
        running = self._calls.get(call_id)
        if running is None:
            return False
        running.cancelled.set()
        return True

    # -- the end --

    def evict(self, why: str) -> None:
        """The engine ends the session (``engine._memory_bound.PressureRelief``): ``close``,
        and ``why`` for its client's next call."""
        if not self.closed:
            self.ended_because = why
            for running in self._calls.values():
                running.cancelled.why = why
            self.close()
            for tell in self.on_evicted:
                tell(why)

    def close(self) -> None:
        """Cancel what still runs, and end the session once its last call is done
        (idempotent)."""
        if self.closed:
            return
        self.closed = True
        self.session.evict = None  # a pooled session's next request sets its own
        for running in self._calls.values():
            running.cancelled.set()
        calls: list[asyncio.Task[Any]] = list(self.in_flight())
        if self._end is not None:
            self._end(self.session, calls)
        else:
            self.services.sessions.end(self.session, after=calls)
        if self._on_closed is not None:
            self._on_closed(self)


def response_to(request: ToolCallRequest, task: asyncio.Task[ToolResult]) -> A2EMessage:
    """A started call's reply once its task is done (``LocalSession.start``): its response,
    or an ``error`` where the engine itself failed it (logged where it ran)."""
    if task.cancelled():
        return A2EError(
            req_id=request.id,
            code=ErrorCode.INTERNAL,
            message="internal error: the call was cancelled",
        )
    failure = task.exception()
    if failure is not None:
        return A2EError(
            req_id=request.id,
            code=ErrorCode.INTERNAL,
            message=f"internal error: {type(failure).__name__}: {failure}",
        )
    return ToolCallResponse(req_id=request.id, data=task.result())


def _result_of(task: asyncio.Task[ToolResult], request: ToolCallRequest) -> ToolResult:
    """The call's result; an exception (the engine's own bug) as ``internal_error``."""
    try:
        return task.result()
    except Exception as exc:
        raise _refusal(
            ErrorCode.INTERNAL, f"internal error: {type(exc).__name__}: {exc}", request.id
        ) from exc
