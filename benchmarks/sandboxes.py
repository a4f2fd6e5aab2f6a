"""E2B sandboxes on ``a2e serve --http``, driven by E2B's own SDK (``e2b-code-interpreter``),
as agentic RL uses them: a sandbox per trajectory, made, used for a few cells, killed.

    a2e bench --sandboxes [--sequential 200] [--burst 200] [--live 2000] [--soak-s 600]
                          [--soak-live 500] [--forks 20] [--tree-width 8] [--json PATH]

- ``sequential``: ``Sandbox.create()`` then its first ``run_code``, one sandbox after another:
  each step's p50 and p99, and the server's CPU (its whole process tree) per sandbox made,
  used once and killed.
- ``burst``: that many clients at once, each creating a sandbox, running 3 cells, killing
  it: failures (the target is none) and the wall time.
- ``live``: that many sandboxes alive at once, each with its code context (one cell run):
  the server tree's proportional memory (PSS) per sandbox, beyond what it held idle, what
  the kernel's slab caches grew by per sandbox (mounts, inodes: not in any PSS), and a
  trivial cell's p50 and p99 with all of them alive; then one more cell in each, to see
  that none was lost, and the time to create one more with all of them alive.
- ``forks`` (``--forks N``, off by default): forks, snapshots, pauses and a tree search, as
  ``benchmarks._sandbox_forks`` says.
- ``soak`` (``--soak-s``, off by default): ``--soak-live`` sandboxes kept alive for that long
  while 100 cells a second run in them and 10 a second are made and as many killed; every
  error counted; then the server stops, and nothing of it may be left: no process, no mount.

The targets (issue 55, on a 2-core machine) are printed beside each figure: create -> first
result p50 <= 20 ms and p99 <= 100 ms; 0 failures in the burst; <= 6 MiB per live sandbox
and a trivial cell p50 <= 5 ms with 2,000 alive; 0 errors and nothing left in a 10-minute soak
of 500 live sandboxes. Absolute figures drift on shared machines: run it where nothing else
runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psutil

from a2e_engine.benchmarks._calling import _http_service
from a2e_engine.benchmarks._resources import tree_cpu_s
from a2e_engine.benchmarks._sandbox_forks import TARGETS as FORK_TARGETS
from a2e_engine.benchmarks._sandbox_forks import forks

TOKEN = "bench-sandboxes-token"
#: What each target is, for the closing table.
TARGETS = {
    "create_to_first_result_p50_ms": 20.0,
    "create_to_first_result_p99_ms": 100.0,
    "burst_failures": 0,
    "pss_per_live_sandbox_mib": 6.0,
    "cell_p50_with_all_live_ms": 5.0,
    "soak_errors": 0,
    "left_after_stop": 0,
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


def _kernel_slab_mib() -> float | None:
    """What the kernel's slab caches hold, in MiB (``/proc/meminfo``'s ``Slab``): the mount
    structures and inodes a sandbox costs beyond its processes' PSS."""
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("Slab:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


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

    idle_mib, idle_slab = _tree_pss_mib(pid), _kernel_slab_mib()
    sandboxes: list[Sandbox] = []
    try:
        for number in range(count):
            sandbox = Sandbox.create(timeout=3600, **opts)
            sandboxes.append(sandbox)
            sandbox.run_code(f"mine = {number}")
        held_mib, held_slab = _tree_pss_mib(pid), _kernel_slab_mib()
        cells = []
        for sandbox in sandboxes[:: max(1, count // 200)]:
            started = time.perf_counter()
            sandbox.run_code("1")
            cells.append((time.perf_counter() - started) * 1000)
        lost = sum(
            1 for number, s in enumerate(sandboxes) if s.run_code("mine").text != str(number)
        )
        started = time.perf_counter()
        Sandbox.create(**opts).kill()
        one_more_ms = (time.perf_counter() - started) * 1000
    finally:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda s: s.kill(), sandboxes))
    return {
        "live_sandboxes": count,
        "pss_per_live_sandbox_mib": (held_mib - idle_mib) / max(1, count),
        "kernel_slab_per_live_sandbox_mib": (
            (held_slab - idle_slab) / max(1, count)
            if held_slab is not None and idle_slab is not None
            else -1.0
        ),
        "cell_p50_with_all_live_ms": statistics.median(cells),
        "cell_p99_with_all_live_ms": _percentile(cells, 0.99),
        "live_sandboxes_that_lost_state": lost,
        "create_with_all_live_ms": one_more_ms,
    }


def soak(
    opts: dict[str, Any], seconds: float, count: int, cells_per_s: float, creates_per_s: float
) -> dict[str, float]:
    """``count`` sandboxes alive for ``seconds``, cells run in them and sandboxes replaced at
    the rates given; every error counted."""
    import random
    import threading

    from e2b_code_interpreter import Sandbox

    errors: list[str] = []
    lock = threading.Lock()
    live: list[Sandbox] = [Sandbox.create(timeout=3600, **opts) for _ in range(count)]
    done = threading.Event()
    cells = replaced = 0

    def failed(exc: BaseException) -> None:
        with lock:
            errors.append(f"{type(exc).__name__}: {exc}")

    def paced(rate: float, one: Callable[[], None]) -> None:
        step, due = 1 / rate, time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            while not done.is_set():
                due += step
                pool.submit(one)
                time.sleep(max(0.0, due - time.monotonic()))

    def cell() -> None:
        nonlocal cells
        with lock:
            sandbox = random.choice(live)
        try:
            if sandbox.run_code("21 * 2").text != "42":
                raise RuntimeError("a cell answered wrong")
            with lock:
                cells += 1
        except Exception as exc:
            with lock:
                still = sandbox in live
            if still:  # a cell in one being replaced may find it gone: not an error
                failed(exc)

    def replace() -> None:
        nonlocal replaced
        try:
            fresh = Sandbox.create(timeout=3600, **opts)
            fresh.run_code("1")
            with lock:
                old = live.pop(random.randrange(len(live)))
                live.append(fresh)
                replaced += 1
            old.kill()
        except Exception as exc:
            failed(exc)

    workers = [
        threading.Thread(target=paced, args=(cells_per_s, cell)),
        threading.Thread(target=paced, args=(creates_per_s, replace)),
    ]
    for worker in workers:
        worker.start()
    time.sleep(seconds)
    done.set()
    for worker in workers:
        worker.join()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda s: s.kill(), live))
    for why in sorted(set(errors))[:5]:
        print(f"  soak error: {why}", file=sys.stderr)
    return {
        "soak_errors": len(errors),
        "soak_cells_per_s": cells / seconds,
        "soak_replaced_per_s": replaced / seconds,
    }


