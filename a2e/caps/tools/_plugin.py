"""The ``ToolPlugin`` contract of the spec, and the list/search selection rules it implies.

A plugin describes tools (``_list_tools``) and runs them (``_execute_tool``). Under the engine,
``_execute_tool`` always runs inside a sandboxed worker process; the in-process ``handle_call``
below is the spec's reference dispatch, useful for unit-testing a plugin, and is never used by the
engine.

``filter_kind`` is not a field of ``ToolDefinition``; here it matches a tool whose ``toolkit``
equals it or whose ``tags`` contain it (empty matches every tool).

This module is imported in every sandbox worker, so it imports the wire models (pydantic) only
where the supervisor uses them: describing tools and the in-process dispatch. A worker runs
``_execute_tool`` and ``emit``, which work on plain data.
"""

from __future__ import annotations

import time
import traceback
from abc import abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from a2e._capability import A2ECapability
from a2e._plugin import A2EPlugin
from a2e.caps.tools._events import EventKind, check_event_data
from a2e.caps.tools._reasons import FailureReason

if TYPE_CHECKING:
    from a2e.caps.tools._models import (
        ToolCallRequest,
        ToolCallResponse,
        ToolDefinition,
        ToolEvent,
        ToolListRequest,
        ToolListResponse,
        ToolResult,
    )

__all__ = [
    "CleanTemplate",
    "SandboxProfile",
    "ToolCancelled",
    "ToolContext",
    "ToolExecutionError",
    "ToolPlugin",
    "matches_filters",
    "select_tools",
    "substring_search",
]


class SandboxProfile:
    """Names of the seccomp profiles a tool can ask for (see ``sandbox._seccomp``).

    ``compute``: no new processes, no exec, no sockets. ``process``: may fork and exec, no
    sockets. ``network``: may fork, exec and open sockets. ``session``: ``compute`` for an
    interpreter a session keeps, which may also fork itself (no exec) into a user and mount
    namespace of its own: how the engine copies a sandbox (``sandbox._forks``).
    """

    COMPUTE = "compute"
    PROCESS = "process"
    NETWORK = "network"
    SESSION = "session"
    ALL = (COMPUTE, PROCESS, NETWORK, SESSION)


@dataclass(frozen=True)
class ToolContext:
    """Where a call runs, set on the plugin inside the worker before ``_execute_tool``.

    ``workspace`` is the session's directory (the working directory, shared by the session's
    calls); ``tmp_dir`` is private to this call and removed after it; ``read_roots`` are extra
    read-only directories the engine allows (e.g. ``/etc``); ``secrets`` are what
    ``ToolPlugin.secrets_for`` gave for this call.
    """

    workspace: str
    tmp_dir: str
    read_roots: tuple[str, ...] = ()
    streaming: bool = False
    call_id: str = ""
    secrets: Mapping[str, str] = field(default_factory=dict)
    #: The worker's clean template (``ToolPlugin.clean_template``) for this call: a process
    #: forked before the call's arguments and secrets reached the worker, which holds nothing
    #: of them, already running the plugin's ``template_main``. ``None`` for a plugin that
    #: asked for none, or where none could be made.
    template: CleanTemplate | None = None
    #: The call's input after its start (a command's stdin as an agent types it), for a call
    #: made to take some: the next piece as it comes (blocking), ``None`` at its end. ``None``
    #: itself for any other call.
    input: Callable[[], bytes | None] | None = None


class CleanTemplate(Protocol):
    """What a tool holds of its worker's clean template: its pid, the worker's end of the unix
    socket pair between them (``channel``: frames each way, descriptors with them), and
    ``close``, which kills and reaps it (its exit code: a negative signal number; None when it
    was reaped already)."""

    pid: int
    channel: int

    def close(self) -> int | None: ...


