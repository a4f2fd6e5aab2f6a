"""The zygote: a small, single-threaded fork server that owns every worker.

It is started once per pool (``multiprocess`` spawn: a fresh interpreter, so no supervisor
threads or locks are inherited), receives the plugins by value (dill), compiles the seccomp
profiles once, and then forks workers on request. For each worker it hands the supervisor three
fds over its control socket (``SCM_RIGHTS``): the write end of the job pipe, the read end of the
result pipe and a pidfd, so the supervisor talks to workers directly and can kill one without a
pid-reuse race. The zygote reaps workers and reports how each ended, with its rusage. Its
control messages are declared in ``sandbox.messages``: JSON, never pickles.
"""

from __future__ import annotations

import gc
import json
import os
import select
import shutil
import signal
import socket
import sys
import traceback
from collections.abc import Callable
from typing import Any

from a2e_engine.sandbox import landlock, syscalls
from a2e_engine.sandbox.cgroups import Slot, SlotGroups, remove_cgroup_tree
from a2e_engine.sandbox.forking import (
    enter_idle_priority,
    fork_single_threaded,
    leave_idle_priority,
    probe_idle_priority,
    reseed_random,
    thread_count,
)
from a2e_engine.sandbox.harden import Hardening, clear_what_workers_inherit
from a2e_engine.sandbox.identity import Crossing, closed_ancestors, probe_identity
from a2e_engine.sandbox.limits import least_memory_mb
from a2e_engine.sandbox.messages import check_control, control
from a2e_engine.sandbox.mount_template import create_mount_template
from a2e_engine.sandbox.namespaces import (
    PidNamespaces,
    TmpBind,
    create_empty_network_namespace,
    probe_pid_namespaces,
    tmp_binds,
)
from a2e_engine.sandbox.quota import unmount_tree
from a2e_engine.sandbox.seccomp import PROFILES, compile_profile
from a2e_engine.sandbox.settings import ZygoteSettings
from a2e_engine.sandbox.userns import enter_user_namespace, host_pid
from a2e_engine.sandbox.worker import run_worker

__all__ = ["CONTROL_MAX", "zygote_main"]

CONTROL_MAX = 64 * 1024


class SupervisorGone(Exception):
    """The control socket is closed: the supervisor exited or stopped us."""


