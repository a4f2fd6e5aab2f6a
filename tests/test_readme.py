"""The README's examples, and those of docs/, run as written; the isolation table in
docs/isolation.md is the one the layers generate."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
PROTOCOL = (ROOT / "docs" / "protocol.md").read_text()
ISOLATION = (ROOT / "docs" / "isolation.md").read_text()


def blocks(language: str, text: str = README) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


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
    example = next(b for b in blocks("bash", PROTOCOL) if b.startswith("printf"))
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
    assert begin in ISOLATION, "docs/isolation.md lost its generated isolation table"
    table = ISOLATION.split(begin, 1)[1].split(end, 1)[0]
    assert table == markdown_table(), "regenerate it: python -m a2e_engine.sandbox.layers"


def test_the_docs_link_to_files_that_exist() -> None:
    for page in (ROOT / "README.md", *(ROOT / "docs").glob("*.md")):
        for target in re.findall(r"\]\(([^)#:]+)\)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.name} links to missing {target}"