def matches_filters(tool: ToolDefinition, filter_tags: Iterable[str], filter_kind: str) -> bool:
    """AND over ``filter_tags``; ``filter_kind`` matches the toolkit or a tag."""
    tags = set(tool.tags)
    if not set(filter_tags) <= tags:
        return False
    return not filter_kind or tool.toolkit == filter_kind or filter_kind in tags


def substring_search(query: str, tools: Iterable[ToolDefinition]) -> list[ToolDefinition]:
    """Every word of the query must occur in the name, description or tags (case-insensitive)."""
    words = query.lower().split()
    found = []
    for tool in tools:
        haystack = " ".join([tool.name, tool.description, *tool.tags]).lower()
        if all(word in haystack for word in words):
            found.append(tool)
    return found


def select_tools(
    request: ToolListRequest,
    tools: list[ToolDefinition],
    search: Callable[[str, list[str], list[ToolDefinition]], list[ToolDefinition]],
) -> list[ToolDefinition]:
    """The spec's list/search rules, shared by a plugin's own dispatch and by the engine.

    List mode (empty query) leaves deferred tools out. Search mode asks ``search`` and includes
    deferred tools only when ``include_deferred`` is set.
    """
    if not request.query:
        candidates = [t for t in tools if not t.defer_loading]
        return [
            t for t in candidates if matches_filters(t, request.filter_tags, request.filter_kind)
        ]
    pool = tools if request.include_deferred else [t for t in tools if not t.defer_loading]
    found = search(request.query, request.filter_tags, pool)
    return [t for t in found if matches_filters(t, request.filter_tags, request.filter_kind)]


class ToolExecutionError(Exception):
    """Raise from a tool to fail with a message *and* keep partial data (e.g. output so far).

    ``retryable=False`` tells the engine that another attempt with the same arguments would fail
    the same way, so an idempotent tool is not retried. ``reason`` is the result's
    ``FailureReason`` (``tool_failed`` unless given): one of ``TOOL_REASONS``, such as
    ``out_of_memory`` for code that ran out of memory.
    """

    def __init__(
        self,
        message: str,
        data: dict[str, Any] | None = None,
        retryable: bool = True,
        reason: FailureReason | None = None,
    ) -> None:
        super().__init__(message)
        self.data = data
        self.retryable = retryable
        self.reason = reason


class ToolCancelled(BaseException):
    """Raised in a tool's main thread when its call is cancelled or times out and its plugin
    asked for a ``cancel_grace_s``: catch it to clean up, then let it propagate. The worker is
    killed when the grace runs out, whatever the tool is doing."""


