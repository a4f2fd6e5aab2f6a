"""CPU and memory of a system's long-lived processes (psutil), for per-call and per-process
figures. A process that went away between listing and reading is left out, not an error."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

import psutil

__all__ = ["CpuMeter", "TreeCpuMeter", "memory_by_role", "tree_cpu_s"]


@dataclass
class _Cpu:
    own: float = 0.0  # user + system of the process itself
    children: float = 0.0  # of its reaped children (a zygote's workers)


def _cpu(pid: int) -> _Cpu | None:
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return _Cpu(times.user + times.system, times.children_user + times.children_system)


class CpuMeter:
    """CPU seconds spent by each role's processes between ``start`` and ``stop``, per call."""

    def __init__(self, processes: dict[str, list[int]]) -> None:
        self.pids = {role: pids for role, pids in processes.items() if role != "waiting_workers"}
        self.before: dict[int, _Cpu | None] = {}

    def start(self) -> None:
        self.before = {pid: _cpu(pid) for pids in self.pids.values() for pid in pids}

    def per_call_ms(self, calls: int) -> dict[str, float]:
        """Each role's CPU per call, summed over its processes (a zygote per plugin); the
        zygotes' children are the workers they reaped."""
        figures: dict[str, float] = {}
        for role, pids in self.pids.items():
            own = children = 0.0
            measured = False
            for pid in pids:
                before, after = self.before.get(pid), _cpu(pid)
                if before is None or after is None:
                    continue
                own += after.own - before.own
                children += after.children - before.children
                measured = True
            if not measured:
                continue
            figures[f"{role}_cpu_ms"] = own * 1000 / calls
            if role == "zygote":
                figures["workers_cpu_ms"] = children * 1000 / calls
        return figures


def tree_cpu_s(root: int) -> float | None:
    """CPU seconds spent so far by ``root``, every process beneath it, and every child any of
    them has reaped: a server that runs each request in a child of its own (SandboxFusion), or
    in a pre-forked worker's (the engine), is charged for all of it. ``None`` if ``root`` is
    gone.

    A process that ends between two readings moves from its own figure into its reaper's
    children's figure, whole, so a difference of two readings counts it once."""
    try:
        tree = [psutil.Process(root)]
        tree += tree[0].children(recursive=True)
    except psutil.Error:
        return None
    total = 0.0
    for process in tree:
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


class TreeCpuMeter:
    """CPU per call of a server's whole process tree (``tree_cpu_s``) between ``start`` and
    ``per_call_ms``."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.before: float | None = None

    def start(self) -> None:
        self.before = tree_cpu_s(self.root)

    def per_call_ms(self, calls: int) -> float | None:
        after = tree_cpu_s(self.root)
        if self.before is None or after is None or calls <= 0:
            return None
        return (after - self.before) * 1000 / calls


def _memory(pid: int) -> tuple[float, float] | None:
    try:
        info = psutil.Process(pid).memory_full_info()
    except psutil.Error:
        return None
    return info.rss / 2**20, info.uss / 2**20


def memory_by_role(processes: dict[str, list[int]]) -> dict[str, dict[str, Any]]:
    """RSS and USS in MiB per role; for several processes of a role (waiting workers), the
    median of each and how many there were."""
    report: dict[str, dict[str, Any]] = {}
    for role, pids in processes.items():
        samples = [m for m in (_memory(pid) for pid in pids) if m is not None]
        if not samples:
            continue
        report[role] = {
            "rss_mib": round(statistics.median(s[0] for s in samples), 1),
            "uss_mib": round(statistics.median(s[1] for s in samples), 1),
            "processes": len(samples),
        }
    return report
