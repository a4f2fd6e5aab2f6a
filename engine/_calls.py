"""One tool call from request to ``ToolResult``: gate, validate, run (with retries), report.

Gating and validation happen before any worker is touched, so a denied or malformed call costs
nothing. Events the tool emits are validated here (a bad one fails the call: the worker is
hostile), numbered ``seq`` 0, 1, 2, ... across attempts, and either streamed at once or kept for
the result. Every call, whatever its fate, leaves one line in the audit trail.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from a2e import _jsonwire as jsonwire
from a2e._messages import A2ECapability
from a2e.caps.tools._arguments import decode_json_text
from a2e.caps.tools._models import (
    EventKind,
    FailureReason,
    ToolCallRequest,
    ToolErrorCode,
    ToolEvent,
    ToolResult,
    ToolUsage,
)
from a2e.caps.tools._reasons import ENDED_BY_WHAT_RAN
from a2e_engine.engine._audit import AuditTrail
from a2e_engine.engine._config import EngineConfig
from a2e_engine.engine._policy import check_policies
from a2e_engine.engine._registry import RegisteredTool, ToolRegistry
from a2e_engine.engine._resident_workers import RESIDENT_TMP, ResidentWorkers
from a2e_engine.engine._retry import run_with_retries
from a2e_engine.engine._session import SessionState
from a2e_engine.sandbox._call_input import CallInput
from a2e_engine.sandbox._deadline import Deadline
from a2e_engine.sandbox._messages import Job
from a2e_engine.sandbox._pool import StopSignal, WorkerPool
from a2e_engine.sandbox._run import Outcome

__all__ = ["CallContext", "run_call"]

log = logging.getLogger("a2e.engine")
T = TypeVar("T")


@dataclass(frozen=True)
class _Broken:
    """A plugin hook that raised (or answered what it may not): its exception's type."""

    kind: str


def _ask_plugin(tool: RegisteredTool, hook: str, ask: Callable[[], T]) -> T | _Broken:
    """What ``ask`` (a plugin hook, with its answer checked) returns, or ``_Broken``, logged:
    plugin code runs here in the supervisor and must not break it; each caller says what a
    broken hook means for the call."""
    try:
        return ask()
    except Exception as exc:
        log.warning("%s: %s failed: %s: %s", tool.name, hook, type(exc).__name__, exc)
        return _Broken(type(exc).__name__)


_MAX_PARTIAL_CHARS = 1_000_000


@dataclass
class CallContext:
    """What a call needs from the engine, passed explicitly rather than reached for."""

    config: EngineConfig
    registry: ToolRegistry
    pool: WorkerPool
    audit: AuditTrail | None
    private_tmp: bool = False  # workers bring their own /tmp (see sandbox._mount_template)
    residents: ResidentWorkers | None = None  # the workers sessions keep (resident tools)


class CallEvents:
    """Numbers, validates, streams or keeps the events of one call; collects partial output."""

    def __init__(self, request: ToolCallRequest, send: Callable[[ToolEvent], None], keep_max: int):
        self.request = request
        self.send = send
        self.keep_max = keep_max
        self.seq = 0
        self.kept: list[ToolEvent] = []
        self.dropped = 0
        self.partial: dict[str, list[str]] = {}
        self._partial_chars = 0

    def on_event(self, kind: str, data: dict[str, Any]) -> None:
        """Called by the pool for each event frame; raises ValueError for a bad one."""
        event = ToolEvent(kind=kind, data=data, req_id=self.request.id, seq=self.seq)  # type: ignore[arg-type]
        self.seq += 1
        if event.kind == EventKind.ARTIFACT and self._partial_chars < _MAX_PARTIAL_CHARS:
            chunk = str(event.data["chunk"])[: _MAX_PARTIAL_CHARS - self._partial_chars]
            self.partial.setdefault(str(event.data["name"]), []).append(chunk)
            self._partial_chars += len(chunk)
        if self.request.streaming:
            self.send(event)
        elif len(self.kept) < self.keep_max:
            self.kept.append(event)
        else:
            self.dropped += 1

    def status(self, message: str) -> None:
        """An engine-made status event (e.g. a retry), numbered in the same sequence."""
        self.on_event(EventKind.STATUS, {"message": message})

    def partial_output(self) -> dict[str, str] | None:
        return {name: "".join(chunks) for name, chunks in self.partial.items()} or None


