"""Cost of one isolated call of a trivial tool, side by side with the baselines, in one process.

    python -m benchmarks.trivial_call [--calls N] [--concurrency C]

Figures are ratios against baselines measured in the same run (machines here are shared and
noisy); absolute numbers drift by 10-25 % between runs.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from a2e.caps.tools.client import ToolAPI
from a2e.caps.tools.models import ToolDefinition
from a2e.caps.tools.plugin import SandboxProfile, ToolPlugin
from engine import Engine, EngineConfig


class Noop(ToolPlugin):
    name = "noop"
    sandbox_profile = SandboxProfile.COMPUTE

    def _list_tools(self) -> list[ToolDefinition]:
        return [ToolDefinition(name="noop", description="returns a small object")]

    def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True}


def _child(conn: Any) -> None:
    conn.send({"ok": True})
    conn.close()


def multiprocessing_process_call() -> None:
    parent, child = multiprocessing.Pipe(duplex=False)
    proc = multiprocessing.get_context("fork").Process(target=_child, args=(child,))
    proc.start()
    child.close()
    parent.recv()
    proc.join()


def bare_fork_call() -> None:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(w, b'{"ok": true}')
        os._exit(0)
    os.close(w)
    os.read(r, 64)
    os.close(r)
    os.waitpid(pid, 0)


def measure(fn: Callable[[], Any], calls: int, concurrency: int = 1) -> dict[str, float]:
    for _ in range(min(20, calls)):
        fn()  # warm-up
    latencies: list[float] = []

    def one() -> None:
        started = time.perf_counter()
        fn()
        latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    if concurrency == 1:
        for _ in range(calls):
            one()
    else:
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(lambda _: one(), range(calls)))
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "calls_per_s": calls / elapsed,
        "median_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    rows: dict[str, dict[str, float]] = {}
    with Engine(plugins=[Noop()], builtin_tools=False, config=EngineConfig(prefork=4)) as engine:
        tools = ToolAPI(engine.connect())

        def engine_call() -> None:
            result = tools.call(tool_name="noop", arguments={})
            assert result.success, result.error

        layers = ", ".join(k for k, v in engine.layers.items() if v.get("active"))
        rows["engine, ToolAPI in-process (c=1)"] = measure(engine_call, args.calls)
        rows[f"engine, ToolAPI in-process (c={args.concurrency})"] = measure(
            engine_call, args.calls, args.concurrency
        )
    rows["multiprocessing.Process per call (c=1)"] = measure(
        multiprocessing_process_call, args.calls
    )
    rows["bare os.fork + pipe per call (c=1)"] = measure(bare_fork_call, args.calls)
    floor = rows["bare os.fork + pipe per call (c=1)"]["calls_per_s"]
    mp = rows["multiprocessing.Process per call (c=1)"]["calls_per_s"]
    print(f"engine layers active: {layers}\n")
    print(
        f"{'approach':44} {'calls/s':>9} {'median ms':>10} {'p99 ms':>8} {'x fork':>7} {'x mp':>6}"
    )
    for name, row in rows.items():
        print(
            f"{name:44} {row['calls_per_s']:9.0f} {row['median_ms']:10.2f} {row['p99_ms']:8.2f} "
            f"{row['calls_per_s'] / floor:7.2f} {row['calls_per_s'] / mp:6.2f}"
        )


if __name__ == "__main__":
    main()
