"""pids cgroups: a per-call cap on processes and threads, and a cap on the whole sandbox.

A fork or thread bomb in one call must neither exhaust the host's pid space
(``kernel.pid_max`` is 32768 here) nor starve the other calls. The zygote creates one parent
group for the sandbox (capped at ``total``) and, below it, reusable *slot* groups (each capped
at ``per_call``). Each worker joins the slot the zygote assigned it, as the first step of its
hardening, while it is pre-forked (joining costs ~0.4 ms, off the call's path); the slot is
handed to a new worker once the previous one, and everything it started, is gone. The zygote
itself stays outside, so it can always fork replacements. Workers see ``/sys`` read-only and
cannot lift the caps.
"""

from __future__ import annotations

import os

__all__ = ["PidsCgroups", "join_cgroup", "remove_cgroup_tree"]

_V1_ROOT = "/sys/fs/cgroup/pids"
_V2_ROOT = "/sys/fs/cgroup"


class PidsCgroups:
    """Zygote-side owner of the sandbox's parent group and its slots."""

    def __init__(self, path: str, per_call: int) -> None:
        self.path = path
        self.per_call = per_call
        self._free: list[str] = []
        self._count = 0

    @classmethod
    def create(cls, total: int, per_call: int) -> PidsCgroups:
        """Raise ``OSError`` saying why when there is no writable pids hierarchy."""
        if os.path.isfile(os.path.join(_V1_ROOT, "cgroup.procs")):
            parent = os.path.join(_V1_ROOT, _own_path("pids").lstrip("/"))
            v2 = False
        elif os.path.isfile(os.path.join(_V2_ROOT, "cgroup.controllers")):
            parent = os.path.join(_V2_ROOT, _own_path("").lstrip("/"))
            with open(os.path.join(parent, "cgroup.subtree_control")) as fh:
                if "pids" not in fh.read().split():
                    raise OSError(f"the pids controller is not enabled below {parent}")
            v2 = True
        else:
            raise OSError("no pids cgroup hierarchy is mounted")
        path = os.path.join(parent, f"a2e-sandbox-{os.getpid()}")
        os.mkdir(path)
        try:
            _write(os.path.join(path, "pids.max"), str(total))
            if v2:
                _write(os.path.join(path, "cgroup.subtree_control"), "+pids")
        except OSError:
            os.rmdir(path)
            raise
        return cls(path, per_call)

    def take_slot(self) -> str:
        if self._free:
            return self._free.pop()
        self._count += 1
        slot = os.path.join(self.path, f"slot{self._count}")
        os.mkdir(slot)
        _write(os.path.join(slot, "pids.max"), str(self.per_call))
        return slot

    def release_slot(self, slot: str) -> None:
        """Only once the worker and its whole tree are gone (the zygote reaped it)."""
        self._free.append(slot)


def join_cgroup(path: str) -> None:
    """Move the calling process into the group at ``path``."""
    _write(os.path.join(path, "cgroup.procs"), str(os.getpid()))


def _write(path: str, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _own_path(controller: str) -> str:
    """This process's cgroup path for ``controller`` (v1) or the unified one (``""``)."""
    with open("/proc/self/cgroup") as fh:
        for line in fh:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if controller and controller in controllers.split(","):
                return path
            if not controller and controllers == "":
                return path
    return "/"


def remove_cgroup_tree(path: str) -> None:
    """Remove a sandbox group and its (empty) slots after the zygote exited; best effort."""
    try:
        children = [e.path for e in os.scandir(path) if e.is_dir()]
    except OSError:
        return
    for child in children:
        try:
            os.rmdir(child)
        except OSError:
            pass
    try:
        os.rmdir(path)
    except OSError:
        pass
