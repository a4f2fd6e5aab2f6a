"""``python_cells`` for real, in a sandboxed worker: state kept from cell to cell, what each one
printed, showed and raised, as a Jupyter kernel reports it; cells that outstay their time, also
when they fight the interruption; files in and out, confined; the output caps."""

from __future__ import annotations

import ast
import base64
import os
from collections.abc import Iterator
from typing import Any

import pytest

from a2e.caps.tools._client import ToolAPI
from a2e_engine.engine import Engine, EngineConfig
from a2e_engine.tools._python_cells import MAX_TEXT_CHARS, mime_bundle


@pytest.fixture(scope="module")
def tools() -> Iterator[ToolAPI]:
    with Engine(config=EngineConfig(prefork=1, max_workers=2)) as engine:
        yield ToolAPI(engine.connect())


def _cells(tools: ToolAPI, cells: list[str], timeout: float = 30, **arguments: Any) -> Any:
    result = tools.call(
        tool_name="python_cells", arguments={"cells": cells, **arguments}, timeout=timeout
    )
    assert result.success, result.error
    return result.data


def test_cells_share_their_names_and_report_as_a_kernel_does(tools: ToolAPI) -> None:
    """SandboxFusion's own jupyter tests (sandbox/tests/runners/test_jupyter.py), and more."""
    data = _cells(
        tools,
        [
            'a = "hello"',
            "a",
            "print(a)",
            'import sys\nsys.stderr.write("This is an error message\\n")',
            "assert False",
            "print(a)",
            "a;",
            "def half(x):\n    return x / 0",
            "half(4)",
        ],
    )
    assert data["status"] == "Finished"
    cells = data["cells"]
    assert [set(cell) for cell in cells] == [
        {"stdout", "stderr", "display", "error", "execution_time"}
    ] * 9
    assert cells[0] == {**cells[0], "stdout": "", "display": [], "error": []}
    assert cells[1]["display"] == [{"text/plain": "'hello'"}]
    assert cells[2]["stdout"] == "hello\n" and cells[2]["display"] == []
    # The last expression's value is shown, as Jupyter shows write()'s count.
    assert cells[3]["stderr"] == "This is an error message\n"
    assert cells[3]["display"] == [{"text/plain": "25"}]
    (failed,) = cells[4]["error"]
    assert failed["ename"] == "AssertionError" and failed["evalue"] == ""
    assert failed["traceback"][-1] == "AssertionError\n"
    assert cells[5]["stdout"] == "hello\n", "an error stops its own cell, not the next"
    assert cells[6]["display"] == [], "a trailing ; hides the value"
    (divided,) = cells[8]["error"]
    assert divided["ename"] == "ZeroDivisionError"
    trace = "".join(divided["traceback"])
    assert '"<cell 9>", line 1' in trace and '"<cell 8>", line 2' in trace
    assert "return x / 0" in trace, "the cell's source is quoted, as IPython quotes it"
    assert "python_cells.py" not in trace


def test_rich_values_are_mime_bundles_and_display_shows_more(tools: ToolAPI) -> None:
    data = _cells(
        tools,
        [
            "class Table:\n"
            "    def __repr__(self): return 'Table()'\n"
            "    def _repr_html_(self): return '<table></table>'\n"
            "    def _repr_png_(self): return b'\\x89PNG'\n"
            "    def _repr_latex_(self): raise ValueError('no latex')\n"
            "Table()",
            "display(1, 'two')\n3",
            "_ + 1",
        ],
    )
    shown = data["cells"][0]["display"]
    assert shown == [
        {
            "text/plain": "Table()",
            "text/html": "<table></table>",
            "image/png": base64.b64encode(b"\x89PNG").decode(),
        }
    ]
    assert data["cells"][1]["display"] == [
        {"text/plain": "1"},
        {"text/plain": "'two'"},
        {"text/plain": "3"},
    ]
    assert data["cells"][2]["display"] == [{"text/plain": "4"}]


def test_a_cell_past_its_timeout_is_interrupted_and_the_next_one_runs(tools: ToolAPI) -> None:
    stubborn = (
        "import time\n"
        "for _ in range(20):\n"
        "    try:\n"
        "        time.sleep(10)\n"
        "    except BaseException:\n"
        "        pass\n"
        "time.sleep(10)"
    )
    data = _cells(
        tools,
        ["import time\ntime.sleep(30)", "print('next')", "while True:\n    pass", stubborn, "2"],
        cell_timeout=0.5,
        total_timeout=20,
    )
    slept, after, spun, fought, last = data["cells"]
    assert data["status"] == "Finished"
    assert slept["error"][0]["ename"] == "CellTimeoutError"
    assert slept["error"][0]["evalue"] == "cell 1 ran past its 0.5 s"
    assert 0.5 <= slept["execution_time"] < 5
    assert after["stdout"] == "next\n"
    assert spun["error"][0]["ename"] == "CellTimeoutError"
    # It swallows the interruption 20 times: it is interrupted again every 0.1 s, until it
    # lets one through.
    assert fought["error"][0]["ename"] == "CellTimeoutError"
    assert 0.5 + 19 * 0.1 <= fought["execution_time"] < 10
    assert last["display"] == [{"text/plain": "2"}]


