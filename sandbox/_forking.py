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
import errno
import functools
import os
import signal
import sys
import threading
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
    "prepare_sibling_forks",
    "probe_idle_priority",
    "reseed_random",
    "sibling_forks_ready",
    "thread_count",
]

#: libc's functions called with the GIL held across them (a ``PyDLL``'s never release it).
_libc = ctypes.PyDLL(None, use_errno=True)
_fork = _libc.fork
_fork.restype = ctypes.c_int
_fork.argtypes = ()

_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
#: ``clone``'s flags: a child of the caller's parent; the child's id written to its memory.
CLONE_PARENT = 0x00008000
CLONE_CHILD_SETTID = 0x01000000

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
    (whose children cannot be given to a parent outside it: ``EINVAL``), in a process that
    called ``prepare_sibling_forks`` (its zygote: the answer is inherited); ``OSError`` where
    it cannot be done.

    ``fork`` takes no flags, so this is a raw ``clone``, which does two things of glibc's fork
    itself: the kernel writes the child's thread id into glibc's record of its thread
    (``CLONE_CHILD_SETTID``; without it ``pthread_kill`` of the main thread, its CPU clock
    and error-checking mutexes would use the parent's id), and ``random`` is reseeded. It
    skips the rest, which a single-threaded process needs for nothing (no lock is held across
    the call), and the at-fork handlers that libraries register: a process that loaded one
    which needs them in its children (gRPC) must not fork this way; an engine worker loads
    none. The child has no robust-futex list until it starts a thread."""
    where = _thread_id_address()
    if where is None:
        raise OSError(errno.ENOSYS, "this libc's record of a thread's id was not found")
    flags = ctypes.c_ulong(CLONE_PARENT | CLONE_CHILD_SETTID | signal.SIGCHLD)
    # The child's id goes to the 4th argument or the 5th, by architecture: both are given it
    # (the other is the TLS, which CLONE_SETTLS alone would use).
    address = ctypes.c_void_p(where)
    pid = int(_syscall(ctypes.c_long(_clone_number()), flags, None, None, address, address))
    if pid < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"clone: {os.strerror(err)}")
    if pid == 0:
        reseed_random()
    return pid


def prepare_sibling_forks() -> bool:
    """Find where glibc keeps the calling thread's id (``fork_as_sibling`` has the kernel
    write the child's there), once, in the zygote before it forks workers; whether it was
    found. It is the one word of the thread's record that holds the thread's id here and the
    child's id after a real ``fork``: a forked probe says which."""
    if _tid_offset[0] is None:
        _tid_offset[0] = _probe_tid_offset()
    return sibling_forks_ready()


def sibling_forks_ready() -> bool:
    """Whether ``fork_as_sibling`` can fork here (``prepare_sibling_forks`` found its way)."""
    offset = _tid_offset[0]
    return offset is not None and offset >= 0


#: The offset of the thread id in glibc's ``struct pthread`` (-1: not found; None: not looked).
_tid_offset: list[int | None] = [None]
#: How much of the thread's record is searched (it is larger; the id lies well within).
_RECORD_SCAN = 1024
_pthread_self = _libc.pthread_self
_pthread_self.restype = ctypes.c_void_p
_pthread_self.argtypes = ()


def _thread_id_address() -> int | None:
    offset = _tid_offset[0]
    base = _pthread_self()
    return base + offset if offset is not None and offset >= 0 and base else None


def _probe_tid_offset() -> int:
    base = _pthread_self()
    if not base or thread_count() != 1:
        return -1
    tid = threading.get_native_id()
    candidates = [
        offset
        for offset in range(0, _RECORD_SCAN, 4)
        if ctypes.c_int.from_address(base + offset).value == tid
    ]
    if not candidates:
        return -1
    said_r, said_w = os.pipe()
    pid = fork_single_threaded()
    if pid == 0:  # pragma: no cover - the probe's child
        try:
            child = threading.get_native_id()
            kept = [o for o in candidates if ctypes.c_int.from_address(base + o).value == child]
            os.write(said_w, " ".join(map(str, kept)).encode())
        finally:
            os._exit(0)
    os.close(said_w)
    try:
        said = os.read(said_r, 4096).split()
    finally:
        os.close(said_r)
        os.waitpid(pid, 0)
    return int(said[0]) if len(said) == 1 else -1


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
