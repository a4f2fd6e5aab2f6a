"""The zygote's side of a fork (``sandbox._forks``): the copies a kept worker made, checked
against the kernel's own account of them and made sandboxes of their own.

The worker that forked is hostile, and so is every copy: nothing either said is taken on
trust. For each copy reported, the zygote

- finds it among the forking worker's children by its pid there, and checks that it is
  stopped, has one thread, and is in a user and a mount namespace that are not the worker's;
- takes the supervisor's ends of its pipes out of it (``pidfd_getfd``), and checks that they
  are pipes whose other ends the copy holds where a worker's job and result pipes are, and
  that it holds no end of the worker's own pipes;
- maps, in its user namespace, its one uid to its session's: a copy keeps its family's uid
  (it has no capability to change it), and sees itself as its session's;
- gives it cgroup slots of its own (``sandbox._cgroups``: memory, pids, CPU), and watches it
  by its pidfd, to give them back when it is gone.

Then a helper process places the copies (``Placement``), while the zygote answers: it moves
each into its slots, then mounts the copy's session directory over the worker's in the copy's
mount namespace (``setns`` is not for a process with threads, nor for the zygote itself),
idmapped by the copy's user namespace, so that the files its session's uid owns show as its
own. The worker's Landlock rules lie on its session's guard directory, above what is mounted.
No copy runs before the helper is done: its first job waits for ``placed``.

Any failure kills every copy of the fork: none is half made.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import stat
from collections.abc import Sequence
from dataclasses import dataclass

from a2e_engine.sandbox import _syscalls as syscalls
from a2e_engine.sandbox._cgroups import move_lone_thread
from a2e_engine.sandbox._forks import Copy
from a2e_engine.sandbox._probe import in_child

__all__ = ["Adopted", "Placement", "adopt", "pidfd_getfd"]

_OPEN_TREE_CLONE = 1
_OPEN_TREE_CLOEXEC = os.O_CLOEXEC
_MOVE_MOUNT_F_EMPTY_PATH = 0x4
_MOVE_MOUNT_T_EMPTY_PATH = 0x40

_syscall = syscalls.libc["syscall"]
_syscall.restype = ctypes.c_long


@dataclass
class Adopted:
    """A copy as the zygote hands it to the supervisor: its pid as the host sees it, its pidfd,
    and the supervisor's ends of its job and result pipes."""

    pid: int
    pidfd: int
    job_w: int
    result_r: int

    def fds(self) -> list[int]:
        """As a worker's are sent: job pipe, result pipe, pidfd."""
        return [self.job_w, self.result_r, self.pidfd]

    def close(self) -> None:
        for fd in (self.pidfd, self.job_w, self.result_r):
            with contextlib.suppress(OSError):
                os.close(fd)


def _call(name: str, *args: int | bytes) -> int:
    result = int(_syscall(syscalls.syscall_number(name), *args))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{name}: {os.strerror(err)}")
    return result


def pidfd_getfd(pidfd: int, fd: int) -> int:
    """A copy of process ``pidfd``'s ``fd`` (close-on-exec), as ``pidfd_getfd(2)`` makes it."""
    return _call("pidfd_getfd", pidfd, fd, 0)


def adopt(
    parent: int,
    copies: Sequence[Copy],
    worker_fds: tuple[int, int],
    binds: Sequence[Sequence[tuple[str, str]]],
    uids: Sequence[int | None],
) -> tuple[list[Adopted], Placement]:
    """In the zygote: the ``copies`` worker ``parent`` (a host pid) reported, checked, their
    ids mapped, and what places them (``Placement``: their mounts, and cgroup moves) made
    ready, its fds open: the caller starts it or closes it (the module's docstring).
    ``worker_fds``: the fd numbers a worker's job and result pipes have in it (and in each
    copy); ``binds``: per copy, (its own directory, the
    worker's it goes over) pairs; ``uids``: per copy, its session's uid (None: it keeps the
    one it has). ``OSError`` or ``ValueError`` if any copy fails a check; every copy is then
    killed."""
    if not len(binds) == len(uids) == len(copies):
        raise ValueError("one list of directories and one uid per copy")
    adopted: list[Adopted] = []
    children = _children_by_inner_pid(parent)
    hosts = [children.get(copy["pid"]) for copy in copies]
    try:
        for copy, host in zip(copies, hosts, strict=True):
            if host is None:
                raise ValueError(f"pid {copy['pid']} is not a child of the worker")
            adopted.append(_take(parent, host, copy, worker_fds))
        placement = _map_and_plan(parent, [taken.pid for taken in adopted], uids, binds)
    except BaseException:
        for taken in adopted:
            kill(taken)
        for found in hosts:
            if found is not None:
                with contextlib.suppress(OSError):
                    os.kill(found, signal.SIGKILL)
        raise
    return adopted, placement


