"""Two checkouts of this engine side by side: is a change cheaper per call, and by how much?

    git worktree add ../before HEAD~1
    python -m a2e_engine.benchmarks.compare ../before . [--rounds 6] [--calls 300] [--rate 60]

Machines here are shared, and their speed drifts by 25 % within an hour, so a change is only
judged against the code before it on the same machine at the same time. Each round runs both
checkouts, in alternating order, each in a fresh interpreter (two checkouts cannot share one: their
modules have the same names). A run measures the trivial tool (``BenchTools.noop``, so both
checkouts need ``benchmarks._workloads``): the median latency of sequential calls 20 ms apart, at
idle; calls/s at concurrency 1 and 2 with the CPU per call of the supervisor, the zygote and the
workers; and the median and p99 latency under an open-loop load (``--rate`` calls/s for
``--calls / --rate`` seconds). The table gives each figure's median over the rounds for both
checkouts, and their ratio.

Both checkouts must live on the same side of ``/tmp``: workers get a private ``/tmp``, and the
engine binds back into it what they must still see there, code included. A checkout under
``/tmp`` costs each of its workers a bind mount per package, which the other does not pay, so
a comparison across that line measures where the trees are, not what changed between them.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
from types import ModuleType
from typing import Any

__all__ = ["main"]

#: A figure whose larger value is better (all others: smaller is better).
HIGHER_IS_BETTER = ("c1_per_s", "c2_per_s")


def measure(tree: str, calls: int, rate: float) -> dict[str, float]:
    """In the child: one run of the engine of ``tree`` (already first on ``sys.path``)."""
    import threading

    prefix = "a2e_engine." if installs_under_one_name(tree) else ""
    private = "_" if has_private_modules(tree) else ""
    engine_package = _from_tree(tree, f"{prefix}engine")
    Engine, EngineConfig = engine_package.Engine, engine_package.EngineConfig
    ToolAPI = _from_tree(tree, f"a2e.caps.tools.{private}client").ToolAPI
    open_loop = _from_tree(tree, f"{prefix}benchmarks.{private}measure").open_loop
    CpuMeter = _from_tree(tree, f"{prefix}benchmarks.{private}resources").CpuMeter
    BenchTools = _from_tree(tree, f"{prefix}benchmarks.{private}workloads").BenchTools
    figures: dict[str, float] = {}
    config = EngineConfig(prefork=4, max_workers=8)
    with Engine(plugins=[BenchTools()], config=config) as engine:
        client = engine.connect(client_name="a2e-compare")
        tools = ToolAPI(client)

        def call() -> None:
            result = tools.call(tool_name="noop", arguments={}, timeout=60)
            if not result.success:
                raise RuntimeError(f"noop failed: {result.error}")

        for _ in range(20):
            call()
        idle = []
        for _ in range(max(10, calls // 3)):
            time.sleep(0.02)
            began = time.perf_counter()
            call()
            idle.append(time.perf_counter() - began)
        figures["idle_median_ms"] = statistics.median(idle) * 1000
        assert engine.pool is not None
        for concurrency in (1, 2):
            meter = CpuMeter({"supervisor": [os.getpid()], "zygote": engine.pool.zygote_pids()})
            left = [calls]
            lock = threading.Lock()

            def caller(left: list[int] = left, lock: threading.Lock = lock) -> None:
                while True:
                    with lock:
                        if left[0] <= 0:
                            return
                        left[0] -= 1
                    call()

            meter.start()
            began = time.perf_counter()
            threads = [threading.Thread(target=caller) for _ in range(concurrency)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            figures[f"c{concurrency}_per_s"] = calls / (time.perf_counter() - began)
            time.sleep(0.3)  # the last workers' exits, reaped and counted
            for name, value in meter.per_call_ms(calls).items():
                figures[f"c{concurrency}_{name}"] = value
        loaded = open_loop(call, rate, duration_s=max(1.0, calls / rate))
        figures["open_median_ms"] = loaded.median_ms
        figures["open_p99_ms"] = loaded.p99_ms
        client.close()
    return figures


def _from_tree(tree: str, name: str) -> ModuleType:
    """The module ``name``, which must come from ``tree``: another engine installed in the
    environment would otherwise answer for a module the tree lacks."""
    module = importlib.import_module(name)
    where = os.path.realpath(str(module.__file__))
    if not where.startswith(os.path.realpath(tree) + os.sep):
        raise RuntimeError(f"{name} came from {where}, not from {tree}")
    return module


#: Where a checkout keeps ``BenchTools``: private now, public in checkouts from before.
_WORKLOADS = ("_workloads.py", "workloads.py")


def has_private_modules(tree: str) -> bool:
    """Whether ``tree``'s modules are ``_named`` behind their packages (checkouts from the
    change that made them so on)."""
    return os.path.isfile(os.path.join(tree, "benchmarks", _WORKLOADS[0]))


def installs_under_one_name(tree: str) -> bool:
    """Whether ``tree`` imports its packages as ``a2e_engine.engine`` ... (through the links in
    its ``a2e_engine/``), not as ``engine`` ... (a checkout from before)."""
    return os.path.isdir(os.path.join(tree, "a2e_engine", "engine"))


def run_in_child(tree: str, calls: int, rate: float) -> dict[str, float]:
    """One run of ``tree`` in a fresh interpreter that imports that tree's code, whatever is
    installed."""
    env = dict(os.environ, PYTHONPATH=os.path.realpath(tree))
    command = [sys.executable, __file__, "--one", tree, "--calls", str(calls), "--rate", str(rate)]
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, timeout=900)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the run of {tree} failed:\n{done.stderr[-3000:]}")
    figures: dict[str, float] = json.loads(lines[-1])
    return figures


def table(old: str, new: str, runs: dict[str, list[dict[str, float]]]) -> str:
    rows = [f"{'figure (median over rounds)':34} {'old':>10} {'new':>10} {'new/old':>8}"]
    for key in runs[old][0]:
        before = statistics.median(r[key] for r in runs[old])
        after = statistics.median(r[key] for r in runs[new])
        ratio = after / before if before else float("nan")
        better = "  better" if (ratio > 1) == (key in HIGHER_IS_BETTER) and ratio != 1 else ""
        rows.append(f"{key:34} {before:10.2f} {after:10.2f} {ratio:8.2f}{better}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("old", nargs="?", help="the checkout before the change")
    parser.add_argument("new", nargs="?", help="the checkout with it")
    parser.add_argument("--rounds", type=int, default=6, help="runs of each checkout (6)")
    parser.add_argument("--calls", type=int, default=300, help="calls per closed-loop figure")
    parser.add_argument("--rate", type=float, default=60.0, help="open-loop calls/s (60)")
    parser.add_argument("--json", metavar="PATH", help="also write every run as JSON")
    parser.add_argument("--one", metavar="TREE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one, args.calls, args.rate)), flush=True)
        return 0
    if not args.old or not args.new:
        parser.error("name two checkouts: OLD NEW")
    trees = [os.path.realpath(args.old), os.path.realpath(args.new)]
    for tree in trees:
        workloads = (os.path.join(tree, "benchmarks", name) for name in _WORKLOADS)
        if not any(os.path.isfile(path) for path in workloads):
            parser.error(f"{tree} is not a checkout of this engine with benchmarks/_workloads.py")
    if _under_tmp(trees[0]) != _under_tmp(trees[1]):
        parser.error(
            "one checkout is under /tmp and the other is not: workers bind code under /tmp "
            "into their private /tmp, which the other tree does not pay for; put both on the "
            "same side (e.g. git worktree add ../before HEAD~1)"
        )
    old, new = trees
    runs: dict[str, list[dict[str, float]]] = {old: [], new: []}
    for round_ in range(args.rounds):
        for tree in trees if round_ % 2 == 0 else trees[::-1]:
            print(f"round {round_ + 1}/{args.rounds}: {tree}", file=sys.stderr, flush=True)
            runs[tree].append(run_in_child(tree, args.calls, args.rate))
    print(table(old, new, runs))
    if args.json:
        report: dict[str, Any] = {"old": old, "new": new, "runs": runs}
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)
    return 0


def _under_tmp(path: str) -> bool:
    """``sandbox._paths.under``'s test, written here: this module runs against other checkouts,
    which need not have that module."""
    return path == "/tmp" or path.startswith("/tmp/")


if __name__ == "__main__":
    sys.exit(main())
