"""``WorkerTree``: a server process's workers, counted from outside (the processes below its
zygote, which is its child), for tests that check a call's worker is gone."""

from __future__ import annotations

import time

import psutil

__all__ = ["WorkerTree"]


class WorkerTree:
    def __init__(self, pid: int) -> None:
        self.pid = pid

    def descendants(self) -> list[psutil.Process]:
        """Every process under the server: its zygote and the workers."""
        try:
            return psutil.Process(self.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def workers(self) -> int:
        under = self.descendants()
        zygotes = {p.pid for p in under if _parent(p) == self.pid}
        return sum(1 for p in under if p.pid not in zygotes)

    def settled_workers(self, seconds: float = 10) -> int:
        """``workers()`` once it has held still for half a second: a worker of an earlier call
        may still be exiting, and its replacement still be forking."""
        deadline = time.monotonic() + seconds
        last, since = self.workers(), time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.05)
            now = self.workers()
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= 0.5:
                break
        return last


def _parent(process: psutil.Process) -> int | None:
    try:
        return process.ppid()
    except psutil.NoSuchProcess:
        return None
