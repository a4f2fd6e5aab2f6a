"""The case group: a cgroup beneath each worker's slot, in every hierarchy that has one, that
each program a tool runs (a test case, a compile, a run) joins before it executes: what the
program and everything it starts spend and hold, as the kernel counts it, and the one way to end
all of it at once.

Why a group rather than the process tree or the PID namespace: a process can leave a tree
(double fork, ``setsid``), and one that forks and lets its parent exit, in a loop, is never in a
listing of ``/proc`` by the time it is killed. A group holds every process that descends from a
member, whatever it does; frozen (``freezer``), none of them can fork, so the list read then is
the whole of it (``sweep``). The kernel charges a group's memory with what no process maps
(memfd and shmem pages, tmpfs files: ``memory.stat``'s ``total_shmem``) and limits it
(``memory.limit_in_bytes``, an overrun OOM-killed in the group: ``oom_kills``), and counts its
CPU time to the nanosecond, exited members included (``cpuacct.usage``).

The zygote makes the groups (``slotN/case`` in each hierarchy, ``sandbox._cgroups``); each worker
opens what it needs of them while it may (before its root is read-only and it drops its
capabilities), as descriptors: writing to one is allowed by the credentials it was opened with,
so the worker, and a child of it before it executes, can use them whatever their uid by then. A
child joins with ``join`` (it writes its own pid, ``0``); the descriptors are close-on-exec, and a
program never holds them. Where a hierarchy is missing, what needs it says so by returning None
(``cpu_seconds``, ``held_kb``) or does without (``sweep`` chases the members unfrozen where there
is no freezer).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

__all__ = ["CASE", "CaseGroup", "case_group", "forget_case_group", "open_case_group"]

#: The case group's directory beneath each slot.
CASE = "case"
#: Each hierarchy's files the worker keeps open, and how.
_FILES: dict[str, tuple[tuple[str, int], ...]] = {
    "freezer": (("cgroup.procs", os.O_WRONLY), ("freezer.state", os.O_RDWR)),
    "memory": (
        ("cgroup.procs", os.O_WRONLY),
        ("memory.limit_in_bytes", os.O_WRONLY),
        ("memory.stat", os.O_RDONLY),
        ("memory.oom_control", os.O_RDONLY),
    ),
    "pids": (("cgroup.procs", os.O_WRONLY), ("pids.current", os.O_RDONLY)),
    "cpuacct": (("cgroup.procs", os.O_WRONLY), ("cpuacct.usage", os.O_RDWR)),
}
#: How long a sweep waits for the frozen group to be frozen, and for the killed to be gone.
FREEZE_WAIT_S = 2.0
GONE_WAIT_S = 2.0


class CaseGroup:
    """The worker's descriptors of its case group, by hierarchy and file, and the group's path
    in one hierarchy as ``/proc/<pid>/cgroup`` shows it (``marker``: ``"6:freezer:/a/b/case"``
    without its number), by which its members are known."""

    def __init__(self, fds: dict[tuple[str, str], int], marker: bytes) -> None:
        self.fds = fds
        self.marker = marker
        self.joins = [fd for (_, name), fd in fds.items() if name == "cgroup.procs"]

    def has(self, controller: str) -> bool:
        return any(key[0] == controller for key in self.fds)

    # -- in the child, before it executes --

    def join(self) -> None:
        """Move the calling process into the case group of every hierarchy."""
        for fd in self.joins:
            os.write(fd, b"0")

    # -- in the worker --

    def begin(self, memory_limit_bytes: int | None) -> None:
        """Ready for the next program: thawed, its CPU time counted from zero, its memory
        limited to ``memory_limit_bytes`` (None: the slot's own)."""
        self._write(("freezer", "freezer.state"), b"THAWED")
        self._write(("cpuacct", "cpuacct.usage"), b"0")
        limit = str(memory_limit_bytes).encode() if memory_limit_bytes else b"-1"
        self._write(("memory", "memory.limit_in_bytes"), limit)

    def cpu_seconds(self) -> float | None:
        """CPU time every member has spent since ``begin``, exited ones included."""
        text = self._read(("cpuacct", "cpuacct.usage"))
        return int(text) / 1e9 if text and text.strip().isdigit() else None

    def held_kb(self) -> int | None:
        """What the group's members hold now as the kernel charges it, in KiB: their anonymous
        memory (``total_rss``, each page once however many processes share it) and their
        shared memory, memfd and tmpfs pages (``total_shmem``, mapped or not); no page cache."""
        text = self._read(("memory", "memory.stat"), 16384)
        if text is None:
            return None
        held = 0
        for line in text.split(b"\n"):
            if line.startswith((b"total_rss ", b"total_shmem ")):
                held += int(line.split()[1])
        return held >> 10

    def oom_kills(self) -> int:
        """How many members the kernel's OOM killer has killed, ever (compare two readings)."""
        text = self._read(("memory", "memory.oom_control"))
        for line in (text or b"").split(b"\n"):
            if line.startswith(b"oom_kill "):
                return int(line.split()[1])
        return 0

    def members(self) -> list[int]:
        """The pids in the group now, found by what ``/proc`` says of each process of this
        PID namespace (the worker is its init: the caller makes sure). Not from the group's
        own list: cgroup v1 keeps the list an open file read first, however often it is read
        again, and the worker cannot open it anew."""
        me = os.getpid()
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == me:
                continue
            try:
                with open(f"/proc/{name}/cgroup", "rb") as fh:
                    lines = fh.read().split(b"\n")
            except OSError:
                continue
            if any(line.endswith(self.marker) for line in lines):
                found.append(int(name))
        return found

    def vacant(self) -> bool:
        """Whether the group holds no task at all, zombies included: read in one system call
        (``pids.current``), and so what a sweep looks at first (False where it cannot
        tell)."""
        current = self._read(("pids", "pids.current"))
        return current is not None and current.strip() == b"0"

    def sweep(self) -> bool:
        """Kill every member, and wait (a little) until none is left: frozen first, where
        there is a freezer, so that none can fork away between the list and the kill. Whether
        the group is empty now."""
        if self.vacant():
            return True  # what a run leaves, mostly: nothing to freeze, list or kill
        frozen = self._freeze()
        try:
            _kill(self.members())
        finally:
            if frozen:
                self._write(("freezer", "freezer.state"), b"THAWED")
        deadline = time.monotonic() + GONE_WAIT_S
        while members := self.members():  # a zombie is none: its parent, the worker, reaps
            if time.monotonic() > deadline:
                return False
            _kill(members)  # without a freezer, what forked since the last list
            time.sleep(0.001)
        return True

    def _freeze(self) -> bool:
        """Frozen, every member; False without a freezer or when it does not get there."""
        key = ("freezer", "freezer.state")
        if key not in self.fds or not self._write(key, b"FROZEN"):
            return False
        deadline = time.monotonic() + FREEZE_WAIT_S
        while (self._read(key) or b"").strip() != b"FROZEN":
            if time.monotonic() > deadline:
                return False
            time.sleep(0.0005)
        return True

    def close(self) -> None:
        for fd in self.fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = {}
        self.joins = []

    def _read(self, key: tuple[str, str], size: int = 4096) -> bytes | None:
        fd = self.fds.get(key)
        if fd is None:
            return None
        try:
            return os.pread(fd, size, 0)
        except OSError:
            return None

    def _write(self, key: tuple[str, str], value: bytes) -> bool:
        fd = self.fds.get(key)
        if fd is None:
            return False
        try:
            os.write(fd, value)
            return True
        except OSError:
            return False


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


_CURRENT: list[CaseGroup] = []


def open_case_group(slots: dict[str, str]) -> CaseGroup | None:
    """In the worker, while it may: its case group's descriptors, from its slots' paths by
    hierarchy (the case group is ``CASE`` beneath each). None without any."""
    forget_case_group()
    fds: dict[tuple[str, str], int] = {}
    for controller, path in slots.items():
        directory = os.path.join(path, CASE)
        for name, flags in _FILES.get(controller, ()):
            try:
                fds[(controller, name)] = os.open(
                    os.path.join(directory, name), flags | os.O_CLOEXEC
                )
            except OSError:
                continue
    named = next((c for c in ("freezer", "pids") if c in slots), None)
    marker = _marker(named, os.path.join(slots[named], CASE)) if named else b""
    if not fds or not marker:
        return None
    group = CaseGroup(fds, marker)
    group.begin(None)
    _CURRENT.append(group)
    return group


def _marker(controller: str, directory: str) -> bytes:
    """How ``/proc/<pid>/cgroup`` names the group at ``directory`` of ``controller``'s
    hierarchy (v1: the mount's path, then the group's beneath it)."""
    with open("/proc/self/mountinfo", "rb") as fh:
        mounts = fh.read().split(b"\n")
    for line in mounts:
        fields = line.split(b" - ")
        if len(fields) != 2 or not fields[1].startswith(b"cgroup "):
            continue
        options = fields[1].split()[-1].split(b",")
        mount_point = line.split()[4].decode()
        if controller.encode() in options and directory.startswith(mount_point + "/"):
            root = line.split()[3].decode()
            inside = directory[len(mount_point) :]
            path = os.path.normpath(root + inside) if root != "/" else inside
            return f":{controller}:{path}".encode()
    return b""


def case_group() -> CaseGroup | None:
    """This worker's case group, where it has one."""
    return _CURRENT[0] if _CURRENT else None


def forget_case_group() -> None:
    """Close this process's descriptors of the case group (a template, which runs a program,
    must not hold them)."""
    while _CURRENT:
        _CURRENT.pop().close()
