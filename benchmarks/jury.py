"""``a2e bench --jury``: what a checker and an interactor add to judging a case, side by side in
one run.

    a2e bench --jury [--cases N] [--rounds R] [--json PATH]

One C++ program (it reads a number and prints it), judged by ``code_eval`` on an engine in this
process, ``--cases`` cases a call, three ways: by comparing its output (``compare``, the
baseline), by a compiled testlib checker (``checker``), and by a testlib interactor that hands
it the number and reads it back (``interactor``). Both jury programs are compiled once, before
anything is measured, so each figure is what a case costs once they are cached. Rounds
interleave the three. Per way: the engine's CPU per case (this process, its zygotes, workers,
the programs they ran), wall time per case, and what it adds to the baseline per case; the
issue's bound for a compiled checker is 3 ms of CPU a case.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from a2e.caps.tools._client import ToolAPI
from a2e_engine.benchmarks._report import publish, refuse_unwritable
from a2e_engine.benchmarks._resources import tree_cpu_s

__all__ = ["Options", "main", "run", "table"]

PROGRAM = (
    '#include <cstdio>\nint main() { long x; std::scanf("%ld", &x); std::printf("%ld\\n", x); }\n'
)
CHECKER = """#include "testlib.h"
int main(int argc, char* argv[]) {
    registerTestlibCmd(argc, argv);
    long long j = ans.readLong(), p = ouf.readLong();
    if (j != p) quitf(_wa, "expected %lld, found %lld", j, p);
    quitf(_ok, "%lld", p);
}
"""
INTERACTOR = """#include "testlib.h"
int main(int argc, char* argv[]) {
    registerInteraction(argc, argv);
    long long x = inf.readLong();
    std::cout << x << std::endl;
    long long p = ouf.readLong();
    if (p != x) quitf(_wa, "expected %lld, found %lld", x, p);
    quitf(_ok, "%lld", p);
}
"""
WAYS = ("compare", "checker", "interactor")
#: After a round, time for its workers to end and be reaped, so that their CPU is counted.
SETTLE_S = 0.5
#: The issue's bound on what a compiled checker adds to a case, in CPU milliseconds.
CHECKER_BOUND_MS = 3.0


@dataclass
class Options:
    cases: int = 40
    rounds: int = 3
    progress: bool = True


def run(options: Options) -> dict[str, Any]:
    from a2e_engine.engine import Engine

    cpu_ms: dict[str, list[float]] = {way: [] for way in WAYS}
    wall_ms: dict[str, list[float]] = {way: [] for way in WAYS}
    with Engine() as engine:
        tools = ToolAPI(engine.connect(client_name="a2e-bench-jury"))
        for way in WAYS:
            _judge(tools, way, 1)  # compiled and cached before anything is measured
        for number in range(options.rounds):
            for way in WAYS:
                if options.progress:
                    print(f"  round {number + 1}/{options.rounds}: {way}", file=sys.stderr)
                before, started = tree_cpu_s(os.getpid()) or 0.0, time.monotonic()
                _judge(tools, way, options.cases)
                wall = time.monotonic() - started
                time.sleep(SETTLE_S)
                spent = (tree_cpu_s(os.getpid()) or 0.0) - before
                cpu_ms[way].append(spent * 1000 / options.cases)
                wall_ms[way].append(wall * 1000 / options.cases)
    base = statistics.median(cpu_ms["compare"])
    rows = []
    for way in WAYS:
        cpu = statistics.median(cpu_ms[way])
        rows.append(
            {
                "way": way,
                "cpu_ms_per_case": round(cpu, 2),
                "wall_ms_per_case": round(statistics.median(wall_ms[way]), 2),
                "added_cpu_ms_per_case": round(cpu - base, 2),
                "rounds_cpu_ms": [round(v, 2) for v in cpu_ms[way]],
            }
        )
    return {
        "machine": {"cores": len(os.sched_getaffinity(0))},
        "cases_per_call": options.cases,
        "rounds": options.rounds,
        "checker_bound_ms": CHECKER_BOUND_MS,
        "rows": rows,
    }


def _judge(tools: ToolAPI, way: str, cases: int) -> None:
    arguments: dict[str, Any] = {
        "program": PROGRAM,
        "language": "cpp",
        "test_cases": [{"input": str(n), "output": str(n)} for n in range(cases)],
    }
    if way == "checker":
        arguments["checker"] = {"source": CHECKER}
    elif way == "interactor":
        arguments["interactor"] = {"source": INTERACTOR}
    result = tools.call(tool_name="code_eval", arguments=arguments, timeout=300)
    if not result.success or result.data["verdict"] != "AC":
        raise RuntimeError(f"{way}: not accepted: {result.error or result.data}")


def table(report: dict[str, Any]) -> str:
    lines = [
        f"A C++ program judged {report['cases_per_call']} cases a call, "
        f"{report['rounds']} rounds, {report['machine']['cores']} cores (medians per case)",
        "",
        f"{'way':<11} {'CPU/case':>10} {'wall/case':>10} {'added CPU':>10}",
    ]
    for row in report["rows"]:
        lines.append(
            f"{row['way']:<11} {row['cpu_ms_per_case']:>8.2f}ms {row['wall_ms_per_case']:>8.2f}ms "
            f"{row['added_cpu_ms_per_case']:>8.2f}ms"
        )
    checker = next(row for row in report["rows"] if row["way"] == "checker")
    within = checker["added_cpu_ms_per_case"] <= report["checker_bound_ms"]
    lines.append(
        f"\na compiled checker adds {checker['added_cpu_ms_per_case']:.2f} ms of CPU a case: "
        + ("within" if within else "PAST")
        + f" the bound of {report['checker_bound_ms']:g} ms"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="a2e bench --jury",
        description="What a checker and an interactor add to judging a case, beside "
        "comparing its output.",
    )
    parser.add_argument("--cases", type=int, default=40, help="cases per call (40)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the three (3)")
    parser.add_argument("--json", metavar="PATH", help="also write the report as JSON")
    parser.add_argument("--no-progress", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    if args.cases < 1 or args.rounds < 1:
        parser.error("--cases and --rounds must be at least 1")
    refuse_unwritable(parser, "--json", args.json)
    try:
        report = run(Options(args.cases, args.rounds, not args.no_progress))
    except RuntimeError as exc:
        print(f"a2e bench --jury: {exc}", file=sys.stderr)
        return 1
    publish(report, table(report), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
