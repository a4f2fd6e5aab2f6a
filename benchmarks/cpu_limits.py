"""``a2e bench --cpu-limits``: what a CPU-time limit changes on a busy machine, against the
wall-clock limit graders have today, side by side in one run.

    a2e bench --cpu-limits [--cases N] [--rounds R] [--need S] [--json PATH]

A program that needs ``--need`` seconds of CPU (half its limit; it spins until its own CPU
clock says so, whatever the machine's speed) is judged by ``code_eval`` on an engine in this
process, as many calls at once as the machine has cores, under two loads: alone (1x) and beside
as many busy programs as cores (2x, twice as many busy programs as cores: the RL batch that
oversubscribes the machine by design). Under each load it is judged with ``cpu_time_limit`` and
with today's ``time_limit`` (wall-clock), both at twice ``--need``, in rounds that interleave
the four so that drift hits all alike. Each row says how many cases were TLE (the program was
right every time), the cases' wall-clock and CPU times, and the engine's CPU per case (supervisor,
zygote and workers, the program's own CPU included) and beyond the program's own: what judging
a case costs on top of running it, with and without the CPU-time readings.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psutil

from a2e.caps.tools._client import ToolAPI
from a2e_engine.benchmarks._report import publish, refuse_unwritable
from a2e_engine.benchmarks._resources import tree_cpu_s

__all__ = ["Options", "main", "run", "table"]

#: The program judged: it spends ``{need}`` s of CPU, then answers.
PROGRAM = "import time\nwhile time.process_time() < {need}: pass\nprint('ok')\n"
LOADS = ("1x", "2x")
LIMITS = ("cpu_time_limit", "time_limit")
#: After a round, time for its workers to end and be reaped, so that their CPU is counted.
SETTLE_S = 0.5


@dataclass
class Options:
    cases: int = 4  # per call
    rounds: int = 3
    need: float = 0.5  # CPU seconds the program needs; its limit is twice that
    progress: bool = True


@dataclass
class Row:
    load: str
    limit: str
    cases: int = 0
    tle: int = 0
    wrong: int = 0  # anything but AC or TLE: the benchmark's program is right every time
    times: list[float] = field(default_factory=list)
    cpu_times: list[float] = field(default_factory=list)
    engine_cpu_s: float = 0.0

    def report(self) -> dict[str, Any]:
        program_cpu = statistics.median(self.cpu_times) if self.cpu_times else None
        per_case = self.engine_cpu_s / self.cases if self.cases else None
        return {
            "load": self.load,
            "limit": self.limit,
            "cases": self.cases,
            "tle": self.tle,
            "tle_rate": round(self.tle / self.cases, 3) if self.cases else None,
            "other_verdicts": self.wrong,
            "median_wall_s": _rounded(statistics.median(self.times) if self.times else None),
            "max_wall_s": _rounded(max(self.times) if self.times else None),
            "median_program_cpu_s": _rounded(program_cpu),
            "engine_cpu_ms_per_case": _rounded(per_case and per_case * 1000, 1),
            "beyond_program_cpu_ms_per_case": _rounded(
                per_case and program_cpu and (per_case - program_cpu) * 1000, 1
            ),
        }


def _rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def run(options: Options) -> dict[str, Any]:
    from a2e_engine.engine import Engine, EngineConfig

    cores = len(os.sched_getaffinity(0))
    limit = 2 * options.need
    rows = {(load, kind): Row(load, kind) for load in LOADS for kind in LIMITS}
    config = EngineConfig(prefork=cores, max_workers=2 * cores)
    with Engine(config=config) as engine:
        tools = ToolAPI(engine.connect(client_name="a2e-bench-cpu-limits"))
        _judge(tools, options, {"cpu_time_limit": limit})  # warm: the first calls start zygotes
        for number in range(options.rounds):
            for load in LOADS:
                with _busy(cores if load == "2x" else 0) as busy:
                    for kind in LIMITS:
                        _progress(options, f"round {number + 1}/{options.rounds}: {load} {kind}")
                        before = _engine_cpu_s(busy)
                        cases = _round(tools, options, cores, {kind: limit})
                        time.sleep(SETTLE_S)
                        row = rows[load, kind]
                        row.engine_cpu_s += _engine_cpu_s(busy) - before
                        for case in cases:
                            row.cases += 1
                            row.tle += case["verdict"] == "TLE"
                            row.wrong += case["verdict"] not in ("AC", "TLE")
                            row.times.append(case["time"])
                            row.cpu_times.append(case["cpu_time"])
    return {
        "machine": {"cores": cores, "python": sys.version.split()[0]},
        "need_s": options.need,
        "limit_s": limit,
        "cases_per_call": options.cases,
        "calls_at_once": cores,
        "rows": [row.report() for row in rows.values()],
    }


def _round(tools: ToolAPI, options: Options, calls: int, limits: dict[str, float]) -> list[Any]:
    with ThreadPoolExecutor(calls) as pool:
        results = list(pool.map(lambda _: _judge(tools, options, limits), range(calls)))
    return [case for result in results for case in result]


def _judge(tools: ToolAPI, options: Options, limits: dict[str, float]) -> list[Any]:
    arguments = {
        "program": PROGRAM.format(need=options.need),
        "test_cases": [{"input": "", "output": "ok"}] * options.cases,
        **limits,
    }
    result = tools.call(tool_name="code_eval", arguments=arguments, timeout=300)
    if not result.success:
        raise RuntimeError(f"code_eval failed: {result.error}")
    tests: list[Any] = result.data["tests"]
    return tests


def _engine_cpu_s(busy: list[int]) -> float:
    """CPU spent so far by this process (the supervisor) and everything beneath it (zygotes,
    workers, the programs they judged), but for the busy programs, which are beneath it too."""
    spent = tree_cpu_s(os.getpid()) or 0.0
    for pid in busy:
        with contextlib.suppress(psutil.Error):
            times = psutil.Process(pid).cpu_times()
            spent -= times.user + times.system
    return spent


@contextmanager
def _busy(programs: int) -> Iterator[list[int]]:
    """``programs`` processes that spin for as long as the block runs; their pids."""
    busy = [
        # Each in a session of its own, as each judged program is: the scheduler shares a core
        # between sessions first (autogroups), so that this makes them busy programs alike.
        subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
        for _ in range(programs)
    ]
    try:
        time.sleep(0.2 if busy else 0)  # scheduled and spinning before the first case starts
        yield [process.pid for process in busy]
    finally:
        for process in busy:
            process.kill()
            process.wait()


def _progress(options: Options, line: str) -> None:
    if options.progress:
        print(f"  {line}", file=sys.stderr, flush=True)


def table(report: dict[str, Any]) -> str:
    cores, limit = report["machine"]["cores"], report["limit_s"]
    lines = [
        f"A program needing {report['need_s']:g} s of CPU, limit {limit:g} s, "
        f"{report['calls_at_once']} calls of {report['cases_per_call']} cases at once, "
        f"{cores} cores; 2x: {cores} busy programs beside them",
        "",
        f"{'load':<5} {'limit':<15} {'cases':>5} {'TLE':>4} {'TLE %':>6} {'wall med':>9} "
        f"{'wall max':>9} {'prog CPU':>9} {'CPU/case':>9} {'beyond':>8}",
    ]
    for row in report["rows"]:
        rate = row["tle_rate"]
        lines.append(
            f"{row['load']:<5} {row['limit']:<15} {row['cases']:>5} {row['tle']:>4} "
            f"{(rate or 0) * 100:>5.0f}% {row['median_wall_s'] or 0:>8.2f}s "
            f"{row['max_wall_s'] or 0:>8.2f}s {row['median_program_cpu_s'] or 0:>8.3f}s "
            f"{row['engine_cpu_ms_per_case'] or 0:>7.0f}ms "
            f"{row['beyond_program_cpu_ms_per_case'] or 0:>6.0f}ms"
        )
    wrong = sum(row["other_verdicts"] for row in report["rows"])
    if wrong:
        lines.append(f"\n{wrong} cases had a verdict other than AC or TLE: the run is not valid")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="a2e bench --cpu-limits",
        description="A program needing half its limit, judged by CPU-time and by wall-clock "
        "limits, alone and on a machine with twice as many busy programs as cores.",
    )
    parser.add_argument("--cases", type=int, default=4, help="cases per call (4)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the four rows (3)")
    parser.add_argument(
        "--need", type=float, default=0.5, help="CPU seconds the program needs (0.5)"
    )
    parser.add_argument("--json", metavar="PATH", help="also write the report as JSON")
    parser.add_argument("--no-progress", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    if args.cases < 1 or args.rounds < 1:
        parser.error("--cases and --rounds must be at least 1")
    if not 0 < args.need <= 30:
        parser.error("--need must be in (0, 30] seconds")
    refuse_unwritable(parser, "--json", args.json)
    options = Options(args.cases, args.rounds, args.need, not args.no_progress)
    report = run(options)
    publish(report, table(report), args.json)
    return 1 if any(row["other_verdicts"] for row in report["rows"]) else 0


if __name__ == "__main__":
    sys.exit(main())