class Refusal(NamedTuple):
    """Why a call was not run at all, as its result will say."""

    code: ToolErrorCode
    reason: FailureReason
    error: str
    data: Any = None


def _failure(name: str, refusal: Refusal, started: float) -> ToolResult:
    return ToolResult(
        success=False,
        tool_name=name,
        data=refusal.data,
        error=refusal.error,
        error_code=refusal.code,
        reason=refusal.reason,
        duration_ms=int((time.monotonic() - started) * 1000),
    )


def _gate(
    ctx: CallContext, session: SessionState, request: ToolCallRequest, tool: RegisteredTool | None
) -> Refusal | None:
    if A2ECapability.TOOLS not in session.capabilities:
        return Refusal(
            ToolErrorCode.TOOL_DENIED,
            FailureReason.POLICY_DENIED,
            "this session did not negotiate the 'tools' capability",
        )
    if tool is None:
        names = sorted(t.name for t in ctx.registry.definitions)
        hint = ", ".join(names[:20]) + (" ..." if len(names) > 20 else "")
        return Refusal(
            ToolErrorCode.UNKNOWN_TOOL,
            FailureReason.UNKNOWN_TOOL,
            f"unknown tool {request.tool_name!r}; available: {hint}",
        )
    reason = check_policies(session.policies, session, tool.name)
    if reason:
        return Refusal(ToolErrorCode.TOOL_DENIED, FailureReason.POLICY_DENIED, reason)
    try:
        encoded = jsonwire.dumps(request.arguments)
    except (TypeError, ValueError, RecursionError) as exc:
        return Refusal(
            ToolErrorCode.TOOL_ERROR,
            FailureReason.INVALID_ARGUMENTS,
            f"arguments must be plain JSON values: {exc}",
        )
    room = ctx.config.output.max_frame - JOB_OVERHEAD_BYTES
    if len(encoded) > room:  # the job would not fit the frame the worker reads it from
        return Refusal(
            ToolErrorCode.TOOL_ERROR,
            FailureReason.INVALID_ARGUMENTS,
            f"arguments of {len(encoded)} bytes exceed the limit of {room} bytes per call",
        )
    problems = tool.arguments.problems(request.arguments)
    if problems:
        return _invalid_arguments(tool, request.arguments, problems)
    return None


def _invalid_arguments(
    tool: RegisteredTool, arguments: dict[str, Any], problems: list[str]
) -> Refusal:
    """The plugin's own shape for the failure; the plain one if the plugin's hook breaks."""
    plain = f"invalid arguments for {tool.name}: " + "; ".join(problems)

    def ask() -> tuple[str, Any]:
        failure = tool.plugin.invalid_arguments(tool.name, arguments, problems)
        json.dumps(failure.data, allow_nan=False)
        return str(failure), failure.data

    said = _ask_plugin(tool, "invalid_arguments", ask)
    if isinstance(said, _Broken):
        return Refusal(ToolErrorCode.TOOL_ERROR, FailureReason.INVALID_ARGUMENTS, plain)
    error, data = said
    return Refusal(ToolErrorCode.TOOL_ERROR, FailureReason.INVALID_ARGUMENTS, error or plain, data)


def _secrets(tool: RegisteredTool, arguments: dict[str, Any]) -> dict[str, str] | Refusal:
    def ask() -> dict[str, str]:
        secrets = tool.plugin.secrets_for(tool.name, arguments)
        if not isinstance(secrets, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in secrets.items()
        ):
            raise TypeError(f"secrets_for returned {type(secrets).__name__}, not dict[str, str]")
        if len(json.dumps(secrets)) > MAX_SECRETS_BYTES:
            raise ValueError(f"secrets_for returned more than {MAX_SECRETS_BYTES} bytes")
        return secrets

    secrets = _ask_plugin(tool, "secrets_for", ask)
    if isinstance(secrets, _Broken):
        return Refusal(
            ToolErrorCode.TOOL_ERROR,
            FailureReason.PLUGIN_ERROR,
            f"the {tool.name} plugin could not prepare the call ({secrets.kind})",
        )
    return secrets


