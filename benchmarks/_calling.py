"""What every benchmark system is made of: a call function and what it runs on (``Opened``),
a system's declaration (``System``), a failure in one line (``CallFailed``, ``failure_line``,
``failure_reason``), the retries of a command per call (``Retried``), and the engine's own call
and server (``engine_call``, ``http_service``) that the systems over each front-end share.
``benchmarks._systems`` lists the systems; each front-end's lives in a module of its own."""

from __future__ import annotations

import collections
import contextlib
import itertools
import shlex
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from a2e.caps.tools._client import ToolAPI
from a2e.caps.tools._models import ToolEvent
from a2e_engine.benchmarks._shared_servers import kept, server_process
from a2e_engine.benchmarks._workloads import EVENTS_PER_STREAM, Payload, Workload
from a2e_engine.sandbox._exits import how_it_ended

__all__ = [
    "BENCH_ENGINE_FLAGS",
    "RETRIES",
    "Call",
    "CallFailed",
    "Opened",
    "Opener",
    "Retried",
    "System",
    "engine_call",
    "failure_line",
    "failure_reason",
    "http_service",
    "next_payload",
    "shown",
]

Call = Callable[[], tuple[int, Any]]

#: How many times a command per call that failed is run again before its system has failed.
RETRIES = 1
#: The most of a command's stderr that a failure quotes (its end: where the cause is).
STDERR_LINES, STDERR_CHARS = 3, 400


class CallFailed(RuntimeError):
    """One call of a system failed; the message is one line (``failure_line``)."""


class Retried:
    """A system's calls that failed and then succeeded when run again: how many, and why."""

    #: Distinct reasons kept (a reason may name a path that differs every time).
    KEPT = 5

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0
        self._reasons: collections.Counter[str] = collections.Counter()

    def add(self, why: str) -> None:
        with self._lock:
            self.calls += 1
            if why in self._reasons or len(self._reasons) < self.KEPT:
                self._reasons[why] += 1

    def report(self) -> dict[str, Any]:
        """``{}`` if none was; else the count and the reasons, most frequent first."""
        with self._lock:
            if not self.calls:
                return {}
            return {"calls": self.calls, "reasons": dict(self._reasons.most_common())}


@dataclass(frozen=True)
class Opened:
    """A system ready for calls; ``processes`` names its long-lived processes by role
    (``supervisor``, ``zygote``, ``waiting_workers``), for CPU and memory figures."""

    call: Call
    processes: Callable[[], dict[str, list[int]]] = lambda: {}
    #: An engine in this process: ``Engine.zygotes`` (what its workers inherit).
    zygotes: Callable[[], list[dict[str, Any]]] = lambda: []
    #: Its calls that failed once and were run again (``Retried.report``).
    retried: Callable[[], dict[str, Any]] = lambda: {}
    #: The root of a server's process tree that does all of its work (``a2e serve``,
    #: SandboxFusion): its CPU per call is that whole tree's (``resources.tree_cpu_s``).
    server: int | None = None
    #: Why a server's CPU is not measured (it is not on this machine), if it is not.
    server_unmeasured: str = ""


def shown(command: Sequence[str]) -> str:
    """``command`` as a shell would take it, but a script (``-c``'s argument) or any long
    argument elided: a failure's line is read for how the command ended, not for the payload."""
    words = []
    for before, arg in zip(["", *command], command, strict=False):
        long = before == "-c" or len(arg) > 80 or "\n" in arg
        words.append(f"<{len(arg)} characters>" if long else shlex.quote(arg))
    return " ".join(words)


def failure_line(command: Sequence[str], returncode: int, stderr: bytes | str | None) -> str:
    """How a command ended, in one line: what ran, its exit status or the signal that killed
    it, and the last lines of its stderr."""
    how = how_it_ended(returncode)
    text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr or ""
    lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    said = " | ".join(lines[-STDERR_LINES:])
    if len(said) > STDERR_CHARS:
        said = "..." + said[-STDERR_CHARS:]
    return f"`{shown(command)}` {how}: {said or 'nothing on stderr'}"


#: The longest reason a failure is given, of an exception that did not say it in one line.
REASON_CHARS = 500


def failure_reason(exc: BaseException) -> str:
    """Why a system failed, in one line whatever raised it. A ``CalledProcessError``'s own
    message has no stderr, and a command that carries a payload's script fills any few hundred
    characters it is cut to before its status."""
    if isinstance(exc, CallFailed):
        return str(exc)
    if isinstance(exc, subprocess.CalledProcessError | subprocess.TimeoutExpired):
        command = exc.cmd if isinstance(exc.cmd, list | tuple) else [str(exc.cmd)]
        if isinstance(exc, subprocess.TimeoutExpired):
            return f"`{shown(command)}` did not finish within {exc.timeout:g} s"
        return failure_line(command, exc.returncode, exc.stderr)
    text = " ".join(str(exc).split())
    if len(text) > REASON_CHARS:
        text = f"{text[: REASON_CHARS // 3]} ... {text[-REASON_CHARS * 2 // 3 :]}"
    return f"{type(exc).__name__}: {text}"


Opener = Callable[[Workload, list[Payload]], contextlib.AbstractContextManager[Opened]]


@dataclass(frozen=True)
class System:
    key: str
    label: str
    open: Opener
    is_engine: bool = False
    only_for: tuple[str, ...] = ()  # workload keys; empty: all


def next_payload(payloads: list[Payload]) -> Callable[[], tuple[int, Payload]]:
    counter = itertools.count()

    def take() -> tuple[int, Payload]:
        index = next(counter) % len(payloads)  # next() on a count is atomic under the GIL
        return index, payloads[index]

    return take


#: How the benchmarks' engine servers run: the bench's tools, no installed plugins, as many
#: calls at once as the engine sizes for this host (``engine._concurrency``).
BENCH_ENGINE_FLAGS = (
    "--no-entry-points", "--prefork", "4",
    "--plugin", "a2e_engine.benchmarks._workloads:BenchTools",
)  # fmt: skip


def engine_call(tools: ToolAPI, workload: Workload, payloads: list[Payload]) -> Call:
    take = next_payload(payloads)

    def call() -> tuple[int, Any]:
        index, payload = take()
        events: list[ToolEvent] = []
        result = tools.call(
            tool_name=payload.tool,
            arguments=payload.arguments,
            streaming=payload.streaming,
            on_event=events.append if payload.streaming else None,
            timeout=60,
        )
        if not result.success:
            raise RuntimeError(f"the engine failed {payload.tool}: {result.error}")
        if payload.streaming and len(events) != EVENTS_PER_STREAM:
            raise RuntimeError(f"{len(events)} events arrived, not {EVENTS_PER_STREAM}")
        return index, workload.engine_answer(result.data)

    return call


def http_service(*flags: str) -> contextlib.AbstractContextManager[tuple[str, int]]:
    """``a2e serve --http`` on 127.0.0.1 (a free port) with ``flags``: its URL and its pid; one
    for the WebSocket and the REST systems, and every workload, within a bench run."""
    return kept(("http", flags), lambda: _http_service(*flags))


def _http_service(*flags: str) -> contextlib.AbstractContextManager[tuple[str, int]]:
    command = [
        sys.executable, "-m", "a2e_engine.engine.cli", "serve", "--http", "127.0.0.1:0", *flags
    ]  # fmt: skip

    def url_in(line: str) -> str:
        return line.split()[3] if line.startswith("a2e: serving on ") else ""

    return server_process(command, url_in, "a2e serve --http", grace_s=60)
