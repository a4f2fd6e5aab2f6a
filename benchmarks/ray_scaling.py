"""How the engine on Ray scales with nodes: 1, 2, 3 local nodes, calls spread over all of them.

    python -m a2e_engine.benchmarks.ray_scaling [--nodes 1,2,3] [--concurrency 4,8] [--seconds S]

One local cluster (``ray.cluster_utils.Cluster``, every node on loopback with one CPU of Ray's
own accounting) grows to each node count in turn; one ``RayEngine`` on it gives each new node
an engine, and one spread client runs the trivial workload in a closed loop over all of them.
It reports calls/s, the ratio to one node, and the driver's CPU per call (this process: the
client, its channels, placement), the one cost of the Ray path that does not grow with the
nodes. On a machine whose cores all nodes share, more nodes add overhead, not speed:
docs/cluster.md gives the model for a real cluster.
"""

from __future__ import annotations

import argparse
import resource
import time
from typing import Any

from a2e_engine.benchmarks._calling import engine_call
from a2e_engine.benchmarks._measure import closed_loop
from a2e_engine.benchmarks._workloads import WORKLOADS

__all__ = ["main", "scaling"]

#: How long a node added to the cluster may take to get its engine.
GROW_TIMEOUT_S = 120.0


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def scaling(nodes: list[int], concurrency: list[int], seconds: float) -> list[dict[str, Any]]:
    from a2e_engine.engine.cluster._loopback import stay_on_loopback

    stay_on_loopback()
    import ray
    from ray.cluster_utils import Cluster

    from a2e.caps.tools._client import ToolAPI
    from a2e_engine.benchmarks._workloads import BenchTools
    from a2e_engine.engine import EngineConfig, RayEngine

    trivial = next(w for w in WORKLOADS if w.key == "trivial")
    payloads = trivial.payloads()
    node_args: dict[str, Any] = {"num_cpus": 1, "node_ip_address": "127.0.0.1"}
    rows = []
    cluster = Cluster(
        initialize_head=True, head_node_args={**node_args, "include_dashboard": False}
    )
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        config = EngineConfig(prefork=4, max_workers=8)
        with RayEngine(plugins=[BenchTools()], config=config, watch_s=0.2) as engine:
            client = engine.connect(spread=True, client_name="a2e-bench")
            call = engine_call(ToolAPI(client), trivial, payloads)
            for count in sorted(set(nodes)):
                _grow(cluster, engine, count, node_args)
                for c in concurrency:
                    before = _cpu_s()
                    figures = closed_loop(call, 100_000, c, max_seconds=seconds)
                    driver_ms = (_cpu_s() - before) * 1000 / max(1, figures.calls)
                    rows.append(
                        {
                            "nodes": count,
                            "concurrency": c,
                            "calls_per_s": round(figures.calls_per_s, 1),
                            "driver_cpu_ms": round(driver_ms, 2),
                        }
                    )
            client.close()
    finally:
        ray.shutdown()
        cluster.shutdown()
    for row in rows:
        one = next(
            (r for r in rows if r["nodes"] == 1 and r["concurrency"] == row["concurrency"]), None
        )
        if one:
            row["x_one_node"] = round(row["calls_per_s"] / one["calls_per_s"], 2)
    return rows


def _grow(cluster: Any, engine: Any, count: int, node_args: dict[str, Any]) -> None:
    """Add nodes up to ``count`` and wait until each has an engine the spread client uses."""
    while len(cluster.list_all_nodes()) < count:
        cluster.add_node(**node_args)
    deadline = time.monotonic() + GROW_TIMEOUT_S
    while len(engine.nodes()) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{count} nodes did not all get an engine in {GROW_TIMEOUT_S:g} s")
        time.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m a2e_engine.benchmarks.ray_scaling")
    parser.add_argument("--nodes", default="1,2,3", help="node counts (default 1,2,3)")
    parser.add_argument("--concurrency", default="4,8", help="levels (default 4,8)")
    parser.add_argument("--seconds", type=float, default=3.0, help="per figure (default 3)")
    args = parser.parse_args(argv)
    try:
        nodes = [int(n) for n in args.nodes.split(",")]
        levels = [int(c) for c in args.concurrency.split(",")]
    except ValueError:
        parser.error("--nodes and --concurrency take comma-separated integers")
    if any(n < 1 or n > 8 for n in nodes) or any(c < 1 or c > 64 for c in levels):
        parser.error("--nodes must be 1-8 and --concurrency 1-64")
    rows = scaling(nodes, levels, args.seconds)
    print(f"{'nodes':>5} {'c':>3} {'calls/s':>8} {'x 1 node':>9} {'driver CPU ms/call':>19}")
    for row in rows:
        ratio = f"{row['x_one_node']:9.2f}" if "x_one_node" in row else " " * 9
        print(
            f"{row['nodes']:>5} {row['concurrency']:>3} {row['calls_per_s']:8.1f} {ratio} "
            f"{row['driver_cpu_ms']:19.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
