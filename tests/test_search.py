"""Ranked tool search (BM25) over a catalog of 1,500+ real API descriptions, through the engine's
registry and over the wire, with the spec's rules for deferred tools and filters."""

from __future__ import annotations

import subprocess
import sys

from a2e.caps.tools._client import ToolAPI
from a2e.caps.tools._models import ToolDefinition, ToolListRequest
from a2e_engine.benchmarks._tool_catalog import QUERIES, stdlib_catalog
from a2e_engine.benchmarks.tool_search import Catalog, evaluate
from a2e_engine.engine import Engine, EngineConfig
from a2e_engine.engine._registry import ToolRegistry


def test_recall_at_5_over_the_standard_library_catalog() -> None:
    tools = stdlib_catalog()
    assert len(tools) >= 1000
    assert {target for _, target in QUERIES} <= {t.name for t in tools}
    registry = ToolRegistry([Catalog(tools)])

    def search(query: str) -> list[str]:
        return [t.name for t in registry.select(ToolListRequest(query=query))]

    report = evaluate(search, QUERIES)
    assert report["recall@5"] >= 0.75, report  # measured 0.78-0.80; substring search: ~0.0
    assert search("zzzz qqqq") == []


def test_deferred_tools_and_filters_in_ranked_search() -> None:
    tools = [
        ToolDefinition(name="resize_image", description="Resize an image", tags=["image"]),
        ToolDefinition(
            name="crop_image",
            description="Crop an image",
            tags=["image", "edit"],
            defer_loading=True,
        ),
        ToolDefinition(name="send_mail", description="Send an e-mail message", toolkit="mail"),
    ]
    registry = ToolRegistry([Catalog(tools)])

    def names(**request: object) -> list[str]:
        return [t.name for t in registry.select(ToolListRequest(**request))]  # type: ignore[arg-type]

    assert names() == ["resize_image", "send_mail"]  # list mode: deferred tools left out
    assert names(query="image") == ["resize_image"]
    assert set(names(query="crop an image", include_deferred=True)) == {
        "crop_image",
        "resize_image",
    }
    assert names(query="crop an image", include_deferred=True)[0] == "crop_image"
    assert names(query="image", include_deferred=True, filter_tags=["image", "edit"]) == [
        "crop_image"
    ]
    assert names(query="message", filter_kind="mail") == ["send_mail"]


def test_search_over_the_wire_ranks_the_engines_tools() -> None:
    with Engine(config=EngineConfig(prefork=1)) as engine:
        tools = ToolAPI(engine.connect())
        shell = [t.name for t in tools.list(query="run a shell command")]
        web = [t.name for t in tools.list(query="fetch a web page over HTTP")]
        assert (shell[0], web[0]) == ("run_shell", "http_request")
        tools.client.close()


def test_the_index_and_its_imports_wait_for_the_first_search() -> None:
    """``bm25s`` (numpy, scipy) is imported by the first search, not by starting an engine."""
    script = (
        "import sys\n"
        "from a2e.caps.tools._client import ToolAPI\n"
        "from a2e_engine.engine import Engine, EngineConfig\n"
        "with Engine(config=EngineConfig(prefork=1)) as engine:\n"
        "    tools = ToolAPI(engine.connect())\n"
        "    assert tools.call(tool_name='python_eval', arguments={'code': '1'}).success\n"
        "    before = 'bm25s' in sys.modules\n"
        "    found = [t.name for t in tools.list(query='read a file')]\n"
        "    print(before, 'bm25s' in sys.modules, 'read_file' in found)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.stdout.split() == ["False", "True", "True"], done.stderr[-2000:]
