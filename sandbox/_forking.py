"""Layer ``fresh_process``: how the zygote forks each call's worker, cheaply, and on CPU time
that calls in flight leave free.

**Without CPython's after-fork bookkeeping.** ``os.fork`` runs ``PyOS_AfterFork_Child`` in every
child: it re-creates the GIL and the runtime's locks and runs the ``os.register_at_fork``
callbacks (``threading._after_fork``, the reseeding of ``random``, logging's lock resets). All
of that repairs state that *other threads* may have left half-changed. The zygote has no other
thread, so in its children it repairs nothing, yet it is the first Python code a child runs and
each object it touches copies a page of the zygote's memory, a cost paid once per call. A fork
through libc from a ``ctypes.PyDLL`` function keeps the GIL held across the call (PyDLL never
releases it), so the child starts from the same consistent interpreter state. The one callback
whose effect we need is redone by hand: ``random`` is reseeded, or every worker would draw the
same numbers (the zygote reseeds its own before each fork, so that each child starts from a
state of its own).

**At idle priority.** Forking and hardening the next worker costs many times the CPU that the
call which took the last worker needs *now*. The zygote forks as ``SCHED_IDLE`` and the child
hardens itself so, then returns to normal priority before it drops its capabilities and waits
for a job: preparation only runs on CPU time nothing else wants, and a call never waits behind
it. The zygote itself stays at normal priority between forks, so that it reaps workers and
reports their exits promptly even when tool code keeps every CPU busy.
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass

from a2e_engine.sandbox._preparation import Layer, Preparation, Worker
from a2e_engine.sandbox._probe import Answer, ProbeFailed, in_child
from a2e_engine.sandbox._syscalls import syscall_number

__all__ = [
    "LAYER",
    "ForkPlan",
    "enter_idle_priority",
    "fork_as_sibling",
    "fork_single_threaded",
    "leave_idle_priority",
    "probe_idle_priority",
    "reseed_random",
    "thread_count",
]

_fork = ctypes.PyDLL(None, use_errno=True).fork
_fork.restype = ctypes.c_int
_fork.argtypes = ()

_syscall = ctypes.PyDLL(None, use_errno=True).syscall
_syscall.restype = ctypes.c_long
#: ``clone``'s flag for a child of the caller's parent.
CLONE_PARENT = 0x00008000

_NORMAL = os.sched_param(0)


@dataclass(frozen=True)
class ForkPlan:
    fork: Callable[[], int]  # the cheap fork where the zygote is alone, os.fork otherwise
    at_idle: bool  # fork and harden at SCHED_IDLE (the worker leaves it before its job)


class FreshProcess(Layer):
    def prepare(self, prep: Preparation) -> None:
        """In the zygote, once its plugins are loaded: how it will fork (reported)."""
        # A plugin's preload may have started a thread (a C library's pool, say): then only
        # os.fork knows how to leave the child consistent.
        threads = thread_count()
        idle_why = (
            "disabled by configuration" if not prep.settings.isolation.idle_priority else None
        )
        idle_why = idle_why or probe_idle_priority()
        how = "libc fork (single-threaded)" if threads == 1 else f"os.fork ({threads} threads)"
        prep.report(
            "fresh_process",
            None,
            fork=how,
            prepared_at_idle_priority=idle_why is None,
            idle_priority_reason=idle_why or "",
        )
        prep.forking = ForkPlan(
            _fork_from_fresh_random if threads == 1 else os.fork, idle_why is None
        )

    def before_fork(self, prep: Preparation) -> None:
        """The fork, and the child's hardening after it, at idle priority where they can be."""
        assert prep.forking is not None, "the zygote forks once prepared"
        if prep.forking.at_idle:
            enter_idle_priority()

    def after_fork(self, prep: Preparation) -> None:
        """The zygote back at normal priority, to reap and report promptly."""
        assert prep.forking is not None
        if prep.forking.at_idle:
            leave_idle_priority()

    def apply(self, prep: Preparation, worker: Worker) -> None:
        """In the worker, once its layers above are in place: its own preparation, still at
        idle priority, then back to normal, the last step that needs a capability."""
        if worker.while_idle is not None:
            worker.while_idle(worker)
        leave_idle_priority()


LAYER = FreshProcess()


def _fork_from_fresh_random() -> int:
    """The cheap fork, each child starting from ``random`` state drawn afresh here."""
    reseed_random()
    return fork_single_threaded(reseed_child=False)


def thread_count() -> int:
    """Threads of this process as the kernel sees them (C threads of extensions included)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0  # unknown: the caller must not assume it is alone


def fork_single_threaded(reseed_child: bool = True) -> int:
    """Like ``os.fork``, for a caller that has checked ``thread_count() == 1``.

    The child's ``random`` is reseeded, as ``random``'s own at-fork callback would. A caller
    that forks child after child may instead call ``reseed_random`` itself before each fork
    (``reseed_child=False``): in the parent the state and the code are hot, where in a fresh
    child the reseed copies pages of the zygote's."""
    pid = _fork()
    if pid < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"fork: {os.strerror(err)}")
    if pid == 0 and reseed_child:
        reseed_random()
    return pid


def fork_as_sibling() -> int:
    """Like ``fork_single_threaded``, but the child is this process's parent's child, not its
    own (``clone(CLONE_PARENT)``): the parent reaps it, learns its exit status and its
    resource usage from the kernel, and signals it as its own, while it starts as a copy of
    this process's memory. For a single-threaded caller that is not a PID namespace's init
    (whose children cannot be given to a parent outside it: ``EINVAL``).

    A raw ``clone`` (``fork`` takes no flags) skips libc's after-fork work, which a
    single-threaded process needs for nothing: glibc reads the thread id from the kernel
    where it signals itself, and no lock is held across the call. It skips the at-fork
    handlers that libraries register too: a process that loaded one which needs them in its
    children (gRPC) must not fork this way; an engine worker loads none."""
    number = _clone_number()
    flags = ctypes.c_ulong(CLONE_PARENT | signal.SIGCHLD)
    pid = int(_syscall(ctypes.c_long(number), flags, None, None, None, None))
    if pid < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"clone: {os.strerror(err)}")
    if pid == 0:
        reseed_random()
    return pid


@functools.cache
def _clone_number() -> int:
    return syscall_number("clone")


def reseed_random() -> None:
    """Fresh state for ``random`` from the OS (if it was imported at all)."""
    random = sys.modules.get("random")
    if random is not None:
        random.seed()


def enter_idle_priority() -> None:
    os.sched_setscheduler(0, os.SCHED_IDLE, _NORMAL)


def leave_idle_priority() -> None:
    """Back to normal priority if at idle (needs CAP_SYS_NICE: ``probe_idle_priority``)."""
    if os.sched_getscheduler(0) == os.SCHED_IDLE:
        os.sched_setscheduler(0, os.SCHED_OTHER, _NORMAL)


def probe_idle_priority() -> str | None:
    """``None`` if a child forked at idle priority can return to normal here, else why not
    (no ``CAP_SYS_NICE`` in the initial user namespace, a kernel without ``SCHED_IDLE``)."""

    def there_and_back() -> Answer:
        enter_idle_priority()
        try:
            leave_idle_priority()
        except PermissionError:
            return Answer("no CAP_SYS_NICE")
        if os.sched_getscheduler(0) != os.SCHED_OTHER:
            return Answer("still at idle priority after leaving it")
        return Answer()

    try:
        why = in_child(there_and_back).text
    except ProbeFailed as exc:
        why = str(exc)
    return f"a worker could not return from SCHED_IDLE to normal priority ({why})" if why else None
