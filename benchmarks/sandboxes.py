"""E2B sandboxes on ``a2e serve --http``, driven by E2B's own SDK (``e2b-code-interpreter``),
as agentic RL uses them: a sandbox per trajectory, made, used for a few cells, killed.

    python -m a2e_engine.benchmarks.sandboxes [--sequential 200] [--burst 200] [--live 2000]
                                              [--json PATH]

- ``sequential``: ``Sandbox.create()`` then its first ``run_code``, one sandbox after another:
  each step's p50 and p99, and the server's CPU (its whole process tree) per sandbox made,
  used once and killed.
- ``burst``: that many clients at once, each creating a sandbox, running 3 cells, killing
  it: failures (the target is none) and the wall time.
- ``live``: that many sandboxes alive at once, each with its code context (one cell run):
  the server tree's proportional memory (PSS) per sandbox, beyond what it held idle, and a
  trivial cell's p50 and p99 with all of them alive; then one more cell in each, to see
  that none was lost.

The targets (issue 55, on a 2-core machine) are printed beside each figure: create -> first
result p50 <= 20 ms and p99 <= 100 ms; 0 failures in the burst; <= 6 MiB per live sandbox
and a trivial cell p50 <= 5 ms with 2,000 alive. Absolute figures drift on shared machines:
run it where nothing else runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psutil

from a2e_engine.benchmarks._calling import _http_service
from a2e_engine.benchmarks._resources import tree_cpu_s

TOKEN = "bench-sandboxes-token"
#: What each target is, for the closing table.
TARGETS = {
    "create_to_first_result_p50_ms": 20.0,
    "create_to_first_result_p99_ms": 100.0,
    "burst_failures": 0,
    "pss_per_live_sandbox_mib": 6.0,
    "cell_p50_with_all_live_ms": 5.0,
}


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _tree_pss_mib(root: int) -> float:
    """The proportional memory of ``root`` and every process beneath it, in MiB."""
    total = 0
    try:
        tree = [psutil.Process(root), *psutil.Process(root).children(recursive=True)]
    except psutil.Error:
        return 0.0
    for process in tree:
        try:
            total += process.memory_full_info().pss
        except psutil.Error:
            continue
    return total / 2**20


def sequential(opts: dict[str, Any], pid: int, count: int) -> dict[str, float]:
    from e2b_code_interpreter import Sandbox

    Sandbox.create(**opts).kill()  # the first of a kind warms what every later one uses
    creates, cells, both = [], [], []
    cpu_before = tree_cpu_s(pid) or 0.0
    for _ in range(count):
        started = time.perf_counter()
        sandbox = Sandbox.create(**opts)
        made = time.perf_counter()
        result = sandbox.run_code("1 + 1")
        done = time.perf_counter()
        if result.text != "2":
            raise RuntimeError(f"a first cell answered {result.text!r}, not '2'")
        sandbox.kill()
        creates.append((made - started) * 1000)
        cells.append((done - made) * 1000)
        both.append((done - started) * 1000)
    cpu_ms = ((tree_cpu_s(pid) or 0.0) - cpu_before) * 1000 / count
    return {
        "create_p50_ms": statistics.median(creates),
        "first_cell_p50_ms": statistics.median(cells),
        "create_to_first_result_p50_ms": statistics.median(both),
        "create_to_first_result_p99_ms": _percentile(both, 0.99),
        "server_cpu_ms_per_sandbox": cpu_ms,
    }


def burst(opts: dict[str, Any], count: int) -> dict[str, float]:
    from e2b_code_interpreter import Sandbox

    def trajectory(number: int) -> str:
        try:
            sandbox = Sandbox.create(**opts)
            try:
                sandbox.run_code(f"x = {number}")
                sandbox.run_code("y = x * 2")
                if sandbox.run_code("y").text != str(number * 2):
                    return "a cell lost what the one before it defined"
            finally:
                sandbox.kill()
        except Exception as exc:  # every failure is counted, with why
            return f"{type(exc).__name__}: {exc}"
        return ""

    started = time.perf_counter()
    with ThreadPoolExecutor(count) as pool:
        failures = [why for why in pool.map(trajectory, range(count)) if why]
    for why in sorted(set(failures))[:5]:
        print(f"  burst failure: {why}", file=sys.stderr)
    return {"burst_failures": len(failures), "burst_wall_s": time.perf_counter() - started}


def live(opts: dict[str, Any], pid: int, count: int) -> dict[str, float]:
    from e2b_code_interpreter import Sandbox

    idle_mib = _tree_pss_mib(pid)
    sandboxes: list[Sandbox] = []
    try:
        for number in range(count):
            sandbox = Sandbox.create(timeout=3600, **opts)
            sandboxes.append(sandbox)
            sandbox.run_code(f"mine = {number}")
        held_mib = _tree_pss_mib(pid)
        cells = []
        for sandbox in sandboxes[:: max(1, count // 200)]:
            started = time.perf_counter()
            sandbox.run_code("1")
            cells.append((time.perf_counter() - started) * 1000)
        lost = sum(
            1 for number, s in enumerate(sandboxes) if s.run_code("mine").text != str(number)
        )
    finally:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda s: s.kill(), sandboxes))
    return {
        "live_sandboxes": count,
        "pss_per_live_sandbox_mib": (held_mib - idle_mib) / max(1, count),
        "cell_p50_with_all_live_ms": statistics.median(cells),
        "cell_p99_with_all_live_ms": _percentile(cells, 0.99),
        "live_sandboxes_that_lost_state": lost,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sequential", type=int, default=200)
    parser.add_argument("--burst", type=int, default=200)
    parser.add_argument("--live", type=int, default=2000)
    parser.add_argument("--json", dest="json_path", default="")
    args = parser.parse_args(argv)
    most = max(args.burst, args.live, 1) + 8
    # One trainer is one client address, with three connections per sandbox in use (the
    # SDK's control plane, envd and code interpreter clients).
    connections = str(max(1024, 4 * args.burst))
    flags = (
        *("--token", TOKEN, "--sandboxes-per-client", str(most)),
        *("--max-connections", connections, "--max-connections-per-address", connections),
        *("--max-idle-connections", connections),
    )
    figures: dict[str, float] = {}
    with _http_service(*flags) as (url, pid):
        opts = {"api_key": TOKEN, "api_url": url, "sandbox_url": url}
        if args.sequential:
            figures.update(sequential(opts, pid, args.sequential))
        if args.burst:
            figures.update(burst(opts, args.burst))
        if args.live:
            figures.update(live(opts, pid, args.live))
    for name, value in figures.items():
        target = TARGETS.get(name)
        print(
            f"{name:40} {value:10.2f}" + (f"   (target {target:g})" if target is not None else "")
        )
    if args.json_path:
        with open(args.json_path, "w") as out:
            json.dump(figures, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