class ToolPlugin(A2EPlugin):
    """A set of tools. Subclass, describe the tools, implement ``_execute_tool``.

    ``sandbox_profile`` picks the seccomp profile the plugin's tools run under; override
    ``profile_for`` to choose per tool. The default, ``process``, allows subprocesses but no
    sockets; only tools that need the network should ask for ``network``.
    """

    name: ClassVar[str] = "base_tool"
    capability: ClassVar[A2ECapability] = A2ECapability.TOOLS
    sandbox_profile: ClassVar[str] = SandboxProfile.PROCESS
    #: Seconds a cancelled or timed-out call may take to clean up (e.g. cancel work it started
    #: elsewhere) before it is killed. 0: killed at once. When above 0 the tool sees the end
    #: coming as ``ToolCancelled`` raised where its code is (see ``ToolCancelled``).
    cancel_grace_s: ClassVar[float] = 0.0
    #: Plugins that name the same group share one zygote, and so each other's memory and
    #: imports; empty (the default): a zygote of its own, whose workers see nothing of any
    #: other plugin.
    zygote_group: ClassVar[str] = ""
    #: Stateful tools: a session's calls of one of these run one after another in a worker
    #: the session keeps (the first call starts it), so that what the tool holds in memory
    #: (a notebook's names) is there for the next call. Empty (the default): every call in a
    #: fresh worker.
    resident_tools: ClassVar[frozenset[str]] = frozenset()
    #: Whether each worker forks a clean template once it has taken its job's layers and before
    #: it reads the arguments (``context.template``; ``sandbox._template``), for code that must
    #: run where nothing of the call is: the template holds no argument and no secret, and runs
    #: ``template_main``. A call that does not use it leaves it to die with the worker.
    clean_template: ClassVar[bool] = False

    _event_callback: Callable[[ToolEvent], None] | None = None
    _event_sink: Callable[[EventKind, dict[str, Any]], None] | None = None
    context: ToolContext | None = None

    @abstractmethod
    def _list_tools(self) -> list[ToolDefinition]:
        """The tools' manifest. Asked in the supervisor only: import the models here (or in
        what builds them), not at the top of the plugin's module, which every worker of the
        plugin imports; pydantic there would cost each call several MiB of memory to fork and
        to unmap."""

    @abstractmethod
    def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Execute tool logic. Returns a JSON-serialisable dict; raise for failure."""

    def _search_tools(
        self,
        query: str,
        filter_tags: list[str] | None = None,
        tools: list[ToolDefinition] | None = None,
    ) -> list[ToolDefinition]:
        """On-demand discovery. Default: substring match on name, description and tags."""
        candidates = self._list_tools() if tools is None else tools
        found = substring_search(query, candidates)
        return [t for t in found if matches_filters(t, filter_tags or [], "")]

    def profile_for(self, tool_name: str) -> str:
        """The sandbox profile of ``tool_name``."""
        return self.sandbox_profile

    def preload(self) -> None:
        """Import what calls will need, once, in the zygote that every worker is forked from.

        Each call runs in a fresh worker, so a module imported lazily inside ``_execute_tool``
        is imported again by every call; imported here it is already in the worker's memory.
        """

    def template_main(self, channel: int) -> None:
        """In the clean template (``clean_template``), ``context`` set (without the call's
        secrets): serve the worker on ``channel`` (frames each way, ``sandbox._template``)
        until it closes its end."""
        raise NotImplementedError(f"{self.name} asked for a clean template but serves none")

    def secrets_for(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, str]:
        """Values that only the worker running this call may see (``context.secrets``).

        Everything else a plugin holds is copied into the zygote, and so into every worker of
        every session and tool; a credential kept there could be read by any tool code. Return
        it from here instead (and leave it out of the plugin's pickled state): the supervisor
        puts it in this one call's job.
        """
        return {}

    def time_limit_for(self, tool_name: str, arguments: dict[str, Any]) -> float | None:
        """Seconds this call may run when the plugin knows better than the caller's timeout
        (a judge's time limit): the supervisor ends the worker then, as at the deadline,
        whichever comes first. ``None``: the caller's timeout alone."""
        return None

    def accept_result(
        self,
        tool_name: str,
        arguments: dict[str, Any],
        secrets: dict[str, str],
        result: ToolResult,
    ) -> ToolResult:
        """The supervisor's last word on a call that ran, with the secrets ``secrets_for``
        gave it. How the call ended is ``result.reason``: ``None`` when the tool returned, else
        a ``FailureReason`` (``timeout`` at the deadline or as the tool said, ``worker_crashed``
        and the others of ``ENDED_BY_WHAT_RAN`` when what ran died or broke a limit).

        Whatever ran in the worker can write the worker's result; a plugin whose worker runs
        code it does not trust checks here what only it and the supervisor know (a seal made
        with one of the secrets), and may turn how the worker ended into its own kind of
        answer. Runs in the supervisor: it must be quick and must not block."""
        return result

    #: Whether a call that ended by what ran in its worker (``ENDED_BY_WHAT_RAN``: a death, a
    #: limit) is worth another attempt (idempotent tools are retried on ``tool_error``). Not
    #: when the tool runs code whose crash is an answer, not a mishap.
    retry_crashes: ClassVar[bool] = True

    def invalid_arguments(
        self, tool_name: str, arguments: dict[str, Any], problems: list[str]
    ) -> ToolExecutionError:
        """The failure for arguments that do not fit the tool's parameters (checked by the
        engine before any worker starts). Override to give it the shape the tool's own
        failures have, so that a caller parses one shape."""
        return ToolExecutionError(f"invalid arguments for {tool_name}: " + "; ".join(problems))

    def set_event_callback(self, fn: Callable[[ToolEvent], None] | None) -> None:
        """Register a callback for each event as a ``ToolEvent``: for a plugin run in-process,
        outside the engine (``handle_call``); the worker sets an event sink instead."""
        self._event_callback = fn

    def emit(self, kind: str, data: dict[str, Any]) -> None:
        """Emit a streaming event during execution. Wrong shapes raise ``ValueError`` here, in
        the tool (``a2e.caps.tools._events``)."""
        event_kind, checked = check_event_data(kind, data)
        if self._event_sink is not None:
            self._event_sink(event_kind, checked)
        elif self._event_callback is not None:
            from a2e.caps.tools._models import ToolEvent

            self._event_callback(ToolEvent(kind=event_kind, data=checked))

    def set_event_sink(self, fn: Callable[[EventKind, dict[str, Any]], None] | None) -> None:
        """Like ``set_event_callback`` for a receiver that needs only the kind and the checked
        data (the worker, which writes them to its pipe): no ``ToolEvent`` is built, a third
        of an event's cost in the worker. The supervisor builds and checks its own anyway."""
        self._event_sink = fn

    # -- the spec's handler dispatch (in-process, unsandboxed; the engine does not use it) --

    def handle_list(self, request: ToolListRequest) -> ToolListResponse:
        from a2e.caps.tools._models import ToolListResponse

        def search(query: str, tags: list[str], pool: list[ToolDefinition]) -> list[ToolDefinition]:
            return self._search_tools(query, tags, pool)

        tools = select_tools(request, self._list_tools(), search)
        return ToolListResponse(req_id=request.id, tools=tools)

    def handle_call(self, request: ToolCallRequest) -> ToolCallResponse:
        """Run ``_execute_tool`` here, collecting events; failures become ``tool_error``."""
        from a2e.caps.tools._models import ToolCallResponse, ToolErrorCode, ToolResult

        started = time.monotonic()
        events: list[ToolEvent] = []

        def collect(event: ToolEvent) -> None:
            events.append(event.model_copy(update={"req_id": request.id, "seq": len(events)}))

        known = {t.name for t in self._list_tools()}
        if request.tool_name not in known:
            result = ToolResult(
                success=False,
                tool_name=request.tool_name,
                error=f"unknown tool {request.tool_name!r}",
                error_code=ToolErrorCode.UNKNOWN_TOOL,
                reason=FailureReason.UNKNOWN_TOOL,
                duration_ms=0,
            )
            return ToolCallResponse(req_id=request.id, data=result)
        previous = self._event_callback
        self.set_event_callback(collect)
        try:
            data = self._execute_tool(request.tool_name, request.arguments)
            result = ToolResult(
                success=True,
                tool_name=request.tool_name,
                data=data,
                duration_ms=int((time.monotonic() - started) * 1000),
                events=events,
            )
        except Exception as exc:
            self.audit_handle().debug(
                "tool %s failed:\n%s", request.tool_name, traceback.format_exc()
            )
            result = ToolResult(
                success=False,
                tool_name=request.tool_name,
                error=f"{type(exc).__name__}: {exc}",
                error_code=ToolErrorCode.TOOL_ERROR,
                reason=getattr(exc, "reason", None) or FailureReason.TOOL_FAILED,
                duration_ms=int((time.monotonic() - started) * 1000),
                events=events,
            )
        finally:
            self.set_event_callback(previous)
        return ToolCallResponse(req_id=request.id, data=result)
