"""Layer ``subreaper``: without PID namespaces, what a worker leaves behind is still killed.

Why: a grandchild that double-forks and calls ``setsid`` is re-parented away from the worker's
tree, where killing the worker's group misses it.

How: the zygote is a child subreaper, so such orphans are re-parented to it; once a worker has
been reaped, the zygote kills and reaps every child of its own that is not a worker. In a PID
namespace a worker's orphans are its own and die with it.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Collection

from a2e_engine.sandbox import _syscalls as syscalls
from a2e_engine.sandbox._preparation import Layer, Preparation, Worker

__all__ = ["LAYER", "kill_adopted_orphans", "own_children"]


class Subreaper(Layer):
    def prepare(self, prep: Preparation) -> None:
        """In the zygote, before its first fork."""
        syscalls.prctl(syscalls.PR_SET_CHILD_SUBREAPER, 1)
        prep.report("subreaper", None)

    def reaped(self, prep: Preparation, worker: Worker, alive: Collection[int]) -> None:
        """What the worker left running came to us: killed. In a PID namespace a worker's
        orphans were its own, and died with it."""
        if prep.pidns is None:
            kill_adopted_orphans(alive)

    def stop(self, prep: Preparation, alive: Collection[int]) -> None:
        kill_adopted_orphans(alive)


LAYER = Subreaper()


def kill_adopted_orphans(workers: Collection[int]) -> None:
    """Kill and reap every child we did not fork ourselves, until none is left."""
    for _ in range(100):
        orphans = [pid for pid in own_children() if pid not in workers]
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


def own_children() -> list[int]:
    try:
        with open("/proc/thread-self/children") as fh:
            return [int(p) for p in fh.read().split()]
    except OSError:
        return []