def left_behind(tree: list[psutil.Process], pid: int) -> int:
    """What of a stopped server is still here: processes of its tree, and mounts of its state
    directory (named with its pid)."""
    alive = sum(1 for process in tree if process.is_running() and process.status() != "zombie")
    with open("/proc/self/mountinfo") as mounts:
        mounted = sum(1 for line in mounts if "a2e-engine-" in line and f"-{pid}-" in line)
    return alive + mounted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sequential", type=int, default=200)
    parser.add_argument("--burst", type=int, default=200)
    parser.add_argument("--live", type=int, default=2000)
    parser.add_argument("--soak-s", type=float, default=0.0)
    parser.add_argument("--soak-live", type=int, default=500)
    parser.add_argument("--soak-cells-per-s", type=float, default=100.0)
    parser.add_argument("--soak-creates-per-s", type=float, default=10.0)
    parser.add_argument("--forks", type=int, default=0)
    parser.add_argument("--tree-width", type=int, default=8)
    parser.add_argument("--json", dest="json_path", default="")
    args = parser.parse_args(argv)
    tree = args.tree_width * (args.tree_width + 1) + args.forks if args.forks else 0
    most = max(args.burst, args.live, args.soak_live if args.soak_s else 0, tree, 1) + 32
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
        if args.forks:
            figures.update(forks(opts, pid, args.forks, args.tree_width))
        if args.soak_s:
            rates = (args.soak_cells_per_s, args.soak_creates_per_s)
            figures.update(soak(opts, args.soak_s, args.soak_live, *rates))
        tree = psutil.Process(pid).children(recursive=True)
    if args.soak_s:
        time.sleep(1.0)  # the server's own exit reaps the last of its tree
        figures["left_after_stop"] = left_behind(tree, pid)
    for name, value in figures.items():
        target = TARGETS.get(name, FORK_TARGETS.get(name))
        print(
            f"{name:40} {value:10.2f}" + (f"   (target {target:g})" if target is not None else "")
        )
    if args.json_path:
        with open(args.json_path, "w") as out:
            json.dump(figures, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
