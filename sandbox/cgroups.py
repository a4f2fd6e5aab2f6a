"""A pids cgroup around the whole sandbox: a cap on how many processes all workers together
may have, so that a fork bomb in a tool allowed to fork cannot exhaust the host's pid space
(``kernel.pid_max`` is 32768 here) while it waits for its deadline.

The zygote moves itself into the group once at start-up; every worker it forks is born inside,
so nothing is paid per call. Workers see ``/sys`` read-only and cannot lift the cap. A
per-call limit is finer and comes with the cgroup work of the isolation layers.
"""

from __future__ import annotations

import os

__all__ = ["SandboxPidsCgroup"]

_V1_ROOT = "/sys/fs/cgroup/pids"
_V2_ROOT = "/sys/fs/cgroup"


class SandboxPidsCgroup:
    """Create a pids cgroup, cap it, and move the calling process into it."""

    def __init__(self, path: str, limit: int) -> None:
        self.path = path
        self.limit = limit

    @classmethod
    def enter(cls, limit: int) -> SandboxPidsCgroup:
        """Raise ``OSError`` saying why when there is no writable pids hierarchy."""
        if os.path.isfile(os.path.join(_V1_ROOT, "cgroup.procs")):
            parent = os.path.join(_V1_ROOT, _own_path("pids").lstrip("/"))
        elif os.path.isfile(os.path.join(_V2_ROOT, "cgroup.controllers")):
            parent = os.path.join(_V2_ROOT, _own_path("").lstrip("/"))
            with open(os.path.join(parent, "cgroup.subtree_control")) as fh:
                if "pids" not in fh.read().split():
                    raise OSError(f"the pids controller is not enabled below {parent}")
        else:
            raise OSError("no pids cgroup hierarchy is mounted")
        path = os.path.join(parent, f"a2e-sandbox-{os.getpid()}")
        os.mkdir(path)
        try:
            with open(os.path.join(path, "pids.max"), "w") as fh:
                fh.write(str(limit))
            with open(os.path.join(path, "cgroup.procs"), "w") as fh:
                fh.write(str(os.getpid()))
        except OSError:
            os.rmdir(path)
            raise
        return cls(path, limit)


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


def remove_cgroup(path: str) -> None:
    """Remove an (empty) sandbox cgroup after its zygote has exited; best effort."""
    try:
        os.rmdir(path)
    except OSError:
        pass
