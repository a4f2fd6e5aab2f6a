"""How much memory a running command has held: the high-water mark of the resident set
(``VmHWM``) of its process and of every descendant, read from ``/proc``.

``run_captured`` reads it a hundred times a second to end a command the moment it has held more
than it may. Resident memory rather than address space: the JVM, Go and V8 reserve far more
address space than they use, and a limit on it would stop them before they run. The kernel's
``ru_maxrss`` cannot stand in for it: a child forked from the worker starts as a copy of the
worker's pages, and the mark survives ``execve``, so it is never below the worker's own size.
"""

from __future__ import annotations

__all__ = ["own_resident_kb", "peak_resident_kb"]

#: A fork bomb's tree is capped elsewhere (pids cgroup); reading it must not take forever.
_MAX_PROCESSES = 256


def peak_resident_kb(pid: int) -> int:
    """The sum of ``VmHWM`` over ``pid`` and its descendants, in KiB (0 for what has exited
    meanwhile): what the tree has held at most, or a little more when its members peaked at
    different times."""
    total, pending, seen = 0, [pid], 0
    while pending and seen < _MAX_PROCESSES:
        current = pending.pop()
        seen += 1
        try:
            total += _status_kb(f"/proc/{current}/status", b"VmHWM:")
            with open(f"/proc/{current}/task/{current}/children", "rb") as fh:
                pending.extend(int(child) for child in fh.read().split())
        except (OSError, ValueError):
            continue
    return total


def own_resident_kb() -> int:
    """This process's resident set now: what a child forked from it starts with."""
    try:
        return _status_kb("/proc/self/status", b"VmRSS:")
    except (OSError, ValueError):
        return 0


def _status_kb(path: str, field: bytes) -> int:
    with open(path, "rb") as fh:
        for line in fh:
            if line.startswith(field):
                return int(line.split()[1])
    return 0  # a zombie: its memory is gone
