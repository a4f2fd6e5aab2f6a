"""``a2e demo``: a short tour of the engine, each step a real call in a fresh sandboxed worker,
then the calls per second of the simplest one."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from a2e.caps.tools._client import ToolAPI
from a2e.caps.tools._models import ToolEvent
from a2e_engine.engine.cli._arguments import Subcommands
from a2e_engine.engine.cli._engine_options import (
    add_engine_options,
    engine_from_args,
    layer_summary,
    started,
)

__all__ = ["DEMO_STEPS", "register"]


def register(sub: Subcommands) -> None:
    """Add ``a2e demo``."""
    demo = sub.add_parser("demo", help="run a short tour of the engine")
    add_engine_options(demo)
    demo.set_defaults(func=run_demo)


DEMO_STEPS: list[tuple[str, str, dict[str, Any], float]] = [
    (
        "Stream output while the code runs",
        "python_eval",
        {
            "code": "import time\nfor i in range(1, 4):\n    print(f'step {i}')\n"
            "    time.sleep(0.2)\nsum(range(10**6))"
        },
        10,
    ),
    (
        "The network is closed to python_eval",
        "python_eval",
        {"code": "import socket\nsocket.create_connection(('127.0.0.1', 9))"},
        10,
    ),
    (
        "New processes are refused under the compute profile",
        "python_eval",
        {"code": "import os\nos.fork()"},
        10,
    ),
    (
        "Only the call's own processes, its own uid, a scrubbed environment",
        "python_eval",
        {
            "code": "import os\nprint('processes:', [p for p in os.listdir('/proc') "
            "if p.isdigit()])\nprint('uid:', os.getuid())\ndict(os.environ)"
        },
        10,
    ),
    (
        "A call writes into a layer of its own; the host's files stay as they are",
        "python_eval",
        {
            "code": "open('/mnt/scratch.txt', 'w').write('gone with the call')\n"
            "print(open('/mnt/scratch.txt').read())\nopen('/etc/a2e-demo', 'w')"
        },
        10,
    ),
    (
        "... and the next call finds none of it",
        "python_eval",
        {"code": "import os\nos.path.exists('/mnt/scratch.txt')"},
        10,
    ),
    (
        "Shell commands run too: a real /bin/sh, still without a network",
        "run_shell",
        {"command": "echo $((6 * 7)); python3 -c 'import socket; socket.socket()' 2>&1 | tail -1"},
        10,
    ),
    (
        "code_eval grades like a benchmark harness; exiting early does not pass",
        "code_eval",
        {
            "program": "import sys\ndef add(a, b):\n    sys.exit(0)\n",
            "tests": "def check(f):\n    assert f(1, 2) == 3\n",
            "entry_point": "add",
        },
        10,
    ),
    (
        "A runaway loop is killed at its deadline",
        "python_eval",
        {"code": "print('spinning...')\nwhile True: pass"},
        2,
    ),
    (
        "Memory is capped (catchable MemoryError)",
        "python_eval",
        {"code": "x = bytearray(4 * 1024**3)"},
        10,
    ),
    (
        "Files: the workspace is shared by a session's calls",
        "python_eval",
        {"code": "open('notes.txt', 'w').write('written by an earlier call\\n')"},
        10,
    ),
    ("... and read_file stays inside its roots", "read_file", {"path": "notes.txt"}, 10),
    ("... even through '..'", "read_file", {"path": "../../../../../../etc/shadow"}, 10),
]


def run_demo(args: argparse.Namespace) -> int:
    print("a2e-engine demo: every call below runs in a fresh, sandboxed worker process.\n")
    with started(engine_from_args(args)) as engine:
        print(f"isolation layers: {layer_summary(engine)}\n")
        tools = ToolAPI(engine.connect(client_name="a2e-demo"))
        print("tools:", ", ".join(t.name for t in tools.list()), "\n")
        for title, tool, arguments, timeout in DEMO_STEPS:
            print(f"== {title}\n   {tool} {json.dumps(arguments)[:110]}")

            def show(event: ToolEvent) -> None:
                text = str(event.data.get("chunk", event.data.get("message", ""))).rstrip()
                print(f"   [event {event.seq}] {text}")

            result = tools.call(
                tool_name=tool, arguments=arguments, streaming=True, on_event=show, timeout=timeout
            )
            if result.success:
                print(f"   -> ok in {result.duration_ms} ms: {json.dumps(result.data)[:300]}")
            else:
                print(f"   -> {result.error_code}: {result.error}")
                if result.data:
                    print(f"      partial data: {json.dumps(result.data)[:200]}")
            print()
        count, began = 200, time.perf_counter()
        for _ in range(count):
            tools.call(tool_name="python_eval", arguments={"code": "1 + 1"})
        elapsed = time.perf_counter() - began
        print(
            f"== {count} sequential python_eval calls, each in a fresh sandboxed process: "
            f"{count / elapsed:.0f} calls/s ({elapsed / count * 1000:.1f} ms per call)"
        )
    return 0
