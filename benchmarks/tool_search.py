"""Ranked tool search over a catalog of real API descriptions: recall@5 and latency.

    python -m a2e_engine.benchmarks.tool_search

The catalog is the documented public API of the Python standard library
(``benchmarks._tool_catalog``, more than 1,500 tools); the queries are natural-language requests
with one known answer each. Search goes through the engine's own registry, as a ``tool/list``
request with a ``query`` would. Against it, in the same run: the spec's default substring search.
"""

from __future__ import annotations

import statistics
import time

from a2e.caps.tools._models import ToolDefinition, ToolListRequest
from a2e.caps.tools._plugin import ToolPlugin
from a2e_engine.benchmarks._tool_catalog import QUERIES, stdlib_catalog
from a2e_engine.engine._registry import ToolRegistry


class Catalog(ToolPlugin):
    name = "catalog"

    def __init__(self, tools: list[ToolDefinition]) -> None:
        super().__init__()
        self.tools = tools

    def _list_tools(self) -> list[ToolDefinition]:
        return self.tools

    def _execute_tool(self, tool_name: str, arguments: dict[str, object]) -> dict[str, object]:
        return {}


def evaluate(search: object, queries: list[tuple[str, str]]) -> dict[str, float]:
    """recall@1 and @5, and per-query latency, of ``search(query) -> ranked names``."""
    hits1 = hits5 = 0
    latencies = []
    for query, target in queries:
        started = time.perf_counter()
        ranked = search(query)  # type: ignore[operator]
        latencies.append(time.perf_counter() - started)
        hits1 += ranked[:1] == [target]
        hits5 += target in ranked[:5]
    latencies.sort()
    return {
        "recall@1": hits1 / len(queries),
        "recall@5": hits5 / len(queries),
        "median_ms": statistics.median(latencies) * 1000,
        "max_ms": latencies[-1] * 1000,
    }


def main() -> None:
    started = time.perf_counter()
    tools = stdlib_catalog()
    registry = ToolRegistry([Catalog(tools)])
    built = time.perf_counter() - started

    def bm25(query: str) -> list[str]:
        return [t.name for t in registry.select(ToolListRequest(query=query))]

    def substring(query: str) -> list[str]:
        plugin = registry.plugins[0]
        return [t.name for t in ToolPlugin._search_tools(plugin, query, [], tools)]

    print(f"{len(tools)} tools, {len(QUERIES)} queries; catalog and index built in {built:.2f} s")
    print(f"{'search':28} {'recall@1':>9} {'recall@5':>9} {'median ms':>10} {'max ms':>8}")
    for name, search in (("BM25 (engine registry)", bm25), ("substring (spec default)", substring)):
        row = evaluate(search, QUERIES)
        print(
            f"{name:28} {row['recall@1']:9.2f} {row['recall@5']:9.2f} {row['median_ms']:10.2f} "
            f"{row['max_ms']:8.2f}"
        )


if __name__ == "__main__":
    main()
