"""``Engine``: plugins, sessions, the sandbox pool and the event loop that drives them.

The engine runs its own asyncio loop on a background thread, so it embeds in any host:
synchronous code uses ``engine.connect()``; servers (``a2e serve --stdio``) attach transports to
the same loop. ``with Engine(...) as engine:`` starts the zygote and the pre-forked workers and
stops them, with every session workspace, on exit.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

import dill

from a2e.caps.tools.plugin import ToolPlugin
from a2e.client import A2EClient
from a2e_engine.engine.audit import AuditTrail
from a2e_engine.engine.calls import CallContext
from a2e_engine.engine.config import EngineConfig
from a2e_engine.engine.host import Connection
from a2e_engine.engine.identities import SessionUids
from a2e_engine.engine.plugins import build_plugin
from a2e_engine.engine.policy import Policy, PolicyFunction, as_policy
from a2e_engine.engine.registry import ToolRegistry
from a2e_engine.engine.session import Session
from a2e_engine.sandbox import syscalls
from a2e_engine.sandbox.layers import missing_layers
from a2e_engine.sandbox.leftovers import owner_tag, sweep_state_dirs
from a2e_engine.sandbox.pool import PoolConfig, WorkerPool
from a2e_engine.sandbox.quota import share_state_dir, unmount_tree

__all__ = ["Engine", "IsolationUnavailable"]

log = logging.getLogger("a2e.engine")
T = TypeVar("T")


def _builtin_plugins(settings: dict[str, dict[str, Any]]) -> list[ToolPlugin]:
    from a2e_engine.tools import BUILTIN_PLUGINS

    return [
        build_plugin(cls, settings.get(cls.name, {}), f"tools.{cls.name}")
        for cls in BUILTIN_PLUGINS
    ]


class IsolationUnavailable(RuntimeError):
    """A layer named in ``EngineConfig.require`` is not available here; the engine did not start."""


class Engine:
    """A sandboxed tool host. See the README for the embedding and the isolation it provides."""

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
        builtins = _builtin_plugins(self.config.tool_settings) if builtin_tools else []
        all_plugins = [*builtins, *plugins]
        self.registry = ToolRegistry(all_plugins)
        self.policy = as_policy(policy)
        self._plugins_blob = self._serialise_plugins(all_plugins)
        self._audit_logger = audit_logger
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._own_state_dir = False
        self.state_dir = ""
        self.pool: WorkerPool | None = None
        self.call_context: CallContext
        self.connections: set[Connection] = set()
        self.pending_calls = 0
        self._uids: SessionUids | None = None  # when calls run as session uids
        self._quota_mb = 0  # each session's directory is a tmpfs of this size (0: no quota)
        self._background: set[asyncio.Task[None]] = set()

    @staticmethod
    def _serialise_plugins(plugins: list[ToolPlugin]) -> bytes:
        """Plugins travel to the zygote by value (dill): a class defined anywhere works."""
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
        return self._loop is not None and self.pool is not None

    def start(self) -> Engine:
        if self._loop is not None:
            raise RuntimeError("engine already started")
        # Named after their owner, so that the next engine can clear what this one leaves if
        # it is killed together with its zygote (sandbox.leftovers).
        if self.config.state_dir:
            os.makedirs(self.config.state_dir, mode=0o700, exist_ok=True)
            parent, prefix = self.config.state_dir, "a2e-"
        else:
            parent, prefix = tempfile.gettempdir(), "a2e-engine-"
        sweep_state_dirs(parent, prefix)
        self.state_dir = tempfile.mkdtemp(prefix=f"{prefix}{owner_tag()}-", dir=parent)
        # Session uids must pass through it, but not list it: session names stay secret.
        os.chmod(self.state_dir, 0o711)
        self._own_state_dir = True
        quota_off = self._share_state_dir()
        loop = asyncio.new_event_loop()
        # Blocking chores (removing directories, joining the zygote) run here; two threads are
        # plenty and keep the engine's thread count fixed however busy it gets.
        loop.set_default_executor(
            concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="a2e-chores")
        )
        ready = threading.Event()

        def run_loop() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        self._thread = threading.Thread(target=run_loop, name="a2e-engine", daemon=True)
        self._thread.start()
        ready.wait()
        self._loop = loop
        audit = (
            AuditTrail(self.config.audit_path, self._audit_logger)
            if self.config.audit_path or self._audit_logger
            else None
        )
        pool = WorkerPool(
            self._plugins_blob,
            PoolConfig(
                max_workers=self.config.max_workers,
                prefork=self.config.prefork,
                limits=self.config.limits,
                profiles=self.registry.profiles,
                namespaces=self.config.namespaces,
                landlock=self.config.landlock,
                max_frame=self.config.max_frame,
                max_output_bytes=self.config.max_output_bytes,
                max_events=self.config.max_events,
                writable_paths=(self.state_dir,),
                identity=self.config.identity,
                max_processes=PoolConfig.max_processes if self.config.cgroups else 0,
                memory_cgroup=self.config.cgroups,
                uid_range=self.config.uid_range,
                read_roots=self.config.read_roots,
                receive_mounts=() if quota_off else (self.state_dir,),
            ),
        )
        try:
            self.run(pool.start())
            pool.layers["disk_quota"] = {
                "active": quota_off is None,
                "reason": quota_off or "",
                "workspace_mb": self.config.workspace_mb,
            }
            refusal = self._refusal(pool.layers)
            if refusal:
                self.run(pool.stop())
                raise IsolationUnavailable(refusal)
        except BaseException:
            self._stop_loop()
            self._remove_state_dir()
            raise
        self.pool = pool
        self.call_context = CallContext(
            self.config,
            self.registry,
            pool,
            audit,
            private_tmp=bool(pool.layers.get("private_tmp", {}).get("active")),
        )
        if pool.layers.get("identity", {}).get("active"):
            self._uids = SessionUids(*self.config.uid_range)
        if os.geteuid() != 0 and not pool.layers.get("private_proc", {}).get("active"):
            # Workers run as our own uid and see our /proc entry: without this they could read
            # this process's memory and environment through /proc/<pid>/mem and environ.
            syscalls.prctl(syscalls.PR_SET_DUMPABLE, 0)
            log.warning(
                "workers share this process's uid and /proc: made this process non-dumpable "
                "so that they cannot read its memory (core dumps and debuggers are off too)"
            )
        if os.geteuid() == 0 and not pool.layers.get("pid_namespace", {}).get("active"):
            log.warning(
                "running as root without PID namespaces (%s): workers share the host's process "
                "table and /proc and can signal or inspect host processes; only run trusted code",
                pool.layers.get("pid_namespace", {}).get("reason", "unknown reason"),
            )
        return self

    def _share_state_dir(self) -> str | None:
        """Prepare per-session quotas (``sandbox.quota``); why they are off, or ``None``."""
        if not self.config.workspace_mb:
            return "disabled by configuration"
        if os.geteuid() != 0:
            return "not running as root: no tmpfs per session"
        try:
            share_state_dir(self.state_dir)
        except OSError as exc:
            return f"cannot make the state directory a shared mount: {exc.strerror}"
        self._quota_mb = self.config.workspace_mb
        return None

    def _remove_state_dir(self) -> None:
        unmount_tree(self.state_dir)  # session quotas, then the state directory's own bind
        shutil.rmtree(self.state_dir, ignore_errors=True)

    def _refusal(self, layers: dict[str, Any]) -> str:
        """Why the engine must not run with these layers ('' when it may)."""
        missing = missing_layers(self.config.require, layers)
        if missing:
            return "required isolation layers are not available on this host: " + "; ".join(missing)
        guards = ("identity", "readonly_filesystem", "landlock")
        if (
            os.geteuid() == 0
            and not self.config.allow_unprotected_root
            and not any(layers.get(name, {}).get("active") for name in guards)
        ):
            reasons = "; ".join(f"{n} ({layers.get(n, {}).get('reason', '?')})" for n in guards)
            return (
                "workers would run as root with write access to root-owned host files (such as "
                f"/proc/sys/kernel/core_pattern): none of {reasons} is active. Enable one, or "
                "set allow_unprotected_root=True (--allow-unprotected-root) to accept that"
            )
        return ""

    def stop(self) -> None:
        if self._loop is None:
            return
        if self.pool is not None:
            with contextlib.suppress(Exception):
                self.run(self._shutdown(), timeout=30)
        if self.call_context.audit is not None:
            self.call_context.audit.close()
        self._stop_loop()
        if self._own_state_dir:
            self._remove_state_dir()
        self.pool = None

    async def _shutdown(self) -> None:
        tasks: list[asyncio.Task[None]] = []
        for connection in list(self.connections):
            tasks.extend(call.task for call in connection.calls.values() if call.task)
            connection.close()
        if tasks:
            await asyncio.wait(tasks, timeout=15)
        assert self.pool is not None
        await self.pool.stop()

    def _stop_loop(self) -> None:
        loop, self._loop = self._loop, None
        if loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)
        loop.close()

    def __enter__(self) -> Engine:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- running things on the engine loop --

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("the engine is not running; use 'with Engine(...) as engine:'")
        return self._loop

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run a coroutine on the engine loop from another thread and wait for its result."""
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout)

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        self.loop.call_soon_threadsafe(fn, *args)

    # -- connections and sessions --

    def open_connection(
        self, send: Callable[[Any], None], policy: Policy | None = None, name: str = ""
    ) -> Connection:
        """For transports: a new connection whose replies go to ``send`` (on the loop thread)."""
        connection = Connection(self, send, policy=policy, name=name)
        self.connections.add(connection)
        return connection

    def close_connection(self, connection: Connection) -> None:
        connection.close()
        self.connections.discard(connection)

    def connect(
        self,
        capabilities: Sequence[str] = ("tools",),
        *,
        client_name: str = "in-process",
        token: str | None = None,
        policy: Policy | PolicyFunction | None = None,
    ) -> A2EClient:
        """An in-process ``A2EClient`` with its handshake done; use it with ``ToolAPI``."""
        from a2e_engine.engine.transports.inprocess import InProcessTransport

        transport = InProcessTransport(self, as_policy(policy) if policy is not None else None)
        return A2EClient(transport, client_name=client_name, capabilities=capabilities, token=token)

    def _new_session(
        self, client: str, capabilities: frozenset[str], policies: list[Policy]
    ) -> Session:
        session_id = uuid.uuid4().hex  # also the directory name: unguessable by workers
        session = Session(
            client=client,
            capabilities=capabilities,
            policies=policies,
            id=session_id,
            root=os.path.join(self.state_dir, session_id),
            uid=self._uids.take() if self._uids is not None else None,
            quota_mb=self._quota_mb,
        )
        try:
            session.create_dirs()
        except OSError:
            self._release_uid(session)
            session.remove_dirs()
            raise
        return session

    def _release_uid(self, session: Session) -> None:
        if self._uids is not None and session.uid is not None:
            self._uids.give_back(session.uid)

    def _end_session(self, session: Session, after: list[asyncio.Task[None]]) -> None:
        """Remove the session's directories once its last calls are done."""

        async def remove() -> None:
            if after:
                await asyncio.wait(after)
            await asyncio.get_running_loop().run_in_executor(None, session.remove_dirs)
            self._release_uid(session)  # no call of it runs, nothing of it is left

        task = self.loop.create_task(remove())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    @property
    def layers(self) -> dict[str, Any]:
        """Which isolation layers the sandbox has on this host (reported by the zygote)."""
        return dict(self.pool.layers) if self.pool else {}
