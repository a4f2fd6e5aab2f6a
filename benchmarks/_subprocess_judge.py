"""The alternative to judging with the engine: compile with ``subprocess`` and run each case the
same way, with no isolation at all (``subprocess_judge``, the baseline of the ``judge`` and
``judge_python`` workloads: a Python program's every case a new ``python main.py``, as APPS's
and LiveCodeBench's harnesses run them).

It compiles on every call, as a script that judges one submission at a time does; the engine
has a session's compile cache (each program compiled once, then every call runs it) and
pre-forked workers, and isolates every run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

from a2e_engine.benchmarks._calling import Opened, next_payload
from a2e_engine.benchmarks._workloads import Payload, Workload

__all__ = ["judged_with_subprocess", "subprocess_judge"]


def judged_with_subprocess(payload: Payload) -> str:
    """Compile (but Python), then run every case, each a plain ``subprocess.run``: the
    verdict."""
    arguments = payload.arguments
    where = tempfile.mkdtemp(prefix="a2e-bench-judge-")
    compile_argv: list[str] | None
    try:
        if arguments["language"] == "python":
            source, compile_argv, run_argv = "main.py", None, [sys.executable, "main.py"]
        elif arguments["language"] == "cpp":
            source, compile_argv, run_argv = (
                "main.cpp",
                ["g++", "-O2", "-o", "main", "main.cpp"],
                ["./main"],
            )
        else:
            source, compile_argv, run_argv = (
                "Main.java",
                ["javac", "Main.java"],
                ["java", "-cp", ".", "Main"],
            )
        with open(os.path.join(where, source), "w") as fh:
            fh.write(arguments["program"])
        if compile_argv is not None:
            subprocess.run(compile_argv, cwd=where, check=True, capture_output=True, timeout=60)
        for case in arguments["test_cases"]:
            done = subprocess.run(
                run_argv, cwd=where, input=case["input"], capture_output=True, text=True, timeout=10
            )
            if done.returncode != 0:
                return "RE"
            if done.stdout.split() != case["output"].split():
                return "WA"
        return "AC"
    finally:
        shutil.rmtree(where, ignore_errors=True)


@contextlib.contextmanager
def subprocess_judge(workload: Workload, payloads: list[Payload]) -> Iterator[Any]:

    take = next_payload(payloads)

    def call() -> tuple[int, Any]:
        index, payload = take()
        return index, judged_with_subprocess(payload)

    yield Opened(call)