#: However long a plugin asks for, a cancelled call is killed after this many seconds.
MAX_CANCEL_GRACE_S = 10.0
#: Room in a job frame for everything but the arguments (paths, ids, flags, secrets).
JOB_OVERHEAD_BYTES = 64 * 1024
#: What ``secrets_for`` may put in a job: credentials, not payloads.
MAX_SECRETS_BYTES = 16 * 1024


async def run_call(
    ctx: CallContext,
    session: SessionState,
    request: ToolCallRequest,
    deadline: Deadline,
    send_event: Callable[[ToolEvent], None],
    cancelled: StopSignal,
    given: CallInput | None = None,
) -> ToolResult:
    """The call's result, within ``deadline`` (made where the call arrived); ``given``: its
    input after its start, for a tool that reads some (never retried: what it read is gone,
    nor run in a session's kept worker)."""
    started = time.monotonic()
    tool = ctx.registry.get(request.tool_name)
    if tool is not None:
        decoded = decode_json_text(tool.definition.input_parameters, request.arguments)
        if decoded is not None:
            request = request.model_copy(update={"arguments": decoded})
    refused = _gate(ctx, session, request, tool)
    secrets = _secrets(tool, request.arguments) if tool is not None and refused is None else {}
    if isinstance(secrets, Refusal):
        refused, secrets = secrets, {}
    if refused is not None:
        result = _failure(request.tool_name, refused, started)
        _audit(ctx, session, request, result, outcome="refused")
        return result
    assert tool is not None
    events = CallEvents(request, send_event, ctx.config.max_result_events)
    loop = asyncio.get_running_loop()
    attempts = 0
    deadline = _tightened(tool, request.arguments, deadline, loop)
    resident = tool.name in tool.plugin.resident_tools and ctx.residents is not None
    resident = resident and given is None

    async def attempt() -> Outcome:
        nonlocal attempts
        attempts += 1
        call_id = f"{attempts}-{os.urandom(16).hex()}"
        # A worker with its own /tmp (a tmpfs that dies with it) needs nothing from us; a
        # resident worker's directory lasts as long as its session.
        if ctx.private_tmp:
            tmp_dir = "/tmp"
        elif resident:
            tmp_dir = os.path.join(session.tmp_root, RESIDENT_TMP)
            with contextlib.suppress(FileExistsError):
                session.make_call_dir(RESIDENT_TMP)
        else:
            tmp_dir = session.make_call_dir(call_id)
        job = Job(
            zygote=tool.zygote,
            plugin=tool.zygote_index,
            tool=tool.name,
            arguments=request.arguments,
            profile=tool.profile,
            workspace=session.workspace,
            tmp_dir=tmp_dir,
            streaming=request.streaming,
            read_roots=list(ctx.config.read_roots),
            call_id=call_id,
            uid=session.uid,
            cancel_grace_s=min(float(tool.plugin.cancel_grace_s), MAX_CANCEL_GRACE_S),
            secrets=secrets,
            tenant=session.tenant_key,
        )
        if session.home:
            job["home"] = session.home
        try:
            if resident:
                assert ctx.residents is not None
                outcome = await ctx.residents.run(
                    session.id, job, deadline, events.on_event, cancelled, session.lasting
                )
                return outcome
            outcome = await ctx.pool.run(job, deadline, events.on_event, cancelled, given)
            if outcome.reason in ENDED_BY_WHAT_RAN and not tool.plugin.retry_crashes:
                outcome.retryable = False
            return outcome
        finally:
            if not ctx.private_tmp and not resident:
                # In the background: a tool that filled its tmp with a million files must not
                # hold up its reply (the directory is private to this attempt, already unused).
                loop.run_in_executor(None, session.remove_call_dir, call_id)

    def on_retry(next_attempt: int, outcome: Outcome) -> None:
        with contextlib.suppress(ValueError):
            events.status(f"attempt {next_attempt - 1} failed ({outcome.error}); retrying")

    if tool.definition.idempotent and ctx.config.retry.max_attempts > 1 and given is None:
        outcome = await run_with_retries(attempt, ctx.config.retry, deadline, cancelled, on_retry)
    else:
        outcome = await attempt()
    result = _to_result(tool.name, outcome, events, attempts, started)
    result = _accepted(tool, request.arguments, secrets, result)
    _audit(ctx, session, request, result, outcome=outcome.reason or "ok")
    return result