def kill(adopted: Adopted) -> None:
    with contextlib.suppress(OSError):
        signal.pidfd_send_signal(adopted.pidfd, signal.SIGKILL)
    adopted.close()


def _children_by_inner_pid(parent: int) -> dict[int, int]:
    """Worker ``parent``'s children: their host pids by their pids in its PID namespace (the
    last of ``NSpid``)."""
    found: dict[int, int] = {}
    for task in os.listdir(f"/proc/{parent}/task"):
        with open(f"/proc/{parent}/task/{task}/children") as fh:
            for word in fh.read().split():
                host = int(word)
                inner = _inner_pid(host)
                if inner is not None:
                    found[inner] = host
    return found


def _inner_pid(host: int) -> int | None:
    try:
        with open(f"/proc/{host}/status") as fh:
            for line in fh:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError):
        pass
    return None


def _take(parent: int, host: int, copy: Copy, worker_fds: tuple[int, int]) -> Adopted:
    """Copy ``host`` checked (stopped, its namespaces its own) and the supervisor's ends of its
    pipes taken out of it."""
    pidfd = os.pidfd_open(host)
    taken = Adopted(host, pidfd, -1, -1)
    try:
        if _state(host) != "T":
            raise ValueError("a copy is not stopped")
        if len(os.listdir(f"/proc/{host}/task")) != 1:
            raise ValueError("a copy has more than its one thread")
        for kind in ("user", "mnt"):
            if (
                os.stat(f"/proc/{host}/ns/{kind}").st_ino
                == os.stat(f"/proc/{parent}/ns/{kind}").st_ino
            ):
                raise ValueError(f"a copy shares the worker's {kind} namespace")
        taken.job_w = pidfd_getfd(pidfd, copy["job"])
        taken.result_r = pidfd_getfd(pidfd, copy["result"])
        own = _pipe_ends(host, worker_fds)
        if (_pipe(taken.job_w), _pipe(taken.result_r)) != own:
            raise ValueError("a copy's pipes are not the ones it reads jobs from and writes to")
        parents = set(_pipe_ends(parent, worker_fds))
        if parents & _all_fd_inodes(host):
            raise ValueError("a copy holds the worker's own pipes")
    except BaseException:
        kill(taken)
        raise
    return taken


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rpartition(")")[2].split()[0]


def _pipe(fd: int) -> int:
    info = os.fstat(fd)
    if not stat.S_ISFIFO(info.st_mode):
        raise ValueError("a copy's fd is not a pipe")
    return info.st_ino


def _pipe_ends(pid: int, fds: tuple[int, int]) -> tuple[int, int]:
    inodes = [os.stat(f"/proc/{pid}/fd/{fd}").st_ino for fd in fds]
    return inodes[0], inodes[1]


def _all_fd_inodes(pid: int) -> set[int]:
    inodes = set()
    for name in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            inodes.add(os.stat(f"/proc/{pid}/fd/{name}").st_ino)
    return inodes


@dataclass
class Placement:
    """What is left to do for a fork's copies once the zygote has checked them and mapped
    their ids: each one's directories mounted over the worker's in its mount namespace (the
    trees cloned, idmapped, and the targets opened: ``plan``, as (namespace, tree, target)
    fds), and each one moved into its cgroup slots. A helper process does both (``start``),
    while the zygote answers: the supervisor runs no copy before it has finished."""

    plan: list[tuple[int, int, int]]
    fds: list[int]

    def start(self, moves: Sequence[tuple[str, int]]) -> int:
        """The helper, forked: ``moves`` (a slot's path, a copy's pid) made, then the mounts;
        its pid (it exits 0 once done). The fds are closed here."""
        try:
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the helper's life ends in _exit
                code = 1
                try:
                    syscalls.prctl(syscalls.PR_SET_PDEATHSIG, signal.SIGKILL)
                    for path, copy in moves:  # one after another: one grace period for all
                        move_lone_thread(path, copy)
                    _move_mounts(self.plan)
                    code = 0
                finally:
                    os._exit(code)
            return pid
        finally:
            self.close()

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []


