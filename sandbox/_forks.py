"""Copies of a kept interpreter, made by ``fork``: a sandbox's variables, modules and heap
shared copy-on-write with each copy, in about the time the kernel takes to copy page tables.

The worker's side. A kept worker (``sandbox._resident``) under a ``forkable`` profile
(``sandbox._profiles``: ``session``) is sent a job with ``copies``: ``n``. Between jobs, with
nothing of a tool running on its thread, it forks ``n`` copies of itself, each with a job pipe
and a result pipe of its own in place of its own ones. Each copy takes a user namespace and a
mount namespace of its own (``unshare``: a process sandbox has no other way to get them, and
no capability to change its uid), so that the zygote can mount the copy's own session
directory over the one it inherited (``sandbox._adoption``), and stops itself (``SIGSTOP``)
for the zygote to adopt it.

At its first tool job, before any tool code, a copy settles (``settle_copy``): it enters a
Landlock domain of its own, which scopes signals and abstract sockets to it and lets it write
only beneath its session's directory (what it inherited let every copy reach every other: one
uid, one PID namespace, one run layer), and takes its working directory and temporary
directory again, now its own. The domain comes then, not at the fork: Landlock ignores a rule
on a directory something is mounted over, so the copy's rules must name a directory above its
own, mounted by then: its session's guard directory, which no mount covers (the kept worker's
own rule is there too: ``sandbox._landlock``).

The worker that forked reports the copies (their pids in its PID namespace and the fds of the
supervisor's ends in each). With one thread, it goes on beside them, and settles as they do
at its next tool job: its copies' domains are nested in the one it leaves, and so out of its
reach. With more (a thread left in the old domain could reach them), it forks one more copy
to go on in its place and runs no tool again: the supervisor stops it for good (the family's
first worker, init of the PID namespace they all live in) or kills it. A sandbox enters one
more domain per fork followed by a cell, and Landlock allows 16: ``sandbox._pool`` counts
them.

What a copy does not get: threads (as above), a running command (those are workers of their
own, not this process), and writes outside its workspace and temporary directory (the run
layer it shares with its family, ``/tmp`` among it, is read-only in it). Files the interpreter
holds open at the fork stay shared with its copies, as ``fork`` shares them.
"""

from __future__ import annotations

import os
import signal
import tempfile
from typing import Any

from a2e_engine.sandbox import _landlock as landlock
from a2e_engine.sandbox import _syscalls as syscalls
from a2e_engine.sandbox._beneath import open_unlinked

__all__ = [
    "MAX_COPIES",
    "Copy",
    "checked_copies",
    "close_supervisor_ends",
    "copies_refused",
    "fork_copies",
    "settle_copy",
]

#: Copies one fork makes at most (E2B's ``fork(count)`` allows 100 children, and a sandbox
#: with threads goes on as one more copy).
MAX_COPIES = 101

#: A copy's fds for the supervisor's ends of its pipes, until the supervisor has them.
Copy = dict[str, int]


def copies_refused() -> str | None:
    """Why this kernel cannot make copies that are kept apart, or None."""
    abi = landlock.abi_version()
    if abi < landlock.ABI_SCOPED:
        return (
            f"copies need Landlock ABI {landlock.ABI_SCOPED} to keep their signals apart "
            f"(this kernel has {abi or 'none'})"
        )
    return None


def fork_copies(count: int, job_fd: int, result_fd: int) -> list[Copy] | tuple[int, int]:
    """In the forking worker: ``count`` copies, each one's pid (in this PID namespace) and its
    supervisor ends' fds (valid in the copy), once every copy has stopped. In a copy: the fds
    it must close once the supervisor has them (its own ends are ``job_fd`` and ``result_fd``
    now). Raises ``OSError`` in the worker if a copy could not be made; the copies made are
    killed."""
    made: list[Copy] = []
    try:
        for _ in range(count):
            job_r, job_w = os.pipe2(os.O_CLOEXEC)
            result_r, result_w = os.pipe2(os.O_CLOEXEC)
            pid = os.fork()
            if pid == 0:  # pragma: no cover - runs in the copy, which coverage does not follow
                _become_copy(job_r, result_w, job_fd, result_fd)
                return job_w, result_r
            for fd in (job_r, job_w, result_r, result_w):
                os.close(fd)
            made.append({"pid": pid, "job": job_w, "result": result_r})
        for copy in made:  # each makes itself apart while the next is forked
            _wait_stopped(copy["pid"])
    except BaseException:
        for copy in made:
            _kill(copy["pid"])
        raise
    return made


def _become_copy(job_r: int, result_w: int, job_fd: int, result_fd: int) -> None:
    """The copy's first steps: its own pipes where the worker's were, namespaces of its own,
    then stopped until adopted. Any failure ends it: a copy must not run half apart."""
    try:
        os.dup2(job_r, job_fd)
        os.dup2(result_w, result_fd)
        os.close(job_r)
        os.close(result_w)
        syscalls.unshare(syscalls.CLONE_NEWUSER | syscalls.CLONE_NEWNS)
        os.kill(os.getpid(), signal.SIGSTOP)
    except BaseException:
        os._exit(1)


def close_supervisor_ends(supervisor_ends: tuple[int, int]) -> None:
    """In a copy, once adopted (its first job came through its own pipe): the supervisor's
    ends of its pipes, which it held until the zygote took them, closed."""
    for fd in supervisor_ends:
        os.close(fd)


def settle_copy(workspace: str, tmp_dir: str) -> None:
    """In a copy, at its first tool job, before any tool code: a Landlock domain of its own
    (signals and abstract sockets scoped to it, writes only beneath its session's directory,
    its own mounted where its worker's was); ``workspace`` and ``tmp_dir`` its working and
    temporary directories. ``OSError`` if it cannot: the copy must then not run."""
    # Its directories' guard, as the worker's own rule: every later copy's directory is
    # mounted beneath it, over this one's, and a rule on a covered directory is ignored.
    writable = (landlock.guard_of(workspace),)
    with landlock.WriteConfinement(landlock.abi_version(), writable, scoped=True) as confinement:
        confinement.enforce()
    os.environ["TMPDIR"] = tmp_dir
    tempfile.tempdir = tmp_dir
    fd = open_unlinked(workspace)
    try:
        os.fchdir(fd)
    finally:
        os.close(fd)


def _wait_stopped(pid: int) -> None:
    """Until copy ``pid`` has stopped itself; ``OSError`` if it ended instead."""
    _, status = os.waitpid(pid, os.WUNTRACED)
    if not os.WIFSTOPPED(status):
        raise OSError(f"a copy ended before it was ready (wait status {status})")


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def checked_copies(data: Any, count: int) -> list[Copy]:
    """The copies a worker reported (``fork_copies``' list), or ``ValueError``: the worker is
    hostile, and every number here is checked again by the zygote against the kernel's."""
    if not isinstance(data, dict) or not isinstance(data.get("copies"), list):
        raise ValueError("a fork's result is {'copies': [...]}")
    copies = data["copies"]
    if len(copies) != count or count > MAX_COPIES:
        raise ValueError(f"asked for {count} copies, told of {len(copies)}")
    checked = []
    for copy in copies:
        if not isinstance(copy, dict) or set(copy) != {"pid", "job", "result"}:
            raise ValueError("a copy is {pid, job, result}")
        if not all(type(copy[key]) is int and 0 < copy[key] < 1 << 22 for key in copy):
            raise ValueError("a copy's pid and fds are small positive integers")
        checked.append({key: int(copy[key]) for key in ("pid", "job", "result")})
    return checked