def _tightened(
    tool: RegisteredTool,
    arguments: dict[str, Any],
    deadline: Deadline,
    loop: asyncio.AbstractEventLoop,
) -> Deadline:
    """The call's deadline, or the plugin's time limit for it if that comes first."""

    def ask() -> float | None:
        limit = tool.plugin.time_limit_for(tool.name, arguments)
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int | float) or not limit > 0
        ):
            raise ValueError(f"time_limit_for returned {limit!r}, not a positive number")
        return limit

    limit = _ask_plugin(tool, "time_limit_for", ask)
    if limit is None or isinstance(limit, _Broken) or limit >= deadline.remaining(loop):
        return deadline
    return Deadline.after(float(limit), loop)


def _accepted(
    tool: RegisteredTool,
    arguments: dict[str, Any],
    secrets: dict[str, str],
    result: ToolResult,
) -> ToolResult:
    """The plugin's last word on the result (``ToolPlugin.accept_result``); a hook that breaks
    fails the call rather than passing on what it could not check."""

    def ask() -> ToolResult:
        accepted = tool.plugin.accept_result(tool.name, arguments, secrets, result)
        if not isinstance(accepted, ToolResult):
            raise TypeError(f"accept_result returned {type(accepted).__name__}, not ToolResult")
        return accepted

    accepted = _ask_plugin(tool, "accept_result", ask)
    if not isinstance(accepted, _Broken):
        return accepted
    return result.model_copy(
        update={
            "success": False,
            "data": None,
            "error": f"the {tool.name} plugin could not check the result ({accepted.kind})",
            "error_code": ToolErrorCode.TOOL_ERROR,
            "reason": FailureReason.PLUGIN_ERROR,
        }
    )


def _to_result(
    name: str,
    outcome: Outcome,
    events: CallEvents,
    attempts: int,
    started: float,
) -> ToolResult:
    usage = ToolUsage(
        attempts=attempts,
        cpu_ms=outcome.cpu_ms,
        peak_rss_kb=outcome.peak_rss_kb,
        signal=outcome.signal,
        queued_ms=outcome.queued_ms,
    )
    truncated = bool(events.dropped or outcome.events_dropped)
    common: dict[str, Any] = {
        "tool_name": name,
        "exit_code": outcome.exit_code,
        "duration_ms": int((time.monotonic() - started) * 1000),
        "events": events.kept,
        "usage": usage,
    }
    if outcome.ok:
        data = outcome.data
        if isinstance(data, dict) and data.get("truncated") is True:
            truncated = True
        return ToolResult(success=True, data=data, truncated=truncated, **common)
    error = outcome.error or f"the call failed ({outcome.reason})"
    if attempts > 1:
        error = f"{error} (after {attempts} attempts)"
    data = outcome.data if outcome.data is not None else events.partial_output()
    return ToolResult(
        success=False,
        data=data,
        truncated=truncated,
        error=error,
        error_code=ToolErrorCode.TOOL_ERROR,
        reason=outcome.reason,
        **common,
    )


def _audit(
    ctx: CallContext,
    session: SessionState,
    request: ToolCallRequest,
    result: ToolResult,
    outcome: str,
) -> None:
    if ctx.audit is None:
        return
    usage = result.usage
    ctx.audit.record(
        session=session.id,
        client=session.client,
        tool=request.tool_name,
        req_id=request.id,
        correlation_id=request.correlation_id,
        outcome=outcome,
        success=result.success,
        error_code=result.error_code,
        error=result.error,
        duration_ms=result.duration_ms,
        attempts=usage.attempts if usage else 0,
        cpu_ms=usage.cpu_ms if usage else None,
        peak_rss_kb=usage.peak_rss_kb if usage else None,
        exit_code=result.exit_code,
    )