def test_past_the_total_timeout_the_run_stops_there(tools: ToolAPI) -> None:
    data = _cells(
        tools,
        [
            "x = 1",
            "while True:\n    try:\n        pass\n    except BaseException:\n        pass",
            "print('never')",
        ],
        total_timeout=1,
    )
    assert data["status"] == "TimeLimitExceeded"
    assert len(data["cells"]) == 2, "the cells after the one that ran out did not run"
    assert data["cells"][1]["error"][0]["evalue"] == "the cells ran past their 1 s in all"


def test_code_that_outlasts_every_interruption_is_killed_at_the_deadline(
    tools: ToolAPI,
) -> None:
    """A long call into C is not interrupted between bytecodes: the call's deadline kills it."""
    result = tools.call(
        tool_name="python_cells",
        arguments={"cells": ["sum(range(10**12))"], "cell_timeout": 0.2},
        timeout=2,
    )
    assert not result.success and result.reason == "timeout"
    again = _cells(tools, ["1 + 1"])
    assert again["cells"][0]["display"] == [{"text/plain": "2"}]


def test_files_in_and_out(tools: ToolAPI) -> None:
    """``files`` land in the workspace only; ``fetch_files`` reads a relative path there, and
    an absolute one as the cells see it (their run layer over the host's files)."""
    data = _cells(
        tools,
        [
            "import os\ncwd = os.getcwd()",
            "text = open('data/in.txt').read()",
            "open('out.txt', 'w').write(text.upper())",
            "open('/mnt/out.txt', 'w').write('layer')",
            "cwd",
        ],
        files={"data/in.txt": base64.b64encode(b"shout").decode()},
        fetch_files=["out.txt", "missing.txt", "/mnt/out.txt", "/etc/hostname", "../../etc/passwd"],
    )
    with open("/etc/hostname", "rb") as fh:
        hostname = fh.read()
    assert data["files"] == {
        "out.txt": base64.b64encode(b"SHOUT").decode(),
        "/mnt/out.txt": base64.b64encode(b"layer").decode(),
        "/etc/hostname": base64.b64encode(hostname).decode(),
    }
    assert not os.path.exists("/mnt/out.txt")
    workspace = ast.literal_eval(data["cells"][-1]["display"][0]["text/plain"])
    state_dir = os.path.dirname(
        os.path.dirname(os.path.dirname(workspace))
    )  # <state>/<guard>/session/workspace
    for path in ("../escape.txt", f"{state_dir}/escape.txt"):
        refused = tools.call(
            tool_name="python_cells",
            arguments={"cells": ["1"], "files": {path: base64.b64encode(b"x").decode()}},
        )
        assert not refused.success and "outside the allowed roots" in str(refused.error), path
    # An absolute path lands in the run layer, as SandboxFusion's files do in its overlay.
    placed = _cells(tools, ["open('/mnt/data/in.txt').read()"], files={"/mnt/data/in.txt": "aW4="})
    assert placed["cells"][0]["display"] == [{"text/plain": "'in'"}], placed
    assert not os.path.exists("/mnt/data/in.txt")
    linked = _cells(tools, ["import os\nos.symlink('/etc/passwd', 'leak')"], fetch_files=["leak"])
    assert linked["files"] == {}, "a symlink out of the workspace is not followed"


def test_the_cells_have_no_subprocesses_and_no_network(tools: ToolAPI) -> None:
    data = _cells(
        tools,
        ["import subprocess\nsubprocess.run(['true'])", "import socket\nsocket.socket()"],
    )
    for cell in data["cells"]:
        assert cell["error"] and cell["error"][0]["ename"] == "PermissionError", cell


def test_output_past_its_budget_is_cut_with_a_marker(tools: ToolAPI) -> None:
    data = _cells(tools, ["print('x' * 700_000)", "print('y' * 700_000)", "print('z')"])
    first, second, third = (cell["stdout"] for cell in data["cells"])
    assert first == "x" * 700_000 + "\n"
    assert second.startswith("y" * (MAX_TEXT_CHARS - 700_001))
    assert second.endswith("characters of stdout omitted ...]")
    assert third == "[... 2 characters of stdout omitted ...]"


@pytest.mark.parametrize(
    ("arguments", "why"),
    [
        ({"cells": "print(1)"}, "must be of type array"),
        ({"cells": [1]}, "cells must be an array of strings"),
        ({"cells": [], "cell_timeout": -1}, "cell_timeout must be a number of seconds"),
        ({"cells": [], "total_timeout": True}, "'total_timeout' must be of type number"),
        ({"cells": [], "total_timeout": 1e10}, "total_timeout must be a number of seconds"),
        ({"cells": [], "files": {"a": "not base64!"}}, "is not base64"),
        ({"cells": [], "fetch_files": [3]}, "fetch_files must be an array of paths"),
        ({"cells": ["1"] * 1001}, "at most 1000 cells"),
    ],
)
def test_bad_arguments_are_refused_naming_the_problem(
    tools: ToolAPI, arguments: dict[str, Any], why: str
) -> None:
    result = tools.call(tool_name="python_cells", arguments=arguments)
    assert not result.success and why in str(result.error)


def test_a_broken_rich_repr_leaves_the_rest_of_the_bundle() -> None:
    class Odd:
        def __repr__(self) -> str:
            return "Odd()"

        def _repr_html_(self) -> str:
            raise RuntimeError("broken")

        def _repr_markdown_(self) -> None:
            return None

    assert mime_bundle(Odd()) == {"text/plain": "Odd()"}
