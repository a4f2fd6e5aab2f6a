"""The benchmark scripts run (tiny sizes): they must not rot. Speed is not asserted here."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", *args], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_trivial_call_benchmark() -> None:
    out = run("benchmarks.trivial_call", "--calls", "20", "--concurrency", "2")
    assert "engine, ToolAPI in-process (c=1)" in out and "bare os.fork" in out


@pytest.mark.skipif(os.geteuid() != 0, reason="the layer benchmark needs root")
def test_layer_cost_benchmark() -> None:
    out = run("benchmarks.layer_costs", "--workers", "3", "--rounds", "1")
    assert "+ seccomp" in out and "+ Landlock" in out


def test_layer_throughput_benchmark() -> None:
    out = run("benchmarks.layer_throughput", "--calls", "5", "--rounds", "1")
    assert "every layer this host allows" in out and "only the layers that are always on" in out


def test_tool_search_benchmark() -> None:
    out = run("benchmarks.tool_search")
    assert "BM25 (engine registry)" in out and "substring (spec default)" in out