class Zygote:
    def __init__(
        self,
        ctrl: socket.socket,
        settings: ZygoteSettings,
        plugins: list[Any],
        userns_reason: str = "running as root: not needed",
    ) -> None:
        self.in_userns = userns_reason == ""  # pid 1 of our own user + PID namespaces
        self.ctrl = ctrl
        self.settings = settings
        self.plugins = plugins
        self.limits = settings.limits
        self.max_frame = settings.max_frame
        self.writable_paths = settings.writable_paths
        self.filters: dict[str, bytes] = {}
        self.workers: set[int] = set()
        self.slots: dict[int, dict[str, Slot]] = {}  # worker pid -> its cgroup per controller
        self.cgroups: dict[str, SlotGroups] = {}
        self.empty_net_fd: int | None = None
        self.mount_template_fd: int | None = None  # set with self.pidns: they go together
        self.landlock_abi = 0
        self.read_paths: tuple[str, ...] = ()
        self.tmp_binds: tuple[TmpBind, ...] = ()  # what a worker's own /tmp shows again
        self.pidns: PidNamespaces | None = None
        self.layers: dict[str, Any] = {}
        self._report("user_namespace", userns_reason or None)
        self.change_identity = False
        self.supervisor_pid = os.getppid()
        self.crossings: tuple[Crossing, ...] = ()
        self._fork: Callable[[], int] = os.fork
        self.fork_at_idle = False

    # -- start-up --

    def prepare(self) -> None:
        # Orphans of a worker (in the fallback without PID namespaces) are re-parented to us,
        # and we kill them: nothing a call started may outlive it.
        syscalls.prctl(syscalls.PR_SET_CHILD_SUBREAPER, 1)
        for plugin in self.plugins:
            plugin.preload()  # before any fork: each worker inherits what it imported
        for name in self.settings.profiles:
            self.filters[name] = compile_profile(PROFILES[name])
            syscalls.prepare_seccomp_bpf(self.filters[name])
        self._report("seccomp", None, profiles=sorted(self.filters))
        self._report("clean_start", None)
        no_ns = probe_pid_namespaces() if self.settings.namespaces else "disabled by configuration"
        if no_ns is None:
            self.pidns = PidNamespaces.open()
        self._report_namespaces(no_ns)
        self._report("no_capabilities", None)
        self._prepare_identity(no_ns is None)
        if self.pidns is not None:
            self._prepare_mount_template()
        # What calls write, read and run stays visible where it lives under /tmp.
        self.tmp_binds = tmp_binds(
            (
                *self.writable_paths,
                *landlock.readable_code_paths(self._code_modules()),
                *self.settings.read_roots,
            )
        )
        self.landlock_abi = landlock.abi_version() if self.settings.landlock else 0
        if self.landlock_abi:
            self.read_paths = landlock.covering_paths(
                (*landlock.SYSTEM_READ_PATHS, *landlock.readable_code_paths(self._code_modules()))
            )
            self._report("landlock", None, abi=self.landlock_abi, read=list(self.read_paths))
        else:
            why = (
                "disabled by configuration"
                if not self.settings.landlock
                else ("the kernel has no Landlock (or it is disabled)")
            )
            self._report("landlock", why)
        try:
            self.empty_net_fd = create_empty_network_namespace()
            self._report(
                "network_namespace",
                None,
                profiles=[p for p in self.filters if not PROFILES[p].allow_sockets],
            )
        except OSError as exc:
            self._report("network_namespace", f"cannot create one: {exc.strerror}")
        self._report("subreaper", None)
        self._report("rlimits", None, limits=self.limits.to_dict())
        total = self.settings.max_processes
        self._cgroup(
            "pids",
            "pids_cgroup",
            enabled=total > 0,
            sandbox={"pids.max": str(total)},
            slot={"pids.max": str(self.limits.processes)},
            per_call=self.limits.processes,
            total=total,
        )
        self._cgroup(
            "memory",
            "memory_cgroup",
            enabled=self.settings.memory_cgroup,
            sandbox={},
            slot={"memory.limit_in_bytes": str(self.limits.call_memory_mb << 20)},
            per_call_mb=self.limits.call_memory_mb,
        )
        clear_what_workers_inherit()
        # It holds every plugin object: no worker (same uid where there is no uid drop) may
        # read its memory through /proc/<pid>/mem.
        syscalls.prctl(syscalls.PR_SET_DUMPABLE, 0)
        self._prepare_forking()
        gc.collect()
        gc.freeze()  # workers then never copy the zygote's objects by collecting them
        self.layers["rlimits"]["least_memory_mb"] = least_memory_mb()

    def _report_namespaces(self, why_not: str | None) -> None:
        # One probe covers the layers set up together in the worker's new namespaces.
        for layer in ("pid_namespace", "private_proc", "ipc_namespace", "minimal_dev"):
            self._report(layer, why_not)
        self._report("private_tmp", why_not, size_mb=self.limits.tmp_mb)
        self._report("readonly_filesystem", why_not, writable=list(self.writable_paths))

    def _prepare_mount_template(self) -> None:
        """The mount namespace workers copy (``sandbox.mount_template``); without it, no
        namespaces at all (they are set up together)."""
        assert self.pidns is not None
        try:
            self.mount_template_fd = create_mount_template(
                self.settings.receive_mounts, self.crossings, self.writable_paths
            )
        except OSError as exc:
            why = f"the workers' mount namespace could not be prepared: {exc.strerror or exc}"
            os.close(self.pidns.own_ns_fd)
            self.pidns = None
            self._report_namespaces(why)
            if self.crossings:  # the way to the interpreter was to be opened in it
                self.change_identity = False
                self._report("identity", why)

    def _prepare_forking(self) -> None:
        """See ``sandbox.forking``: the cheap fork where we are alone, preparation at idle
        priority where a worker can come back from it."""
        # A plugin's preload may have started a thread (a C library's pool, say): then only
        # os.fork knows how to leave the child consistent.
        threads = thread_count()
        if threads == 1:
            self._fork = self._fork_from_fresh_random
        idle_why = (
            "disabled by configuration"
            if not self.settings.idle_priority
            else probe_idle_priority()
        )
        self.fork_at_idle = idle_why is None
        how = "libc fork (single-threaded)" if threads == 1 else f"os.fork ({threads} threads)"
        self._report(
            "fresh_process",
            None,
            fork=how,
            prepared_at_idle_priority=idle_why is None,
            idle_priority_reason=idle_why or "",
        )

    @staticmethod
    def _fork_from_fresh_random() -> int:
        """The cheap fork, each child starting from ``random`` state drawn afresh here."""
        reseed_random()
        return fork_single_threaded(reseed_child=False)

    def _prepare_identity(self, have_mount_ns: bool) -> None:
        """Calls as a session uid, where the interpreter and the state directory stay reachable
        for it (through the worker's mount namespace, if a directory on the way is closed)."""
        if not self.settings.identity:
            self._report("identity", "disabled by configuration")
            return
        if self.in_userns:
            self._report("identity", "not root: the user namespace maps only the engine's uid")
            return
        read = [
            *landlock.SYSTEM_READ_PATHS,
            *landlock.readable_code_paths(self._code_modules()),
            *self.settings.read_roots,
        ]
        crossings = closed_ancestors([*read, *self.writable_paths])
        if crossings and not have_mount_ns:
            closed = ", ".join(c.directory for c in crossings)
            self._report(
                "identity",
                f"{closed} may not be entered by other users and there is no mount namespace "
                "to open the way to the interpreter",
            )
            return
        uid = self.settings.first_uid
        why_not = probe_identity(crossings, read, self.writable_paths, uid)
        if why_not is None:
            self.crossings = tuple(crossings)
            self.change_identity = True
        self._report("identity", why_not, first_uid=uid, opened=[c.directory for c in crossings])

    def _cgroup(
        self,
        controller: str,
        layer: str,
        enabled: bool,
        sandbox: dict[str, str],
        slot: dict[str, str],
        **facts: Any,
    ) -> None:
        try:
            if not enabled:
                raise OSError("disabled by configuration")
            groups = SlotGroups.create(controller, sandbox, slot)
        except OSError as exc:
            self._report(layer, exc.strerror or str(exc))
            return
        self.cgroups[controller] = groups
        self._report(layer, None, path=groups.path, **facts)

    def _code_modules(self) -> list[Any]:
        """Packages a worker may import from lazily: ours and the plugins'."""
        names = {"a2e", "a2e_engine.sandbox", "a2e_engine.tools"}
        names.update(_outermost_package(type(p).__module__) for p in self.plugins)
        return [sys.modules[n] for n in sorted(names) if n in sys.modules and n != "__main__"]

    def _report(self, layer: str, why_not: str | None, **facts: Any) -> None:
        self.layers[layer] = {"active": why_not is None, "reason": why_not or "", **facts}

    # -- the loop --

    def send(self, op: str, fds: list[int] | None = None, **fields: Any) -> None:
        data = control(op, **fields)
        try:
            if fds:
                socket.send_fds(self.ctrl, [data], fds)
            else:
                self.ctrl.send(data)
        except OSError:
            raise SupervisorGone from None

    def spawn(self, profile: str) -> None:
        slots: dict[str, Slot] = {}
        try:
            for controller, groups in self.cgroups.items():
                slots[controller] = groups.take_slot()
        except OSError as exc:
            self.release_slots(slots)
            self.send("spawn_failed", profile=profile, error=f"cgroup: {exc}")
            return
        job_r, job_w = os.pipe2(os.O_CLOEXEC)
        res_r, res_w = os.pipe2(os.O_CLOEXEC)
        setup = Hardening(
            keep_fds=tuple(fd for fd in (job_r, res_w, self.mount_template_fd) if fd is not None),
            parent_pid=os.getpid(),
            limits=self.limits,
            seccomp_bpf=self.filters[profile],
            mount_template_fd=self.mount_template_fd,
            cgroups=tuple(slot.path for slot in slots.values()),
            net_ns_fd=None if PROFILES[profile].allow_sockets else self.empty_net_fd,
            landlock_abi=self.landlock_abi,
            read_paths=self.read_paths,
            change_identity=self.change_identity,
            tmp_binds=self.tmp_binds,
        )
        try:
            pid = self.fork()
        except OSError as exc:
            for fd in (job_r, job_w, res_r, res_w):
                os.close(fd)
            self.release_slots(slots)
            self.send("spawn_failed", profile=profile, error=str(exc))
            return
        if pid == 0:  # pragma: no cover - the child never returns from run_worker
            run_worker(setup, job_r, res_w, self.plugins, self.max_frame)
        os.close(job_r)
        os.close(res_w)
        self.workers.add(pid)
        self.slots[pid] = slots
        pidfd = os.pidfd_open(pid)
        try:
            self.send("worker", [job_w, res_r, pidfd], pid=pid, profile=profile)
        finally:
            for fd in (job_w, res_r, pidfd):
                os.close(fd)

    def fork(self) -> int:
        """Fork a worker (``sandbox.forking``), as pid 1 of a new PID namespace when we have
        them; the fork and the child's hardening at idle priority when we can."""
        if self.fork_at_idle:
            enter_idle_priority()
        pid = -1
        try:
            if self.pidns is not None:
                self.pidns.before_fork()
            try:
                pid = self._fork()
            finally:
                if pid != 0 and self.pidns is not None:
                    self.pidns.after_fork_in_parent()
        finally:
            if pid != 0 and self.fork_at_idle:
                leave_idle_priority()
        return pid

    def reap(self) -> None:
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid not in self.workers:
                continue  # an adopted orphan we killed
            self.workers.discard(pid)
            if self.pidns is None:
                # In a PID namespace a worker's orphans are its own and died with it.
                self.kill_adopted_orphans()
            # Its whole tree is gone: the slots can take the next worker.
            oom = self.release_slots(self.slots.pop(pid, {}))
            self.send(
                "exit",
                pid=pid,
                status=status,
                cpu_ms=int((usage.ru_utime + usage.ru_stime) * 1000),
                maxrss_kb=int(usage.ru_maxrss),
                oom=oom,
            )

    def release_slots(self, slots: dict[str, Slot]) -> bool:
        """Give the slots back; True if the OOM killer struck in one of them meanwhile."""
        oom = False
        for controller, slot in slots.items():
            oom |= self.cgroups[controller].release_slot(slot)
        return oom

    def kill_adopted_orphans(self) -> None:
        """Kill and reap every child we did not fork ourselves, until none is left."""
        for _ in range(100):
            orphans = [pid for pid in self.own_children() if pid not in self.workers]
            if not orphans:
                return
            for pid in orphans:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for pid in orphans:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass

    @staticmethod
    def own_children() -> list[int]:
        try:
            with open("/proc/thread-self/children") as fh:
                return [int(p) for p in fh.read().split()]
        except OSError:
            return []

    def handle(self, message: dict[str, Any]) -> bool:
        """A checked control message from the supervisor; False once told to stop."""
        if message["op"] == "spawn":
            if message["profile"] in self.filters:
                for _ in range(message["count"]):
                    self.spawn(message["profile"])
        elif message["op"] == "stop":
            return False
        return True

    def stop(self) -> None:
        for pid in list(self.workers):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in list(self.workers):
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        self.kill_adopted_orphans()
        for groups in self.cgroups.values():
            remove_cgroup_tree(groups.path)  # empty now; the supervisor may be gone
        if os.getppid() != self.supervisor_pid:
            # The supervisor died without cleaning up: its session mounts and workspaces
            # would stay forever.
            for path in self.writable_paths:
                unmount_tree(path)
                shutil.rmtree(path, ignore_errors=True)

    def serve(self) -> None:
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        poller = select.poll()
        poller.register(self.ctrl.fileno(), select.POLLIN)
        poller.register(wake_r, select.POLLIN)
        self.send("ready", layers=self.layers, pid=host_pid())
        running = True
        while running:
            for fd, _ in poller.poll():
                if fd == wake_r:
                    try:
                        os.read(wake_r, 4096)
                    except BlockingIOError:
                        pass
                    self.reap()
                    continue
                try:
                    data = self.ctrl.recv(CONTROL_MAX)
                except OSError:
                    data = b""
                if not data:
                    running = False  # the supervisor is gone: take every worker with us
                    break
                running = self.handle(check_control(json.loads(data)))
                if not running:
                    break
            self.reap()
        self.stop()


