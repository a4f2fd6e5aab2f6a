"""What each optional layer costs a call, end to end: the same trivial tool through engines that
differ by one layer, side by side in one process.

    python -m a2e_engine.benchmarks.layer_throughput [--calls N] [--rounds R]

``benchmarks.layer_costs`` says what a layer adds to preparing one worker; this says what that
means for calls, one client at a time, on this machine (with 2 cores the hardening of the next
worker competes with the call in flight). Rounds interleave the engines so that drift hits all
alike; each engine's best round is kept.
"""

from __future__ import annotations

import argparse
from typing import Any

from a2e.caps.tools._client import ToolAPI
from a2e_engine.benchmarks._measure import closed_loop
from a2e_engine.benchmarks._workloads import BenchTools
from a2e_engine.engine import Engine, EngineConfig, Isolation

#: (row, what differs from every layer on)
VARIANTS: list[tuple[str, dict[str, Any]]] = [
    ("every layer this host allows", {}),
    ("without the uid per session", {"isolation": Isolation(identity=False)}),
    ("without the workspace quota", {"workspace_mb": 0}),
    ("without Landlock", {"isolation": Isolation(landlock=False)}),
    ("without cgroups", {"isolation": Isolation(cgroups=False)}),
    (
        "without namespaces (nor identity)",
        {
            "isolation": Isolation(namespaces=False, identity=False),
            "allow_unprotected_root": True,
        },
    ),
    (
        "only the layers that are always on",
        {
            "isolation": Isolation(namespaces=False, identity=False, landlock=False, cgroups=False),
            "workspace_mb": 0,
            "allow_unprotected_root": True,
        },
    ),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    best: dict[str, dict[str, float]] = {}
    for _ in range(args.rounds):
        for name, settings in VARIANTS:
            config = EngineConfig(prefork=4, **settings)
            with Engine(plugins=[BenchTools()], builtin_tools=False, config=config) as engine:
                tools = ToolAPI(engine.connect())

                def call(tools: ToolAPI = tools) -> None:
                    result = tools.call(tool_name="noop", arguments={})
                    assert result.success, result.error

                figures = closed_loop(call, args.calls).as_dict()
            if name not in best or figures["calls_per_s"] > best[name]["calls_per_s"]:
                best[name] = figures
    reference = best[VARIANTS[0][0]]["calls_per_s"]
    print(f"{'engine (c=1)':40} {'calls/s':>8} {'median ms':>10} {'p99 ms':>8} {'x all':>6}")
    for name, _ in VARIANTS:
        row = best[name]
        print(
            f"{name:40} {row['calls_per_s']:8.0f} {row['median_ms']:10.2f} {row['p99_ms']:8.2f} "
            f"{row['calls_per_s'] / reference:6.2f}"
        )


if __name__ == "__main__":
    main()
