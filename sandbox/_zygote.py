"""The zygote: a small, single-threaded fork server that owns every worker.

It is started once per plugin (a fresh interpreter, ``sandbox._launch`` and ``sandbox._boot``:
no supervisor threads or locks are inherited), receives its plugins by value, compiles the seccomp
profiles once, and then forks workers on request. For each worker it hands the supervisor three
fds over its control socket (``SCM_RIGHTS``): the write end of the job pipe, the read end of the
result pipe and a pidfd, so the supervisor talks to workers directly and can kill one without a
pid-reuse race. The zygote reaps workers and reports how each ended, with its rusage. Its
control messages are declared in ``sandbox._messages``: JSON, never pickles.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import select
import shutil
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from a2e_engine.sandbox import _contain as contain
from a2e_engine.sandbox import _footprint as footprint
from a2e_engine.sandbox import _rlimits as rlimits
from a2e_engine.sandbox import _userns as userns
from a2e_engine.sandbox._adoption import Adopted, Placement, adopt
from a2e_engine.sandbox._adoption import kill as kill_copy
from a2e_engine.sandbox._cgroups import thaw_slots
from a2e_engine.sandbox._forks import checked_copies
from a2e_engine.sandbox._messages import (
    CONTROL_MAX,
    Adopt,
    ControlMessage,
    check_control,
    control,
)
from a2e_engine.sandbox._preparation import Preparation, Worker
from a2e_engine.sandbox._quota import narrow, unmount_tree
from a2e_engine.sandbox._settings import ZygoteSettings
from a2e_engine.sandbox._userns import host_pid
from a2e_engine.sandbox._worker import run_worker

__all__ = ["zygote_main"]

#: How long a zygote whose control socket closed without a ``stop`` waits to learn whether its
#: supervisor died (it is reparented within microseconds of that; a living supervisor that
#: closed the socket kills the zygote next).
ABANDONED_WAIT_S = 2.0


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
        self.ctrl = ctrl
        self.settings = settings
        self.plugins = plugins
        self.prep = Preparation(settings, userns_reason=userns_reason, plugins=plugins)
        self.workers: dict[int, Worker] = {}  # alive, by pid
        #: Copies of kept workers (``sandbox._adoption``), not our children: alive, by pid,
        #: with the pidfd that tells us when they are gone.
        self.copies: dict[int, tuple[Worker, int]] = {}
        self._poller: select.poll | None = None
        #: Placement helpers at work (``sandbox._adoption.Placement``): by their pid, the
        #: worker whose copies they place, and those copies.
        self.placing: dict[int, tuple[int, list[int]]] = {}
        self.supervisor_pid = os.getppid()
        self.told_to_stop = False

    # -- start-up --

    def prepare(self) -> None:
        """Every layer's zygote half, the plugins' preload among them (``sandbox._contain``).
        If one of them fails, what they made in the host (the cgroups) is removed and what
        the preloads started is killed (the layers' ``stop``), as no supervisor learns of it
        before the zygote is ready."""
        try:
            contain.prepare(self.prep)
        except BaseException:
            contain.stop(self.prep, ())
            raise
        gc.collect()
        gc.freeze()  # workers then never copy the zygote's objects by collecting them
        rlimits.report_least_memory(self.prep)  # once the zygote is all it will be

    # -- the loop --

    def send(self, message: ControlMessage, fds: list[int] | None = None) -> None:
        data = control(message)
        try:
            if fds:
                socket.send_fds(self.ctrl, [data], fds)
            else:
                self.ctrl.send(data)
        except OSError:
            raise SupervisorGone from None

    def spawn(self, profile: str) -> None:
        prep = self.prep
        job_r, job_w = os.pipe2(os.O_CLOEXEC)
        res_r, res_w = os.pipe2(os.O_CLOEXEC)
        template = (prep.mounts.template_fd,) if prep.mounts is not None else ()
        worker = Worker(profile=profile, keep_fds=(job_r, res_w, *template), parent_pid=os.getpid())
        try:
            contain.spawning(prep, worker, self.workers)
            try:
                pid = self.fork()
            except OSError:
                contain.reaped(prep, worker, self.workers)
                raise
        except OSError as exc:
            for fd in (job_r, job_w, res_r, res_w):
                os.close(fd)
            self.send({"op": "spawn_failed", "profile": profile, "error": str(exc)})
            return
        if pid == 0:  # pragma: no cover - the child never returns from run_worker
            run_worker(prep, worker, job_r, res_w)
        os.close(job_r)
        os.close(res_w)
        self.workers[pid] = worker
        pidfd = os.pidfd_open(pid)
        try:
            self.send({"op": "worker", "pid": pid, "profile": profile}, [job_w, res_r, pidfd])
        finally:
            for fd in (job_w, res_r, pidfd):
                os.close(fd)

    def fork(self) -> int:
        """Fork a worker (``sandbox._forking``) between the layers' ``before_fork`` and, in
        this process alone, their ``after_fork`` (a new PID namespace, idle priority)."""
        forking = self.prep.forking
        assert forking is not None, "the zygote forks once prepared"
        return contain.fork(self.prep, forking.fork)

    def reap(self) -> None:
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.placing:
                self.placed(pid, status)
                continue
            worker = self.workers.pop(pid, None)
            if worker is None:
                continue  # an adopted orphan we killed
            # Its whole tree is gone: what the layers held for it goes to the next.
            contain.reaped(self.prep, worker, self.workers)
            self.send(
                {
                    "op": "exit",
                    "pid": pid,
                    "status": status,
                    "cpu_ms": int((usage.ru_utime + usage.ru_stime) * 1000),
                    "maxrss_kb": int(usage.ru_maxrss),
                    "oom": worker.oom,
                }
            )

    def handle(self, message: ControlMessage) -> bool:
        """A checked control message from the supervisor; False once told to stop."""
        if message["op"] == "spawn":
            if message["profile"] in self.prep.filters:
                for _ in range(message["count"]):
                    self.spawn(message["profile"])
        elif message["op"] == "stop":
            self.told_to_stop = True
            return False
        elif message["op"] == "adopt":
            self.adopt(message)
        elif message["op"] == "narrow" and message["pid"] in self.workers:
            mounts = self.prep.mounts
            try:
                if mounts is not None:
                    paths = self.settings.writable_paths
                    narrow(message["pid"], message["keep"], paths, mounts.template_fd)
            except OSError:
                pass  # gone meanwhile: it keeps what it has
        return True

    def adopt(self, message: Adopt) -> None:
        """The copies a kept worker (ours, or a copy we adopted) forked: each checked, its ids
        mapped (``sandbox._adoption``) and given cgroup slots of its own, and all sent to the
        supervisor; or none (every one killed), and why. A helper places them (their mounts,
        and their moves into those slots: ``Placement``) meanwhile; its end is a ``placed``."""
        parent = message["pid"]
        known = self.workers.get(parent) or self.copies.get(parent, (None, -1))[0]
        try:
            if known is None:
                raise ValueError("no such kept worker")
            copies = checked_copies({"copies": message["copies"]}, len(message["copies"]))
            binds = [[_bind(pair) for pair in _listed(pairs)] for pairs in message["binds"]]
            uids = [_uid(uid) for uid in message["uids"]]
            worker_fds = (known.keep_fds[0], known.keep_fds[1])
            adopted, placement = adopt(parent, copies, worker_fds, binds, uids)
        except (OSError, ValueError) as exc:
            self.send({"op": "adopted", "parent": parent, "error": str(exc) or repr(exc)})
            return
        workers = [
            Worker(profile=known.profile, keep_fds=known.keep_fds, parent_pid=os.getpid())
            for _ in adopted
        ]
        error = ""
        try:
            for worker in workers:
                contain.spawning(self.prep, worker, self.workers)
        except OSError as exc:
            placement.close()
            error = f"the copies could not be given cgroup slots: {exc}"
        for copy, worker in zip(adopted, workers, strict=True):
            watch = os.dup(copy.pidfd)  # its slots go back once it is gone, whatever happens
            self.copies[copy.pid] = (worker, watch)
            if self._poller is not None:
                self._poller.register(watch, select.POLLIN)
            if error:
                kill_copy(copy)
        if not error:
            for copy in adopted:
                try:
                    self.send({"op": "copied", "parent": parent, "pid": copy.pid}, copy.fds())
                finally:
                    copy.close()
        self.send({"op": "adopted", "parent": parent, "error": error})
        if not error and adopted:  # the answer first: placing them is off the fork's way
            self.place(parent, adopted, workers, placement)
        else:
            placement.close()

    def place(
        self, parent: int, adopted: list[Adopted], workers: list[Worker], placement: Placement
    ) -> None:
        """The helper that places ``adopted`` started (its end is their ``placed``), or, if it
        cannot be, the copies killed and their ``placed`` an error."""
        pids = [copy.pid for copy in adopted]
        moves = [
            (slot.path, copy.pid)
            for copy, worker in zip(adopted, workers, strict=True)
            for slot in worker.slots.values()
        ]
        try:
            self.placing[placement.start(moves)] = (parent, pids)
        except OSError as exc:
            self._placement_ended(parent, pids, f"the copies could not be placed: {exc}")

    def placed(self, helper: int, status: int) -> None:
        """A placement helper ended: its copies are placed, or killed and said so."""
        parent, pids = self.placing.pop(helper)
        error = ""
        if not os.WIFEXITED(status) or os.WEXITSTATUS(status):
            error = f"the copies could not be placed (helper wait status {status})"
        self._placement_ended(parent, pids, error)

    def _placement_ended(self, parent: int, pids: list[int], error: str) -> None:
        """The supervisor told that the copies ``pids`` are placed, or (``error``) that they
        could not be and are killed: none of them runs unplaced."""
        if error:
            for pid in pids:
                watch = self.copies.get(pid, (None, -1))[1]
                with contextlib.suppress(OSError):
                    signal.pidfd_send_signal(watch, signal.SIGKILL)
        self.send({"op": "placed", "parent": parent, "pid": pids[0], "error": error})

    def copy_gone(self, watch: int) -> None:
        """A copy's pidfd says it is gone: its slots back, and the supervisor told."""
        pid = next((pid for pid, (_, fd) in self.copies.items() if fd == watch), None)
        if self._poller is not None:
            self._poller.unregister(watch)
        os.close(watch)
        if pid is None:
            return
        worker, _ = self.copies.pop(pid)
        contain.reaped(self.prep, worker, self.workers)
        self.send(
            {"op": "exit", "pid": pid, "status": 0, "cpu_ms": 0, "maxrss_kb": 0, "oom": worker.oom}
        )

    def abandoned(self) -> bool:
        """Whether the supervisor died rather than stopped us. Its exit closes the control
        socket before the kernel hands its children to a reaper, so a zygote that sees the
        socket close without a ``stop`` waits (a bounded while) to be reparented: only then is
        it sure the supervisor will never clean up after itself."""
        if self.told_to_stop:
            return False
        deadline = time.monotonic() + ABANDONED_WAIT_S
        while os.getppid() == self.supervisor_pid:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True

    def stop(self) -> None:
        thaw_slots(self.prep)  # a paused session's workers die only once thawed
        for _, watch in self.copies.values():  # they die with their family's first anyway
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(watch, signal.SIGKILL)
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
        contain.stop(self.prep, self.workers)
        if self.abandoned():
            # The supervisor died without cleaning up: its session mounts and workspaces
            # would stay forever.
            for path in self.settings.writable_paths:
                unmount_tree(path)
                shutil.rmtree(path, ignore_errors=True)

    def serve(self) -> None:
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        poller = self._poller = select.poll()
        poller.register(self.ctrl.fileno(), select.POLLIN)
        poller.register(wake_r, select.POLLIN)
        layers, pid, measured = self.prep.layers, host_pid(), footprint.measure()
        self.send({"op": "ready", "layers": layers, "pid": pid, "footprint": measured})
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
                if fd != self.ctrl.fileno():
                    self.copy_gone(fd)
                    continue
                try:
                    data = self.ctrl.recv(CONTROL_MAX)
                except OSError:
                    data = b""
                if not data:
                    running = False  # the supervisor is gone: take every worker with us
                    break
                try:
                    message = check_control(json.loads(data))
                except ValueError:
                    continue  # not a message of ours: nothing to do for it
                running = self.handle(message)
                if not running:
                    break
            self.reap()
        self.stop()


def _uid(value: Any) -> int | None:
    """A copy's session uid in an ``adopt``: None, or a uid the kernel can map."""
    if value is not None and (type(value) is not int or not 0 < value < (1 << 32) - 1):
        raise ValueError("a copy's uid is a positive 32-bit integer")
    return value


def _listed(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError("a copy's binds are a list")
    return value


def _bind(pair: Any) -> tuple[str, str]:
    """One (copy's directory, worker's directory) pair of an ``adopt``: absolute paths."""
    if (
        not isinstance(pair, list)
        or len(pair) != 2
        or not all(isinstance(p, str) and os.path.isabs(p) and "\0" not in p for p in pair)
    ):
        raise ValueError("a bind is two absolute paths")
    return pair[0], pair[1]


def zygote_main(ctrl: socket.socket, boot: Callable[[], tuple[str, list[Any]]]) -> None:
    """The zygote, once ``sandbox._boot`` has its control socket; ``boot`` reads its settings
    and plugins. Never lets an exception escape unreported."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the supervisor's to handle
    try:
        # Called, not passed in: the plugins' serialised bytes are gone once this returns,
        # rather than kept in a local of this frame, which every worker could walk to.
        settings_json, plugins = boot()
        settings = ZygoteSettings.from_json(settings_json)
        userns_reason = userns.enter(settings)  # from here on, maybe in the child
        zygote = Zygote(ctrl, settings, plugins, userns_reason=userns_reason)
        zygote.prepare()
    except BaseException as exc:
        try:
            error = f"{type(exc).__name__}: {exc}"
            trace = traceback.format_exc()[-4000:]
            ctrl.send(control({"op": "fatal", "error": error, "traceback": trace}))
        finally:
            sys.exit(1)
    try:
        zygote.serve()
    except SupervisorGone:
        zygote.stop()
