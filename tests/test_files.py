"""The file tools on real files in a real sandboxed worker: what they do, and what they refuse."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest

from a2e.caps.tools._client import ToolAPI
from a2e.caps.tools._models import ToolResult
from a2e_engine.engine import Engine, EngineConfig


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    with Engine(config=EngineConfig(read_roots=("/etc",))) as running:
        yield running


@pytest.fixture
def tools(engine: Engine) -> Iterator[ToolAPI]:
    client = engine.connect()
    yield ToolAPI(client)
    client.close()


def call(tools: ToolAPI, tool: str, **arguments: Any) -> ToolResult:
    return tools.call(tool_name=tool, arguments=arguments, timeout=20)


def ok(tools: ToolAPI, tool: str, **arguments: Any) -> dict[str, Any]:
    result = call(tools, tool, **arguments)
    assert result.success, result.error
    assert isinstance(result.data, dict)
    return result.data


def refused(tools: ToolAPI, tool: str, why: str, **arguments: Any) -> None:
    result = call(tools, tool, **arguments)
    assert not result.success and why in (result.error or ""), (tool, arguments, result.error)


def test_write_read_append_create(tools: ToolAPI) -> None:
    ok(tools, "write_file", path="notes/a.txt", content="one\n", make_dirs=True)
    ok(tools, "write_file", path="notes/a.txt", content="two\n", mode="append")
    assert ok(tools, "read_file", path="notes/a.txt") == {"content": "one\ntwo\n", "size": 8}
    assert ok(tools, "read_file", path="notes/a.txt", offset=4, length=3)["content"] == "two"
    ok(tools, "write_file", path="notes/a.txt", content="fresh")
    assert ok(tools, "read_file", path="notes/a.txt")["content"] == "fresh"
    refused(tools, "write_file", "File exists", path="notes/a.txt", content="x", mode="create")
    refused(tools, "write_file", "No such file", path="missing/dir/a.txt", content="x")
    refused(tools, "write_file", "mode must be", path="b.txt", content="x", mode="truncate")


def test_binary_is_base64_or_refused(tools: ToolAPI) -> None:
    blob = bytes(range(256))
    ok(
        tools,
        "write_file",
        path="blob.bin",
        content=base64.b64encode(blob).decode(),
        encoding="base64",
    )
    refused(tools, "read_file", "not UTF-8 text; read it with encoding: 'base64'", path="blob.bin")
    read = ok(tools, "read_file", path="blob.bin", encoding="base64")
    assert base64.b64decode(read["content_base64"]) == blob
    refused(tools, "write_file", "not valid base64", path="x.bin", content="@@@", encoding="base64")


def test_sizes_are_capped(tools: ToolAPI) -> None:
    chunk = "x" * (3 * 1024 * 1024)
    ok(tools, "write_file", path="big.txt", content=chunk)
    ok(tools, "write_file", path="big.txt", content=chunk, mode="append")
    refused(tools, "read_file", "the limit is 4194304", path="big.txt")
    assert len(ok(tools, "read_file", path="big.txt", length=1000)["content"]) == 1000
    refused(tools, "write_file", "the limit is 4194304", path="huge.txt", content=chunk * 2)
    # Bigger than a job frame: refused by the engine before any worker sees it.
    refused(tools, "write_file", "exceed the limit of", path="huge.txt", content=chunk * 3)


def test_list_glob_grep_stat(tools: ToolAPI) -> None:
    for path, text in (
        ("src/app.py", "import os\nTODO = 1\n"),
        ("src/lib/util.py", "# todo\n"),
        ("README.md", "todo list\n"),
    ):
        ok(tools, "write_file", path=path, content=text, make_dirs=True)
    listing = ok(tools, "list_dir", path="src")
    assert [(e["name"], e["type"]) for e in listing["entries"]] == [
        ("app.py", "file"),
        ("lib", "dir"),
    ]
    assert ok(tools, "glob", pattern="**/*.py")["matches"] == ["src/app.py", "src/lib/util.py"]
    found = ok(tools, "grep", pattern="todo", ignore_case=True, include="*.py")["matches"]
    assert found == [
        {"path": "src/app.py", "line": 2, "text": "TODO = 1"},
        {"path": "src/lib/util.py", "line": 1, "text": "# todo"},
    ]
    info = ok(tools, "stat", path="src/app.py")
    assert (info["type"], info["size"]) == ("file", len("import os\nTODO = 1\n"))
    assert ok(tools, "grep", pattern="^root:", path="/etc", include="passwd")["matches"]
    refused(tools, "grep", "pattern:", pattern="(unclosed")


def test_delete_and_move_stay_in_the_workspace(tools: ToolAPI) -> None:
    ok(tools, "write_file", path="d/one.txt", content="1", make_dirs=True)
    ok(tools, "move", source="d/one.txt", destination="two.txt")
    refused(tools, "move", "exists; pass overwrite", source="two.txt", destination="two.txt")
    refused(tools, "delete", "pass recursive", path="d")
    ok(tools, "delete", path="d", recursive=True)
    ok(tools, "delete", path="two.txt")
    refused(tools, "delete", "cannot be deleted", path=".", recursive=True)
    refused(tools, "stat", "No such file", path="two.txt")


ESCAPES = ["../../../../../../etc/passwd-copy", "/etc/a2e-attack", "/root/.bashrc", "link/x"]


@pytest.mark.parametrize("path", ESCAPES)
def test_writes_never_leave_the_workspace(tools: ToolAPI, path: str) -> None:
    ok(tools, "run_shell", command="ln -sfn /etc link && ln -sfn /etc/hostname host")
    for tool, arguments in (
        ("write_file", {"path": path, "content": "pwned"}),
        ("delete", {"path": path}),
        ("move", {"source": "host", "destination": path}),
    ):
        refused(tools, tool, "outside the allowed roots", **arguments)
    refused(tools, "write_file", "is a symbolic link", path="host", content="pwned")
    refused(
        tools,
        "write_file",
        "outside the allowed roots",
        path="link/new",
        content="x",
        make_dirs=True,
    )


@pytest.mark.parametrize("tool", ["read_file", "list_dir", "stat", "grep", "glob"])
def test_reads_stay_inside_their_roots(tools: ToolAPI, tool: str) -> None:
    ok(tools, "run_shell", command="ln -sfn /root r")
    arguments: dict[str, Any] = {"path": "/root"} if tool != "read_file" else {"path": "r/.bashrc"}
    if tool in ("grep", "glob"):
        arguments["pattern"] = "x" if tool == "grep" else "*"
    refused(tools, tool, "outside the allowed roots", **arguments)
    refused(tools, "glob", "without '..'", pattern="../*")
