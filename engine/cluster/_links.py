"""What the driver knows of one node's engine actor: its handle, its channel, its tools, its
load; and what ``RayEngine.nodes()`` reports of it."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

from a2e_engine.engine.cluster._channel import NodeChannel

__all__ = ["NODE_TAG_CHARS", "SESSION_HEADROOM_MB", "NodeInfo", "NodeLink", "one_line"]

#: What each open session is taken to need beyond what it holds now, as a scheduler counts a
#: pod's request: a sandbox just made holds next to nothing until its interpreter starts, and
#: without it sessions opened together would all go to the node that was freest.
SESSION_HEADROOM_MB = 64
#: How much of a node's id its ``tag`` keeps: enough to tell hundreds of nodes apart (Ray's
#: ids are random hex).
NODE_TAG_CHARS = 8

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class NodeLink:
    """One node's engine actor as the driver sees it. ``in_flight`` counts this driver's calls
    there; ``reported`` is the node's last ``HostStatus`` (every driver's calls)."""

    node_id: str
    address: str
    actor: Any
    channel: NodeChannel | None = None  # open once the actor has described itself
    idempotent: dict[str, bool] = field(default_factory=dict)
    pid: int = 0
    described: dict[str, Any] = field(default_factory=dict)  # NodeEngine.describe()
    in_flight: int = 0
    reported: dict[str, Any] = field(default_factory=dict)
    placed: int = 0  # sessions placed here that ``reported`` may not count yet
    placed_when_asked: int = 0  # of those, the ones placed before the report was asked for
    lost: str = ""  # why it was given up, once it was
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def tag(self) -> str:
        """The start of its id: what tenants are told of it, and what names it in the ids of
        the E2B sandboxes it holds."""
        return self.node_id[:NODE_TAG_CHARS]

    def load(self) -> int:
        """Calls it holds now, as far as this driver can tell: its own in flight there, or
        what the node last reported if that is more (other drivers' calls)."""
        return max(self.in_flight, int(self.reported.get("calls_pending", 0)))

    def room_mb(self) -> int:
        """The room left for new sessions: what the node's memory bound has free, as it last
        reported, less ``SESSION_HEADROOM_MB`` for each session open there (those it
        reported, and those placed since)."""
        free = int(self.reported.get("memory_free_mb", 0))
        sessions = int(self.reported.get("sessions", 0)) + self.placed
        return free - sessions * SESSION_HEADROOM_MB

    def asking(self) -> None:
        """Its ``HostStatus`` is asked for now: what it reports counts the sessions placed
        until now (nearly: one still being opened through Ray may be missed once)."""
        with self._lock:
            self.placed_when_asked = self.placed

    def report(self, reported: dict[str, Any]) -> None:
        """The node's new ``HostStatus``, asked for at ``asking``."""
        with self._lock:
            self.reported = reported
            self.placed = max(0, self.placed - self.placed_when_asked)
            self.placed_when_asked = 0

    def place_session(self) -> None:
        with self._lock:
            self.placed += 1

    def started_call(self) -> None:
        with self._lock:
            self.in_flight += 1

    def ended_call(self) -> None:
        with self._lock:
            self.in_flight = max(0, self.in_flight - 1)


@dataclass(frozen=True)
class NodeInfo:
    """A node with a running engine actor, as ``RayEngine.nodes()`` reports it."""

    node_id: str
    address: str
    pid: int  # the actor's process
    channel: str  # host:port where its relay listens, for drivers (and firewalls)
    in_flight: int  # this driver's calls there
    calls_pending: int  # every driver's, as the node last reported
    calls_running: int
    workers_waiting: int
    memory_free_mb: int  # what new sessions may take of its memory bound, as it last reported
    state_dir: str  # its engine's, on that node
    zygote_pid: int | None  # the first plugin's, started with the engine
    zygote_pids: tuple[int, ...]  # every plugin's zygote running, as the node last reported
    cgroups: tuple[str, ...]


def one_line(exc: BaseException) -> str:
    """What went wrong, in one line. A task's error carries what the remote code raised
    (``RayTaskError.cause``): that, named by its own type. An actor that died in its creation
    task keeps that error only as text, behind banners, colours and the remote traceback: there,
    the traceback's last line (what was raised), else the first line that says something."""
    from ray.exceptions import RayTaskError

    if isinstance(exc, RayTaskError) and isinstance(exc.cause, BaseException):
        exc = exc.cause
    lines = [_ANSI.sub("", line).strip() for line in str(exc).splitlines()]
    lines = [line for line in lines if line and not set(line) <= set("-=*^ ")]
    if not lines:
        return type(exc).__name__
    remote = any(line.startswith('File "') for line in lines)
    return f"{type(exc).__name__}: {lines[-1] if remote else lines[0]}"[:500]
