"""Engine configuration as small value types (no keyword soup on ``Engine``): ``EngineConfig``
is made of parts (``Limits``, ``Isolation``, ``OutputCaps``, ``Admission``, ``RetryPolicy``,
``ResidentLimits``), each handed on whole to the part of the engine it configures."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from a2e_engine.engine._concurrency import WorkerBound, default_max_workers
from a2e_engine.engine._version import engine_version
from a2e_engine.sandbox._limits import Limits, OutputCaps
from a2e_engine.sandbox._pool import PoolConfig, check_workers
from a2e_engine.sandbox._settings import Isolation
from a2e_engine.sandbox.layers import CATALOG

__all__ = ["Admission", "EngineConfig", "Isolation", "OutputCaps", "ResidentLimits", "RetryPolicy"]


@dataclass(frozen=True)
class RetryPolicy:
    """How idempotent tools are retried on ``tool_error``: attempts and exponential backoff.

    Retries never run past the call's deadline; a timed-out or cancelled attempt is not retried.
    """

    max_attempts: int = 3
    initial_backoff_s: float = 0.05
    max_backoff_s: float = 2.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("RetryPolicy.max_attempts must be at least 1")


#: How many sessions may keep a worker where no memory group measures what they hold.
UNMEASURED_LIMIT = 8


@dataclass(frozen=True)
class ResidentLimits:
    """How many sessions may keep a worker for their stateful tools at once
    (``engine._resident_workers``), how long one may sit idle, and how long it may live.

    ``limit`` 0 (the default): as many as the sandbox's memory bound has room for, where the
    engine's memory group measures what they hold (``engine._memory_bound``), and
    ``UNMEASURED_LIMIT`` where nothing does. A positive ``limit`` is a count of its own, within
    the memory bound still."""

    limit: int = 0
    idle_s: float = 600.0
    lifetime_s: float = 3600.0

    def __post_init__(self) -> None:
        if self.limit < 0 or not self.idle_s > 0 or not self.lifetime_s > 0:
            raise ValueError(
                "resident workers: the limit must be >= 0 and idle_s and lifetime_s above 0"
            )


@dataclass(frozen=True)
class Admission:
    """How many calls the engine holds (running or queued) and how many sessions and calls one
    connection may hold, so that one client cannot take every place in the queue. Past a
    bound a call is refused at once with ``overloaded`` (retryable), and a session's handshake
    with ``overloaded``."""

    max_pending_calls: int = 10_000
    max_sessions_per_connection: int = 16
    max_calls_per_connection: int = 1024
    #: What the whole sandbox may hold (running calls, resident workers, every session's
    #: workspace), in MiB; 0: nine tenths of the memory available when the engine starts
    #: (``engine._memory_bound``).
    sandbox_memory_mb: int = 0

    def __post_init__(self) -> None:
        for name, value in dataclasses.asdict(self).items():
            least = 0 if name == "sandbox_memory_mb" else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"Admission.{name} must be at least {least}, got {value!r}")


@dataclass(frozen=True)
class EngineConfig:
    """Everything that shapes an engine; every field has a safe default.

    Its parts: ``limits`` (what one worker may use, ``sandbox._limits.Limits``), ``isolation``
    (which optional layers may be used, ``sandbox._settings.Isolation``), ``output`` (what one
    worker may write, ``OutputCaps``), ``admission`` (how many calls and sessions are held,
    ``Admission``), ``retry`` (``RetryPolicy``), ``resident`` (the workers that sessions keep
    for stateful tools such as ``python_session``, ``ResidentLimits``).

    ``max_workers`` bounds the calls running at once (the rest queue, each within its own
    timeout), and ``busy_workers`` how many of them start whatever they do: past it, a call
    starts only while the running ones leave room, by the CPU and the memory they use
    (``engine._concurrency``). ``None`` sizes both for this host; ``max_workers`` given alone
    is both. ``prefork`` is how many hardened workers wait per sandbox profile
    in each zygote (a plugin's, or a group's: ``ToolPlugin.zygote_group``); the first plugin's
    zygote starts with the engine, the others on their first call, or all at once with
    ``start_all_zygotes``. ``max_timeout`` caps any call's ``timeout``; ``max_result_events``
    how many events a call that does not stream keeps in its result.

    ``read_roots`` are directories tools may read besides the session workspace (e.g.
    ``("/etc",)``); ``state_dir`` holds session workspaces (a fresh temporary directory when
    ``None``); ``token``, when set, must be presented in the handshake; ``audit_path``
    receives one JSON line per call.

    ``require`` names isolation layers (``sandbox.layers.CATALOG``) without which the engine
    refuses to start. ``workspace_mb`` caps what a session may store (workspace and tmp) with a
    tmpfs per session, when the engine runs as root (0: no quota). Running as root with none
    of the layers that keep a worker off root-owned files (``identity``,
    ``readonly_filesystem``, ``landlock``) is refused unless ``allow_unprotected_root`` says
    otherwise: such a worker could rewrite the host.

    ``tool_settings`` configures the built-in tool plugins by name (``{"http": {"allow":
    ["127.0.0.1"]}}``); a setting a plugin does not take is an error naming it.
    ``compile_cache_mb`` bounds ``run_code``'s compile cache, shared by every session of the
    engine (least recently used entries go first; the precompiled headers come on top); 0:
    none, each session keeps its own (docs/grading.md).
    """

    max_workers: int | None = None
    busy_workers: int | None = None
    prefork: int = PoolConfig.prefork
    start_all_zygotes: bool = False
    max_timeout: int = 300
    max_result_events: int = 1_000
    limits: Limits = field(default_factory=Limits)
    isolation: Isolation = field(default_factory=Isolation)
    output: OutputCaps = field(default_factory=OutputCaps)
    admission: Admission = field(default_factory=Admission)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    resident: ResidentLimits = field(default_factory=ResidentLimits)
    read_roots: tuple[str, ...] = ()
    state_dir: str | None = None
    token: str | None = None
    audit_path: str | None = None
    server_name: str = field(default_factory=lambda: f"a2e-engine/{engine_version()}")
    require: tuple[str, ...] = ()
    tool_settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    workspace_mb: int = 1024
    allow_unprotected_root: bool = False
    compile_cache_mb: int = 512

    def worker_bound(self) -> WorkerBound:
        """``max_workers`` and ``busy_workers`` as given, or sized for this host; with the
        reason."""
        if self.max_workers is not None:
            busy = min(self.busy_workers or self.max_workers, self.max_workers)
            why = "as configured"
            if busy < self.max_workers:
                why += f"; up to {self.max_workers} while calls wait"
            return WorkerBound(self.max_workers, why, busy)
        sized = default_max_workers(self.limits.call_memory_mb)
        if self.busy_workers is None:
            return sized
        workers = max(sized.workers, self.busy_workers)
        why = f"{sized.why}; {self.busy_workers} whatever they do, as configured"
        return WorkerBound(workers, why, self.busy_workers)

    def __post_init__(self) -> None:
        check_workers(self.max_workers, self.prefork)
        if self.busy_workers is not None and self.busy_workers < 1:
            raise ValueError("EngineConfig.busy_workers must be at least 1")
        if self.compile_cache_mb < 0:
            raise ValueError("EngineConfig.compile_cache_mb must be >= 0 (0: no shared cache)")
        if self.max_timeout < 1:
            raise ValueError("EngineConfig.max_timeout must be at least 1 second")
        unknown = [name for name in self.require if name not in CATALOG]
        if unknown:
            raise ValueError(
                f"EngineConfig.require names unknown layers {unknown}; known: {sorted(CATALOG)}"
            )
