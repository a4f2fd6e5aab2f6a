"""``a2e bench --sandboxes --forks N``: copying sandboxes, driven by E2B's SDK (issue 56).

- ``fork``: a sandbox holding a 50 MB heap forked into one child, ``N`` times (each child
  killed after), the p50 per fork; then ``N`` fresh such sandboxes, each forked into 8
  children at once, the p50 of all 8, and each child's first cell after it; the private memory
  (USS) of a fresh child's interpreter; the server's CPU per child.
- ``snapshot``, ``create from snapshot``, ``pause`` and ``resume`` (``connect``) of such a
  sandbox, ``N`` times each: their p50.
- ``tree``: a best-of-``width`` search of 3 levels (``width`` x ``width`` leaves), 3 cells per
  node, each node's children forked from it and run ``width`` at a time; every leaf checks
  that it sees its own path (variables and files) and no other node's. Beside it, the same
  leaves made from scratch: a new sandbox per leaf that runs the 9 cells of its path. Both
  timed, with the server's CPU for each.

The targets (a 2-core machine): a fork <= 10 ms per child p50, 8 children of a 50 MB heap
<= 60 ms in all, <= 1 MiB of private memory per fresh child; snapshot, pause and resume
<= 10 ms each.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psutil

from a2e_engine.benchmarks._resources import tree_cpu_s

__all__ = ["TARGETS", "forks"]

TARGETS = {
    "fork_one_child_p50_ms": 10.0,
    "fork_8_children_50mb_p50_ms": 60.0,
    "private_mib_per_fresh_child": 1.0,
    "snapshot_50mb_p50_ms": 10.0,
    "pause_p50_ms": 10.0,
    "resume_p50_ms": 10.0,
    "tree_isolation_failures": 0,
}

#: A 50 MB heap, every page of it written, and a variable to copy.
HEAP = "heap = bytearray(b'\\x01') * (50 * 2**20)\nvalue = 1"


def _ms(since: float) -> float:
    return (time.perf_counter() - since) * 1000


def _timed(count: int, one: Callable[[], None]) -> float:
    """The p50 of ``count`` runs of ``one``, in ms."""
    times = []
    for _ in range(count):
        started = time.perf_counter()
        one()
        times.append(_ms(started))
    return statistics.median(times)


def _uid_of(sandbox: Any) -> int:
    return int(sandbox.commands.run("id -u").stdout)


def _interpreters(family_uid: int) -> set[int]:
    """The pids of the copied interpreters of a family (they keep its first's uid)."""
    return {p.pid for p in psutil.process_iter(["uids"]) if p.info["uids"].real == family_uid}


def fork_figures(opts: dict[str, Any], pid: int, count: int) -> dict[str, float]:
    from e2b_code_interpreter import Sandbox

    figures: dict[str, float] = {}
    parent = Sandbox.create(**opts)
    try:
        parent.run_code(HEAP)

        def one_child() -> None:
            (child,) = parent.fork(count=1)
            child.kill()

        figures["fork_one_child_p50_ms"] = _timed(count, one_child)
    finally:
        parent.kill()
    totals, first_cells, private, cpu = [], [], [], 0.0
    for _ in range(count):
        parent = Sandbox.create(**opts)
        try:
            parent.run_code(HEAP)
            family = _uid_of(parent)
            before = _interpreters(family)
            cpu_before = tree_cpu_s(pid) or 0.0
            started = time.perf_counter()
            children = parent.fork(count=8)
            totals.append(_ms(started))
            cpu += (tree_cpu_s(pid) or 0.0) - cpu_before
            for pid_ in _interpreters(family) - before:
                try:
                    private.append(psutil.Process(pid_).memory_full_info().uss / 2**20)
                except psutil.Error:
                    continue
            for child in children:
                started = time.perf_counter()
                child.run_code("value")
                first_cells.append(_ms(started))
                child.kill()
        finally:
            parent.kill()
    figures["fork_8_children_50mb_p50_ms"] = statistics.median(totals)
    figures["first_cell_in_a_child_p50_ms"] = statistics.median(first_cells)
    figures["private_mib_per_fresh_child"] = statistics.median(private) if private else 0.0
    figures["server_cpu_ms_per_forked_child"] = cpu * 1000 / (8 * count)
    return figures


def state_figures(opts: dict[str, Any], count: int) -> dict[str, float]:
    from e2b_code_interpreter import Sandbox

    figures: dict[str, float] = {}
    sandbox = Sandbox.create(**opts)
    try:
        sandbox.run_code(HEAP)
        snapshots: list[str] = []
        figures["snapshot_50mb_p50_ms"] = _timed(
            count, lambda: snapshots.append(sandbox.create_snapshot().snapshot_id)
        )

        def start_from() -> None:
            Sandbox.create(template=snapshots[0], **opts).kill()

        figures["create_from_snapshot_p50_ms"] = _timed(count, start_from)
        for snapshot in snapshots:
            Sandbox.delete_snapshot(snapshot, **opts)
        pauses, resumes = [], []
        for _ in range(count):
            started = time.perf_counter()
            sandbox.pause()
            pauses.append(_ms(started))
            started = time.perf_counter()
            Sandbox.connect(sandbox.sandbox_id, **opts)
            resumes.append(_ms(started))
        figures["pause_p50_ms"] = statistics.median(pauses)
        figures["resume_p50_ms"] = statistics.median(resumes)
        if sandbox.run_code("value").text != "1":
            raise RuntimeError("a sandbox lost its state across pauses")
    finally:
        sandbox.kill()
    return figures


def _cells(node: str) -> list[str]:
    """A node's 3 cells: each does a little work and leaves its mark, in a variable and a
    file."""
    mark = (
        f"path = globals().get('path', []) + [{node!r}]\n"
        f"open('/home/user/path.txt', 'a').write({node!r} + '\\n')\n"
    )
    work = "work = sum(i * i for i in range(100_000))"
    return [mark, work, work]


def _check(sandbox: Any, nodes: list[str]) -> int:
    """1 if ``sandbox`` sees other than exactly its path ``nodes``, else 0."""
    seen = sandbox.run_code("path, open('/home/user/path.txt').read().split()").text
    return 0 if seen == repr((nodes, nodes)) else 1


def tree_figures(opts: dict[str, Any], pid: int, width: int) -> dict[str, float]:
    from e2b_code_interpreter import Sandbox

    def run(sandbox: Any, node: str) -> None:
        for cell in _cells(node):
            if sandbox.run_code(cell).error is not None:
                raise RuntimeError(f"a cell of node {node} failed")

    failures = 0
    cpu_before, started = tree_cpu_s(pid) or 0.0, time.perf_counter()
    root = Sandbox.create(**opts)
    run(root, "r")
    level_one = root.fork(count=width)
    root.kill()

    def grow(index: int) -> int:
        child = level_one[index]
        node = f"r{index}"
        run(child, node)
        leaves = child.fork(count=width)
        child.kill()
        failed = 0
        for leaf_index, leaf in enumerate(leaves):
            name = f"{node}.{leaf_index}"
            run(leaf, name)
            failed += _check(leaf, ["r", node, name])
            leaf.kill()
        return failed

    with ThreadPoolExecutor(width) as pool:
        failures = sum(pool.map(grow, range(width)))
    tree_ms = _ms(started)
    tree_cpu = (tree_cpu_s(pid) or 0.0) - cpu_before

    def from_scratch(index: int) -> int:
        failed = 0
        for leaf_index in range(width):
            path = ["r", f"r{index}", f"r{index}.{leaf_index}"]
            sandbox = Sandbox.create(**opts)
            for node in path:
                run(sandbox, node)
            failed += _check(sandbox, path)
            sandbox.kill()
        return failed

    cpu_before, started = tree_cpu_s(pid) or 0.0, time.perf_counter()
    with ThreadPoolExecutor(width) as pool:
        failures += sum(pool.map(from_scratch, range(width)))
    scratch_ms = _ms(started)
    scratch_cpu = (tree_cpu_s(pid) or 0.0) - cpu_before
    return {
        "tree_leaves": float(width * width),
        "tree_by_forks_s": tree_ms / 1000,
        "tree_by_forks_server_cpu_s": tree_cpu,
        "tree_leaves_from_scratch_s": scratch_ms / 1000,
        "tree_leaves_from_scratch_server_cpu_s": scratch_cpu,
        "tree_isolation_failures": float(failures),
    }


def forks(opts: dict[str, Any], pid: int, count: int, width: int) -> dict[str, float]:
    """Every figure of the module's docstring."""
    figures = fork_figures(opts, pid, count)
    figures.update(state_figures(opts, count))
    if width:
        figures.update(tree_figures(opts, pid, width))
    return figures
