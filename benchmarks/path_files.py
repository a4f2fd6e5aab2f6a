"""Which of our files one request runs through in the server, function by function.

    python -m a2e_engine.benchmarks.path_files [--paths run_code_python,stdio_tool_call,...]
        [--warm-up 30] [--json PATH]
    a2e bench --path-files [the same options]

It starts the server (``a2e serve --http`` on 127.0.0.1, or ``a2e serve --stdio``) under
``benchmarks._traced_server``, sends ``--warm-up`` requests so that every first-call cost is
paid, lets the server settle, then records one quiet second (what it does with no request: its
timers) and one second holding one request and what follows from it (the pool forking the next
worker). Every file of the request's second counts; those the quiet second ran too are marked.

This is the count docs/architecture.md and issue 41 use: every module of ours whose code runs
for the request, imports aside. The server's process only: the zygote and the worker are other
processes, and docs/architecture.md lists their files (the worker's hardening runs before the
request, in a pre-forked worker).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from a2e_engine.benchmarks._calling import BENCH_ENGINE_FLAGS
from a2e_engine.benchmarks._run_code_systems import RunCodeClient
from a2e_engine.benchmarks._shared_servers import server_process

__all__ = ["PATHS", "main", "recorded"]

#: Each path: how to start its server (``http`` or ``stdio``) and one request on it.
PATHS = ("run_code_python", "rest_python_eval", "stdio_tool_call")
_QUIET_S = 1.0
_SETTLE_S = 2.0  # the warm-up's last workers forked and handed over


def _traced(out: str, *argv: str) -> list[str]:
    return [sys.executable, "-m", "a2e_engine.benchmarks._traced_server", out, *argv]


def _window(pid: int, out: Path, send: Callable[[], None] | None) -> dict[str, list[str]]:
    """What the server ran between SIGUSR1 and SIGUSR2, ``send`` done in between (or not)."""
    out.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR1)
    time.sleep(0.1)
    if send is not None:
        send()
    time.sleep(_QUIET_S)
    os.kill(pid, signal.SIGUSR2)
    for _ in range(100):
        if out.exists():  # renamed into place whole
            listing: dict[str, list[str]] = json.loads(out.read_text())
            return listing
        time.sleep(0.05)
    raise RuntimeError(f"the traced server ({pid}) wrote no recording")


@contextlib.contextmanager
def _http(out: str) -> Iterator[tuple[int, Callable[[str], None]]]:
    command = _traced(out, "serve", "--http", "127.0.0.1:0", *BENCH_ENGINE_FLAGS)

    def url_in(line: str) -> str:
        return line.split()[3] if line.startswith("a2e: serving on ") else ""

    with server_process(command, url_in, "the traced a2e serve --http", grace_s=30) as (url, pid):
        client = RunCodeClient(url)

        def send(path: str) -> None:
            if path == "run_code_python":
                answer = client.run_code({"language": "python", "code": "print(1)"})
                if answer.get("run_result", {}).get("stdout") != "1\n":
                    raise RuntimeError(f"/run_code answered {answer}")
            else:
                status, body = client.request(
                    "POST", "/v1/tools/python_eval", {"arguments": {"code": "print(1)"}}
                )
                if status != 200:
                    raise RuntimeError(f"/v1/tools/python_eval answered {status}: {body[:200]!r}")

        yield pid, send


@contextlib.contextmanager
def _stdio(out: str) -> Iterator[tuple[int, Callable[[str], None]]]:
    from a2e._client import A2EClient
    from a2e.caps.tools import ToolAPI
    from a2e.transports._stdio import StdioTransport

    command = _traced(out, "serve", "--stdio", *BENCH_ENGINE_FLAGS)
    transport = StdioTransport(command, stderr=subprocess.DEVNULL)
    try:
        client = A2EClient(transport, client_name="a2e-path-files")
        tools = ToolAPI(client)

        def send(_path: str) -> None:
            result = tools.call("python_eval", {"code": "print(1)"})
            if not result.success:
                raise RuntimeError(f"tool/call failed: {result.error}")

        try:
            yield transport.process.pid, send
        finally:
            client.close()
    finally:
        transport.close()


def recorded(path: str, warm_up: int) -> dict[str, dict[str, list[str]]]:
    """``{"request": {file: functions}, "idle": {...}}`` for one request of ``path``, and for
    a quiet second of the same server."""
    with tempfile.TemporaryDirectory(prefix="a2e-path-files-") as scratch:
        out = Path(scratch) / "recording.json"
        opened = _stdio if path == "stdio_tool_call" else _http
        with opened(str(out)) as (pid, send):
            for _ in range(warm_up):
                send(path)
            time.sleep(_SETTLE_S)
            quiet = _window(pid, out, None)
            busy = _window(pid, out, lambda: send(path))
    return {"request": busy, "idle": quiet}


def _report(path: str, listing: dict[str, dict[str, list[str]]]) -> str:
    request, idle = listing["request"], listing["idle"]
    both = [name for name in request if name in idle]
    lines = [
        f"{path}: {len(request)} files of ours in the server's process "
        f"({len(both)} of them run when idle too, marked *)"
    ]
    for name, functions in request.items():
        shown = ", ".join(functions[:5])
        if len(functions) > 5:
            shown += f", ... ({len(functions)})"
        lines.append(f"  {name + (' *' if name in idle else ''):46} {shown}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="a2e bench --path-files", description=__doc__)
    parser.add_argument("--paths", default=",".join(PATHS), help=f"any of {', '.join(PATHS)}")
    parser.add_argument("--warm-up", type=int, default=30, help="requests sent before recording")
    parser.add_argument("--json", metavar="PATH", help="write the listings as JSON too")
    args = parser.parse_args(argv)
    paths = [p for p in args.paths.split(",") if p]
    unknown = [p for p in paths if p not in PATHS]
    if unknown:
        parser.error(f"unknown path {unknown[0]!r}; known: {', '.join(PATHS)}")
    listings: dict[str, dict[str, dict[str, list[str]]]] = {}
    for path in paths:
        try:
            listings[path] = recorded(path, args.warm_up)
        except RuntimeError as exc:
            print(f"{path}: FAILED: {exc}", file=sys.stderr)
            continue
        print(_report(path, listings[path]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(listings, indent=1))
    return 0 if len(listings) == len(paths) else 1


if __name__ == "__main__":
    sys.exit(main())
