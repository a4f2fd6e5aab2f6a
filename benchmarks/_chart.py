"""The bench report as a PNG for people: throughput against concurrency, and latency against
offered load, for the trivial workload on every system (matplotlib, the ``bench`` extra)."""

from __future__ import annotations

from typing import Any

__all__ = ["draw"]


def draw(report: dict[str, Any], path: str) -> str:
    """Write the chart to ``path``; returns ``path``. Raises ``RuntimeError`` without
    matplotlib or without the trivial workload in the report."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError("the chart needs matplotlib: pip install 'a2e-engine[bench]'") from None
    trivial = report["workloads"].get("trivial")
    if trivial is None:
        raise RuntimeError("the chart is drawn from the trivial workload; run it too")
    labels = report["labels"]
    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    for system, by_c in trivial["results"].items():
        levels = sorted(by_c, key=int)
        left.plot(
            [int(c) for c in levels],
            [by_c[c]["calls_per_s"] for c in levels],
            marker="o",
            label=labels[system],
        )
        offered = trivial["extras"].get(system, {}).get("open_loop", {})
        if any("median_ms" in f for f in offered.values()):
            measured = [f for f in offered.values() if "median_ms" in f]
            points = sorted(measured, key=lambda f: f["offered_per_s"])
            right.plot(
                [p["offered_per_s"] for p in points],
                [p["median_ms"] for p in points],
                marker="o",
                label=labels[system],
            )
    left.set(xlabel="concurrency", ylabel="calls/s", title="Trivial tool: throughput", yscale="log")
    right.set(
        xlabel="offered load (calls/s)",
        ylabel="median latency (ms)",
        title="Trivial tool: latency under open-loop load",
        yscale="log",
    )
    for axes in (left, right):
        axes.grid(True, which="both", alpha=0.3)
        axes.legend(fontsize=8)
    machine = report["machine"]
    figure.suptitle(f"a2e bench: {machine['cpus']} CPUs, Python {machine['python']}")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
