"""``a2e bench --reward-batch`` runs end to end (``--quick``, the engine's two systems only):
its report has the shape the docs give, and verl's path and the drop-in grade each sample
alike. No speed is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from a2e_engine.benchmarks import reward_batch


def test_a_quick_batch_on_the_engine(tmp_path: Path) -> None:
    path = tmp_path / "reward_batch.json"
    proc = subprocess.run(
        [sys.executable, "-m", "a2e_engine.engine.cli", "bench", "--reward-batch", "--quick",
         "--systems", "B,C", "--no-progress", "--json", str(path)],
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "C vs B: 0 of 16 samples differ" in proc.stdout, proc.stdout
    report = json.loads(path.read_text())
    assert set(report) >= {"batch", "systems", "failed", "ratios", "disagreements"}
    assert report["batch"]["samples"] == 16 and report["batch"]["rounds"] == 1
    assert report["failed"] == {}
    assert set(report["systems"]) == {"B", "C"}
    for system in report["systems"].values():
        assert system["wall_s"] > 0 and system["server_cpu_s"] > 0
        assert system["passed"] == [10]  # the five right samples of each problem
        (graded,) = system["rounds"]
        assert len(graded["scores"]) == len(graded["results"]) == 16
    assert report["systems"]["B"]["requests"] == 16 * 8  # verl's path: one request a case
    # What the compiles and runs spent themselves is part of what the server's tree spent.
    programs = report["systems"]["B"]["programs_cpu_s"]
    assert 0 < programs < report["systems"]["B"]["server_cpu_s"], report["systems"]["B"]
    assert report["systems"]["C"]["programs_cpu_s"] is None
    assert "programs CPU s" in proc.stdout
    assert set(report["ratios"]) == {"C/B"}
    assert report["disagreements"] == {"C/B": []}


def test_bad_options_are_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--systems", "B,D"], ["--rounds", "0"], ["--sandboxfusion-pid", "1"]):
        with pytest.raises(SystemExit) as exited:
            reward_batch.main(argv)
        assert exited.value.code == 2
        assert capsys.readouterr().err.strip().splitlines()[-1].startswith("a2e bench")
