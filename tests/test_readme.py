"""The README's examples run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def test_the_python_examples_run() -> None:
    script = "\n".join(blocks("python"))
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:3] == ["2", "", "{'words': 3}"]
    assert lines[3].startswith("cancelled") and lines[4] == "tool_denied"


def test_the_stdio_example_runs() -> None:
    example = next(b for b in blocks("bash") if b.startswith("printf"))
    example = example.replace(
        "a2e serve --stdio", f"{sys.executable} -m a2e_engine.engine.cli serve --stdio"
    )
    proc = subprocess.run(["bash", "-c", example], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert [line.split('"type":"')[1].split('"')[0] for line in proc.stdout.splitlines()] == [
        "handshake/resp",
        "tool/event",
        "tool/call/resp",
    ]
    assert '"chunk":"42\\n"' in proc.stdout


def test_the_isolation_table_is_the_one_the_layers_generate() -> None:
    from a2e_engine.sandbox.layers import markdown_table

    begin, end = "<!-- layers: python -m a2e_engine.sandbox.layers -->\n", "<!-- /layers -->"
    assert begin in README, "the README lost its generated isolation table"
    table = README.split(begin, 1)[1].split(end, 1)[0]
    assert table == markdown_table(), "regenerate it: python -m a2e_engine.sandbox.layers"