def _outermost_package(module: str) -> str:
    """The outermost package of ``module`` that has files of its own: a namespace package
    (``a2e_engine``) has none, so its subpackage (``a2e_engine.tools``) stands for it."""
    parts = module.split(".")
    for depth in range(1, len(parts) + 1):
        name = ".".join(parts[:depth])
        if getattr(sys.modules.get(name), "__file__", None):
            return name
    return module


def zygote_main(ctrl: socket.socket, settings_json: str, plugins_blob: bytes) -> None:
    """Target of the ``multiprocess`` spawn. Never lets an exception escape unreported."""
    # stdout may be the host's protocol channel (a2e serve --stdio): never write there.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the supervisor's to handle
    try:
        import dill

        plugins = dill.loads(plugins_blob)
        settings = ZygoteSettings.from_json(settings_json)
        if os.geteuid() == 0:
            userns = "running as root: not needed"
        elif not settings.namespaces:
            userns = "disabled by configuration"
        else:
            userns = enter_user_namespace() or ""  # from here on, maybe in the child
        zygote = Zygote(ctrl, settings, plugins, userns_reason=userns)
        zygote.prepare()
    except BaseException as exc:
        try:
            ctrl.send(
                control(
                    "fatal",
                    error=f"{type(exc).__name__}: {exc}",
                    traceback=traceback.format_exc()[-4000:],
                )
            )
        finally:
            sys.exit(1)
    try:
        zygote.serve()
    except SupervisorGone:
        zygote.stop()