def _map_and_plan(
    parent: int,
    pids: Sequence[int],
    uids: Sequence[int | None],
    binds: Sequence[Sequence[tuple[str, str]]],
) -> Placement:
    """Each copy's ids mapped, then its placement made ready: the trees cloned (idmapped by
    the copy's user namespace, so that the files of its session's uid show as its own) and
    the targets opened here, in the zygote's view and through the copy's root. Only a process
    of the parent user namespace may write a copy's maps: the zygote itself for a first
    worker's copies, a helper that joins the forking copy's for a copy's copies (before the
    trees are idmapped: a namespace without its maps cannot idmap)."""
    fds: list[int] = []
    try:
        users = os.open(f"/proc/{parent}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
        try:
            if os.fstat(users).st_ino == os.stat("/proc/self/ns/user").st_ino:
                _write_maps(pids, uids)
            else:
                _maps_in_helper(users, pids, uids)
        finally:
            os.close(users)
        plan = _mount_plan(pids, binds, any(uid is not None for uid in uids), fds)
    except BaseException:
        Placement([], fds).close()
        raise
    return Placement(plan, fds)


def _write_maps(pids: Sequence[int], uids: Sequence[int | None]) -> None:
    """In the copies' parent user namespace: each copy's one id mapped, inside to its
    session's uid (or its own), outside to its uid as this namespace sees it."""
    for pid, uid in zip(pids, uids, strict=True):
        with open(f"/proc/{pid}/status") as fh:
            seen = {line[:4]: int(line.split()[1]) for line in fh if line[:4] in ("Uid:", "Gid:")}
        for name, key in (("uid_map", "Uid:"), ("gid_map", "Gid:")):
            inside = seen[key] if uid is None else uid
            with open(f"/proc/{pid}/{name}", "w") as fh:
                fh.write(f"{inside} {seen[key]} 1\n")


def _mount_plan(
    pids: Sequence[int],
    binds: Sequence[Sequence[tuple[str, str]]],
    idmapped: bool,
    fds: list[int],
) -> list[tuple[int, int, int]]:
    """(copy's mount namespace, tree, target) for each bind, every fd also put in ``fds``."""
    plan: list[tuple[int, int, int]] = []
    for pid, pairs in zip(pids, binds, strict=True):
        if not pairs:
            continue
        namespace = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        fds.append(namespace)
        for source, target in pairs:
            clone = _OPEN_TREE_CLONE | _OPEN_TREE_CLOEXEC
            tree = _call("open_tree", syscalls.AT_FDCWD, os.fsencode(source), clone)
            fds.append(tree)
            if idmapped:
                users = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
                try:
                    syscalls.idmap_detached(tree, users)
                finally:
                    os.close(users)
            flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            at = os.open(f"/proc/{pid}/root{target}", flags)
            fds.append(at)
            plan.append((namespace, tree, at))
    return plan


def _maps_in_helper(users: int, pids: Sequence[int], uids: Sequence[int | None]) -> None:
    """The maps written by a child of the zygote that joins the user namespace ``users``
    (``sandbox._probe.in_child``); ``OSError`` saying why if it failed."""

    def write() -> None:
        syscalls.setns(users, syscalls.CLONE_NEWUSER)
        _write_maps(pids, uids)

    in_child(write)


def _move_mounts(plan: list[tuple[int, int, int]]) -> None:
    """In the helper: each tree moved onto its target, in its copy's mount namespace."""
    joined = -1
    for namespace, tree, at in plan:
        if namespace != joined:
            syscalls.setns(namespace, syscalls.CLONE_NEWNS)
            joined = namespace
        empty = _MOVE_MOUNT_F_EMPTY_PATH | _MOVE_MOUNT_T_EMPTY_PATH
        _call("move_mount", tree, b"", at, b"", empty)
