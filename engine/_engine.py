"""``Engine``: plugins, policy and configuration, and the parts that run them once started.

``with Engine(...) as engine:`` starts, in order, each part with its own job: the audit trail
(``engine._audit``), the state directory (``engine._state_dir``), the event loop on its own thread
(``engine._loop``), the sandbox (``sandbox._pool``: the zygote and the pre-forked workers), and,
once the sandbox has said which layers this host gives it and the engine's requirements hold
(``engine._requirements``), the sessions (``engine._sessions``). A start that fails at any step
undoes every step before it; ``stop`` undoes them all, in reverse order, after ending every
connection. Transports reach a running engine through the host protocol only
(``engine._host``: ``open_connection``); ``connect()`` is the in-process one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import dill

from a2e._client import A2EClient
from a2e._messages import A2EError, ErrorCode
from a2e.caps.tools._plugin import ToolPlugin
from a2e_engine.engine._audit import AuditTrail
from a2e_engine.engine._calls import CallContext
from a2e_engine.engine._compile_store import SharedCompileCache
from a2e_engine.engine._concurrency import available_memory_mb
from a2e_engine.engine._config import EngineConfig
from a2e_engine.engine._connection import Connection
from a2e_engine.engine._host import HostClosed, HostSession, HostStatus, Refused, Send
from a2e_engine.engine._host_session import (
    SUPPORTED_CAPABILITIES,
    LocalSession,
    PendingCalls,
    Services,
)
from a2e_engine.engine._identities import SessionUids, UidsExhausted
from a2e_engine.engine._loop import EngineLoop
from a2e_engine.engine._memory_bound import (
    Holdings,
    OverBound,
    PressureRelief,
    SandboxMemory,
    derived_limit_mb,
)
from a2e_engine.engine._plugins import build_plugin
from a2e_engine.engine._policy import Policy, PolicyFunction, as_policy
from a2e_engine.engine._registry import ToolRegistry
from a2e_engine.engine._requirements import IsolationUnavailable, protect_supervisor, refusal
from a2e_engine.engine._resident_workers import ResidentWorkers
from a2e_engine.engine._session_forks import fork_session
from a2e_engine.engine._session_pool import SessionPool
from a2e_engine.engine._sessions import Sessions
from a2e_engine.engine._state_dir import StateDirectory
from a2e_engine.engine._uid_blocks import UidBlocks, machine_blocks
from a2e_engine.sandbox import _quota as quota
from a2e_engine.sandbox._cgroups import create_sandbox_memory, remove_cgroup_tree
from a2e_engine.sandbox._deadline import Deadline
from a2e_engine.sandbox._freezing import freeze
from a2e_engine.sandbox._pool import ForkFailed, PoolConfig, WorkerPool, ZygoteSpec
from a2e_engine.sandbox._settings import ZygoteSettings
from a2e_engine.sandbox._waiting import StopSignal
from a2e_engine.sandbox.layers import LayerReports
from a2e_engine.tools._compile_cache import PLUGINS as COMPILE_CACHE_PLUGINS

__all__ = ["Engine", "IsolationUnavailable"]

log = logging.getLogger("a2e.engine")
T = TypeVar("T")

#: How long ``stop`` lets the calls in flight end (cancelled) before the sandbox goes.
STOP_CALLS_S = 15.0
#: How long a fork (its files copied, its interpreter forked and adopted) may take.
FORK_TIMEOUT_S = 60.0


def _builtin_plugins(settings: dict[str, dict[str, Any]]) -> list[ToolPlugin]:
    from a2e_engine.tools import BUILTIN_PLUGINS

    return [
        build_plugin(cls, settings.get(cls.name, {}), f"tools.{cls.name}")
        for cls in BUILTIN_PLUGINS
    ]


@dataclass(frozen=True)
class _Started:
    """The parts of a started engine."""

    state_dir: StateDirectory
    pool: WorkerPool
    services: Services
    ready_sessions: SessionPool  # for stateless requests, filled on the first
    relief: PressureRelief  # ends the session holding the most when memory runs short


class Engine:
    """A sandboxed tool host (docs/architecture.md: the parts; docs/isolation.md: the layers)."""

    #: The sandbox it runs calls in (tests/fakes.py puts one without processes here).
    worker_pool: ClassVar[type[WorkerPool]] = WorkerPool

    def __init__(
        self,
        plugins: Sequence[ToolPlugin] = (),
        config: EngineConfig | None = None,
        *,
        policy: Policy | PolicyFunction | None = None,
        builtin_tools: bool = True,
        audit_logger: logging.Logger | None = None,
    ) -> None:
        self.config = config or EngineConfig()
        #: How many calls run at once, and why that many (``EngineConfig.worker_bound``).
        self.worker_bound = self.config.worker_bound()
        builtins = _builtin_plugins(self.config.tool_settings) if builtin_tools else []
        all_plugins = [*builtins, *plugins]
        self.registry = ToolRegistry(all_plugins)
        self.policy = as_policy(policy)
        self._zygotes = [
            ZygoteSpec(
                group.name,
                self._serialise_plugins([all_plugins[i] for i in group.plugins]),
                group.profiles,
                tuple(all_plugins[i].name for i in group.plugins),
            )
            for group in self.registry.zygotes
        ] or [ZygoteSpec("no plugins", self._serialise_plugins([]), ())]  # still a sandbox
        self._audit_logger = audit_logger
        self._loop = EngineLoop()
        self._running: _Started | None = None
        self._undo: contextlib.ExitStack | None = None
        self._connections: set[Connection] = set()
        self._sessions: set[LocalSession] = set()  # opened by open_session
        self._connections_lock = threading.Lock()  # both sets

    @staticmethod
    def _serialise_plugins(plugins: list[ToolPlugin]) -> bytes:
        """Plugins travel to their zygote by value (dill): a class defined anywhere works."""
        for plugin in plugins:
            try:
                dill.dumps(plugin, recurse=True)
            except Exception as exc:
                raise TypeError(
                    f"plugin {type(plugin).__name__} cannot be sent to the sandbox zygote "
                    f"(dill: {type(exc).__name__}: {exc}); keep unpicklable state such as open "
                    "files or locks out of plugin instances"
                ) from exc
        return dill.dumps(plugins, recurse=True)

    # -- lifecycle --

    @property
    def running(self) -> bool:
        return self._running is not None

    def start(self) -> Engine:
        if self._undo is not None:
            raise RuntimeError("engine already started")
        with contextlib.ExitStack() as undo:
            audit = self._open_audit()
            if audit is not None:
                undo.callback(audit.close)
            state_dir = StateDirectory(self.config.state_dir)
            undo.callback(state_dir.remove)
            state_dir.create()
            quota_off = quota.enable(state_dir.path, self.config.workspace_mb)
            memory = self._sandbox_memory()
            if memory.group:
                undo.callback(remove_cgroup_tree, memory.group)
            # Let go of only once the pool stopped: no process of this engine's uids is left.
            blocks = machine_blocks() if self._changes_uids() else None
            if blocks is not None:
                undo.callback(blocks.close)
            # Beside the sessions, gone with them: only where Landlock keeps other tools out.
            cache_mb = self.config.compile_cache_mb if self.config.isolation.landlock else 0
            stores = {}
            if cache_mb:
                cache = SharedCompileCache.create(state_dir.path, cache_mb)
                undo.callback(cache.close)
                stores.update(dict.fromkeys(COMPILE_CACHE_PLUGINS, cache))
            self._loop.start()
            undo.callback(self._loop.stop)
            pool = self.worker_pool(
                self._zygotes,
                self._pool_config(state_dir, quota_off, memory, stores),
                start_all=self.config.start_all_zygotes,
                accept=self._accepts,
            )
            undo.callback(self._stop_pool, pool)
            self._loop.run(pool.start())
            quota.report(pool.supervisor_layers, quota_off, self.config.workspace_mb)
            refused = refusal(self.config, pool.layers)
            if refused is not None:
                raise refused
            protect_supervisor(pool.layers)
            services = self._services(state_dir, pool, audit, memory, blocks)
            pool.memory_room = services.sessions.bound.has_room
            ready = SessionPool(services.sessions, self.worker_bound.busy, SUPPORTED_CAPABILITIES)
            relief = self._pressure_relief(services, pool)
            self._running = _Started(state_dir, pool, services, ready, relief)
            self._undo = undo.pop_all()
        return self

    def _accepts(self, layers: LayerReports) -> str | None:
        """Why a zygote started after the engine may not run its plugin's calls: what would
        have refused the engine's start (a plugin's zygote larger than ``memory_mb`` allows)."""
        refused = refusal(self.config, layers)
        return str(refused) if refused is not None else None

    def _stop_pool(self, pool: WorkerPool) -> None:
        try:
            self._loop.run(pool.stop(), timeout=30)
        except Exception:
            log.exception("stopping the sandbox failed; what is left is cleared at next start")

    def _open_audit(self) -> AuditTrail | None:
        """First of all: an audit path that cannot be written is refused before anything
        else exists."""
        if not (self.config.audit_path or self._audit_logger):
            return None
        try:
            return AuditTrail(self.config.audit_path, self._audit_logger)
        except OSError as exc:
            raise OSError(
                exc.errno, f"cannot open the audit log {self.config.audit_path}: {exc.strerror}"
            ) from None

    def _pressure_relief(self, services: Services, pool: WorkerPool) -> PressureRelief:
        """Started on the engine's loop, stopped with the engine; what sessions hold, from
        then on, judges the bound's admissions too."""
        sessions = services.sessions
        residents = services.calls.residents
        holdings = Holdings(
            lambda: list(sessions.live.values()),
            residents.kept_bytes if residents is not None else lambda session_id: 0,
            pool.running_bytes,
        )
        sessions.bound.holdings = holdings
        relief = PressureRelief(sessions.bound, holdings)

        async def start() -> None:
            relief.start()

        self._loop.run(start())
        return relief

    def _sandbox_memory(self) -> SandboxMemory:
        """The bound on what the sandbox holds in all, and the memory group that keeps it,
        where one can be made (``engine._memory_bound``)."""
        limit_mb = self.config.admission.sandbox_memory_mb or derived_limit_mb(
            available_memory_mb()
        )
        group = ""
        if limit_mb and self.config.isolation.cgroups:
            with contextlib.suppress(OSError):  # the zygotes' memory_cgroup layer says why
                group = create_sandbox_memory(limit_mb)
        return SandboxMemory(limit_mb, group)

    def _changes_uids(self) -> bool:
        """Whether sessions may get uids of their own here (the identity layer may still find
        it cannot): root, and not switched off."""
        return os.geteuid() == 0 and self.config.isolation.identity

    def _pool_config(
        self,
        state_dir: StateDirectory,
        quota_off: str | None,
        memory: SandboxMemory | None = None,
        stores: dict[str, SharedCompileCache] | None = None,
    ) -> PoolConfig:
        """``stores``: what the calls of a plugin share (``sandbox._sharing``), by plugin;
        their directories are given to that plugin's workers to read."""
        config = self.config
        stores = stores or {}
        zygote = ZygoteSettings(
            limits=config.limits,
            isolation=config.isolation,
            profiles=self.registry.profiles,
            writable_paths=(state_dir.path,),
            plugin_dirs={plugin: store.dirs for plugin, store in stores.items()},
            read_roots=config.read_roots,
            receive_mounts=() if quota_off else (state_dir.path,),
            memory_parent=memory.group if memory else "",
            sandbox_memory_mb=memory.limit_mb if memory else 0,
            max_workers=self.worker_bound.workers,
        )
        return PoolConfig(
            zygote=zygote,
            max_workers=self.worker_bound.workers,
            busy_workers=self.worker_bound.busy,
            prefork=config.prefork,
            output=config.output,
            stores=stores,
        )

    def _services(
        self,
        state_dir: StateDirectory,
        pool: WorkerPool,
        audit: AuditTrail | None,
        memory: SandboxMemory,
        blocks: UidBlocks | None,
    ) -> Services:
        layers = pool.layers
        uid_range = self.config.isolation.uid_range
        uids = SessionUids(*uid_range, blocks) if layers.active("identity") else None
        quota_mb = self.config.workspace_mb if layers.active("disk_quota") else 0
        residents = ResidentWorkers(pool, self.config.resident)
        calls = CallContext(
            self.config,
            self.registry,
            pool,
            audit,
            private_tmp=layers.active("private_tmp"),
            residents=residents,
        )
        sessions = Sessions(
            state_dir.path,
            uids,
            quota_mb,
            end_workers=residents.end,
            dirs_held=residents.dirs_held,
            bound=memory.bound(held=layers.active("memory_cgroup")),
        )
        if sessions.bound.limit_mb and sessions.bound.usage is not None:
            residents.room = sessions.bound.room_for
        return Services(
            calls=calls,
            policy=self.policy,
            sessions=sessions,
            pending=PendingCalls(self.config.admission.max_pending_calls),
            loop=self._loop,
        )

    def stop(self) -> None:
        undo, self._undo = self._undo, None
        if undo is None:
            return
        running, self._running = self._running, None
        with undo:
            if running is not None:
                with contextlib.suppress(Exception):
                    self._loop.run(self._end_connections(running), timeout=2 * STOP_CALLS_S + 5)

    async def _end_connections(self, running: _Started) -> None:
        with self._connections_lock:
            connections = list(self._connections)
            sessions = list(self._sessions)
        calls = [call for connection in connections for call in connection.in_flight()]
        calls += [call for session in sessions for call in session.in_flight()]
        for connection in connections:
            connection.close()
        for session in sessions:
            session.close()
        await running.relief.stop()
        await running.ready_sessions.close()
        if calls:
            await asyncio.wait(calls, timeout=STOP_CALLS_S)
        await running.services.sessions.wait_ended(timeout=STOP_CALLS_S)
        if running.services.calls.residents is not None:
            await running.services.calls.residents.close()

    def __enter__(self) -> Engine:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the host protocol (engine.host) --

    async def open_session(
        self,
        client: str,
        *,
        policy: Policy | None = None,
        stateless: bool = False,
        tenant: str = "",
        lasting: bool = False,
        home: str = "",
    ) -> LocalSession:
        running = self._running
        if running is None:
            raise Refused(A2EError(code=ErrorCode.OVERLOADED, message="the engine is not running"))
        policies = [self.policy] if policy is None else [self.policy, policy]
        try:
            if stateless:
                session = await running.ready_sessions.take(client, policies, tenant)
            else:
                session = await running.services.sessions.open(
                    client, SUPPORTED_CAPABILITIES, policies, tenant
                )
                session.lasting, session.home = lasting, home
        except (UidsExhausted, OverBound, OSError) as exc:
            raise Refused(
                A2EError(
                    code=ErrorCode.OVERLOADED,
                    message=f"cannot open a session: {exc}",
                    retryable=True,
                )
            ) from None
        opened = LocalSession(
            running.services,
            session,
            on_closed=self._forget_session,
            end=running.ready_sessions.give_back if stateless else None,
        )
        with self._connections_lock:
            self._sessions.add(opened)
        return opened

    async def fork_session(self, session: HostSession, count: int) -> list[HostSession]:
        running = self._running
        if running is None:
            raise Refused(A2EError(code=ErrorCode.OVERLOADED, message="the engine is not running"))
        if not isinstance(session, LocalSession) or session.closed:
            raise Refused(A2EError(code=ErrorCode.UNKNOWN_SESSION, message="no such open session"))
        services = running.services
        try:
            copies = await fork_session(
                services.sessions,
                services.calls.residents,
                session.session,
                count,
                Deadline.after(FORK_TIMEOUT_S),
                StopSignal(),
            )
        except (UidsExhausted, OverBound) as exc:
            raise Refused(
                A2EError(code=ErrorCode.OVERLOADED, message=f"cannot fork: {exc}", retryable=True)
            ) from None
        except (ForkFailed, OSError) as exc:
            raise Refused(
                A2EError(code=ErrorCode.INTERNAL, message=f"cannot fork: {exc}")
            ) from None
        opened: list[HostSession] = []
        for state in copies.sessions:
            copy = LocalSession(services, state, on_closed=self._forget_session)
            with self._connections_lock:
                self._sessions.add(copy)
            opened.append(copy)
        return opened

    async def pause_session(self, session: HostSession, paused: bool) -> str:
        running = self._running
        if running is None:
            raise Refused(A2EError(code=ErrorCode.OVERLOADED, message="the engine is not running"))
        if not isinstance(session, LocalSession) or session.closed:
            raise Refused(A2EError(code=ErrorCode.UNKNOWN_SESSION, message="no such open session"))
        state, services = session.session, running.services
        state.paused = paused
        pids = services.calls.pool.running_pids(state.workspace)
        residents = services.calls.residents
        kept = residents.worker_pid(state.id) if residents is not None else None
        if kept is not None and kept not in pids:
            pids.append(kept)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, freeze, pids, paused)

    def _forget_session(self, session: LocalSession) -> None:
        with self._connections_lock:
            self._sessions.discard(session)

    def open_connection(
        self, send: Send, *, policy: Policy | None = None, name: str = "", tenant: str = ""
    ) -> Connection:
        running = self._running
        if running is None:
            raise HostClosed("the engine is not running; use 'with Engine(...) as engine:'")
        connection = Connection(
            running.services,
            send,
            policy=policy,
            name=name,
            on_closed=self._forget,
            tenant=tenant,
        )
        with self._connections_lock:
            self._connections.add(connection)
        return connection

    def status(self) -> HostStatus:
        running = self._running
        if running is None:
            return HostStatus(ready=False, why_not_ready="the engine is not running")
        pool = running.pool.status()
        residents = running.services.calls.residents
        why = ""
        if pool.broken:
            why = f"the sandbox is broken: {pool.broken}"
        elif not pool.zygote_up:
            why = "the sandbox zygote is restarting"
        with self._connections_lock:
            connections = len(self._connections)
            sessions = len(self._sessions) + sum(len(c.sessions) for c in self._connections)
        bound = running.services.sessions.bound
        return HostStatus(
            ready=not why,
            why_not_ready=why,
            calls_pending=running.services.pending.count,
            calls_running=pool.calls_running,
            calls_queued=pool.calls_queued,
            workers_waiting=pool.workers_waiting,
            zygote_restarts=pool.zygote_restarts,
            connections=connections,
            sessions=sessions,
            max_workers=self.worker_bound.workers,
            max_workers_why=self.worker_bound.why,
            resident_workers=residents.live if residents is not None else 0,
            max_resident_workers=residents.limit if residents is not None else 0,
            max_timeout=self.config.max_timeout,
            memory_limit_mb=bound.limit_mb,
            memory_free_mb=bound.free_mb(),
        )

    def _forget(self, connection: Connection) -> None:
        with self._connections_lock:
            self._connections.discard(connection)

    def connect(
        self,
        capabilities: Sequence[str] = ("tools",),
        *,
        client_name: str = "in-process",
        token: str | None = None,
        policy: Policy | PolicyFunction | None = None,
    ) -> A2EClient:
        """An in-process ``A2EClient`` with its handshake done; use it with ``ToolAPI``."""
        from a2e_engine.engine.transports._inprocess import InProcessTransport

        transport = InProcessTransport(self, as_policy(policy) if policy is not None else None)
        return A2EClient(transport, client_name=client_name, capabilities=capabilities, token=token)

    # -- for embedders, tests and benchmarks --

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop.loop

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run a coroutine on the engine's loop from another thread and wait for its result."""
        return self._loop.run(coro, timeout)

    @property
    def pool(self) -> WorkerPool | None:
        return self._running.pool if self._running else None

    @property
    def state_dir(self) -> str:
        return self._running.state_dir.path if self._running else ""

    def session_workspace(self, session_id: str) -> str | None:
        """The engine's own path to a live session's workspace (``None`` once it has ended),
        for an embedder that takes files out of it before it ends (``a2e call
        --keep-output``): a path that a tool's result names is the worker's to choose, this
        one is not. The worker can still change what lies beneath it (``engine._kept_output``
        opens it without following symlinks)."""
        with self._connections_lock:
            connections = list(self._connections)
            sessions = list(self._sessions)
        for connection in connections:
            found = connection.sessions.get(session_id)
            if found is not None:
                return found.workspace
        for session in sessions:
            if session.session_id == session_id:
                return session.workspace
        return None

    @property
    def layers(self) -> LayerReports:
        """Which isolation layers the sandbox has on this host (reported by the zygote)."""
        return self._running.pool.layers if self._running else LayerReports()

    @property
    def zygotes(self) -> list[dict[str, Any]]:
        """Each zygote, the plugins whose workers it forks, whether it runs (one starts on its
        first call), and what every one of its workers inherits from it
        (``sandbox._footprint``); empty when the engine is not running."""
        pool = self.pool
        return pool.zygotes() if pool is not None else []
