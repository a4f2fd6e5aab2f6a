"""One RL reward batch, graded three ways side by side in one run.

    a2e bench --reward-batch [--rounds 3] [--sandboxfusion-url URL [--sandboxfusion-pid PID]]
                             [--systems A,B,C] [--threads 8] [--quick] [--json PATH]

The batch (``benchmarks._reward_batch_corpus``): 48 samples, 8 for each of six stdin/stdout
problems (three in Python, three in C++), 8 cases each, 30 right and 18 that fail in the ways
rollouts fail, one of them a loop that never ends. Graded as verl's batch reward manager grades
a step's samples, ``--threads`` (8) of them at a time, by:

* **A**: verl's SandboxFusion reward (``benchmarks._verl_client``: one ``/run_code`` per case,
  a sample's cases side by side, at most 32 requests in flight) against SandboxFusion at
  ``--sandboxfusion-url``, or, without one, against the stand-in
  (``benchmarks.sandboxfusion_standin``) started for the run;
* **B**: the same client against ``/run_code`` of an ``a2e serve --http`` started for the run
  on 127.0.0.1 with its default settings;
* **C**: the engine's drop-in (``a2e.adapters.verl.compute_score_with_cases``: one
  ``code_eval`` call a case) against the same server.

Each problem's language reaches the graders the way a verl user grading C++ gives it: to
``check_correctness`` on verl's path (its own ``compute_score`` sends every program as Python),
and as the sample's ``language`` to the drop-in (``extra_info``'s, in a trainer).

Each round grades the whole batch once on each system, in an order that rotates from round to
round; each system's sources carry a comment of their own (round and system), so no compile is
answered from an earlier run's. Per system: the median wall time of its rounds, the CPU its
server's whole process tree spent meanwhile (the programs and compilers included; the graders'
own is not counted) and the whole machine's (``_machine_busy_s`` says why), the requests sent
(A and B: ``/run_code`` POSTs; C: the engine's ``a2e_calls_total``), the compiles that ran (a
``/run_code`` answer's ``compile_result`` that was not ``cached``), what those compiles and
every run spent by their own account (the answers' ``cpu_time``: the floor any grader of the
batch pays, whatever it adds; none where the answers do not say, as SandboxFusion's do not),
and the samples that scored 1. Each ratio X÷Y is the median over rounds of
Y's figure over X's: how many times faster X was, or how many times less CPU it took. Then the
samples whose score or per-case results differ between two systems in a round.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx
import psutil

from a2e_engine.benchmarks._calling import http_service
from a2e_engine.benchmarks._report import publish, refuse_unwritable
from a2e_engine.benchmarks._resources import tree_cpu_s
from a2e_engine.benchmarks._reward_batch_corpus import QUICK_PROBLEMS, Sample, samples
from a2e_engine.benchmarks._run_code_systems import (
    RunCodeClient,
    listening_process,
    sandboxfusion_standin,
)
from a2e_engine.benchmarks._verl_client import Answer, verl_reward

__all__ = ["SYSTEMS", "Options", "main", "run", "table"]

#: Each system: what grades, through what, on which server.
SYSTEMS = {
    "A": "verl's path -> SandboxFusion /run_code",
    "B": "verl's path -> a2e /run_code",
    "C": "the drop-in -> a2e code_eval",
}
#: The pairs whose per-sample results are compared, and the ratios reported.
PAIRS = (("B", "A"), ("C", "A"), ("C", "B"))
#: verl's ``sandbox_fusion.max_concurrent`` default: requests in flight from the trainer.
MAX_CONCURRENT = 32
#: verl's defaults for a case (``timeout`` is both ``compile_timeout`` and ``run_timeout``).
TIMEOUT_S, MEMORY_MB = 10, 1024


@dataclass
class Options:
    rounds: int = 3
    threads: int = 8
    systems: tuple[str, ...] = ("A", "B", "C")
    problems: tuple[str, ...] | None = None  # None: all six
    sandboxfusion_url: str | None = None  # None: the stand-in
    sandboxfusion_pid: int | None = None  # None: the process listening on the URL's port
    progress: bool = True


@dataclass
class Server:
    """Where a system sends its requests, and the root of the process tree whose CPU is its
    (``None``, and why, when it cannot be measured)."""

    label: str
    url: str
    pid: int | None
    unmeasured: str = ""


@dataclass
class Graded:
    """One system's grading of the batch, once."""

    wall_s: float
    server_cpu_s: float | None
    machine_cpu_s: float
    requests: int | None
    compiles: int | None
    programs_cpu_s: float | None
    scores: list[float] = field(repr=False)
    results: list[list[Any]] = field(repr=False)

    @property
    def passed(self) -> int:
        return sum(1 for score in self.scores if score == 1.0)

    def passed_of(self, batch: list[Sample], language: str) -> int:
        return sum(
            1
            for sample, score in zip(batch, self.scores, strict=True)
            if sample.language == language and score == 1.0
        )


class _Tally:
    """The ``/run_code`` requests a grader sent, the compiles their answers ran, and the CPU
    those compiles and the runs spent by their own account (``None`` once an answer that ran
    something does not say)."""

    def __init__(self) -> None:
        self.requests = self.compiles = 0
        self.programs_cpu_s: float | None = 0.0
        self._lock = threading.Lock()

    def seen(self, answer: Answer) -> None:
        compiled = answer.get("compile_result") if answer else None
        ran = answer.get("run_result") if answer else None
        compiled_anew = isinstance(compiled, dict) and not compiled.get("cached")
        steps = [step for step in (compiled if compiled_anew else None, ran) if step is not None]
        with self._lock:
            self.requests += 1
            if compiled_anew:
                self.compiles += 1
            for step in steps:
                cpu = step.get("cpu_time") if isinstance(step, dict) else None
                if self.programs_cpu_s is None or not isinstance(cpu, (int, float)):
                    self.programs_cpu_s = None
                else:
                    self.programs_cpu_s += cpu


# -- grading --


Grade = Callable[[Sample, str], tuple[float, list[Any]]]


@dataclass
class _Spent:
    wall_s: float
    server_cpu_s: float | None
    machine_cpu_s: float


def _graded(
    batch: list[Sample], tag: str, threads: int, server: Server, grade: Grade
) -> tuple[_Spent, list[tuple[float, list[Any]]]]:
    """The batch through ``grade``, ``threads`` samples at a time: what it took, and each
    sample's ``(score, results)``."""
    before = tree_cpu_s(server.pid) if server.pid is not None else None
    machine = _machine_busy_s()
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        graded = list(pool.map(lambda sample: grade(sample, tag), batch))
    wall = time.monotonic() - started
    machine = _machine_busy_s() - machine
    after = tree_cpu_s(server.pid) if server.pid is not None else None
    cpu = after - before if before is not None and after is not None else None
    return _Spent(wall, cpu, machine), graded


def _machine_busy_s() -> float:
    """CPU seconds every process on the machine has spent so far. The server tree's figure
    misses a process that outlived its parent: SandboxFusion kills a compile past its limit
    process by process, and a compiler whose driver died first is reaped by init, its CPU with
    it. This one misses nothing, and counts the graders and anything else running too."""
    times = psutil.cpu_times()
    busy = times.user + times.nice + times.system
    return float(busy + getattr(times, "irq", 0.0) + getattr(times, "softirq", 0.0))


def _verls_path(batch: list[Sample], tag: str, threads: int, server: Server) -> Graded:
    """verl's client path: one semaphore of 32 for the whole batch, as verl's trainer has."""
    semaphore, tally = threading.Semaphore(MAX_CONCURRENT), _Tally()
    limits = httpx.Limits(max_connections=2 * MAX_CONCURRENT)
    with httpx.Client(limits=limits) as client:

        def grade(sample: Sample, tag: str) -> tuple[float, list[Any]]:
            return verl_reward(
                f"{server.url}/run_code",
                sample.completion(tag),
                sample.ground_truth,
                semaphore,
                client,
                language=sample.language,
                timeout=TIMEOUT_S,
                memory_limit_mb=MEMORY_MB,
                on_answer=tally.seen,
            )

        spent, graded = _graded(batch, tag, threads, server, grade)
    return Graded(
        spent.wall_s,
        spent.server_cpu_s,
        spent.machine_cpu_s,
        tally.requests,
        tally.compiles,
        tally.programs_cpu_s,
        [g[0] for g in graded],
        [g[1] for g in graded],
    )


def _drop_in(batch: list[Sample], tag: str, threads: int, server: Server) -> Graded:
    """The engine's drop-in, called as verl's reward function would call it."""
    from a2e.adapters import verl

    def grade(sample: Sample, tag: str) -> tuple[float, list[Any]]:
        return verl.compute_score_with_cases(
            sample.completion(tag),
            sample.ground_truth,
            a2e_url=server.url,
            max_concurrent=MAX_CONCURRENT,
            language=sample.language,
        )

    calls = engine_calls(server.url)
    spent, graded = _graded(batch, tag, threads, server, grade)
    after = engine_calls(server.url)
    requests = after - calls if calls is not None and after is not None else None
    return Graded(
        spent.wall_s,
        spent.server_cpu_s,
        spent.machine_cpu_s,
        requests,
        None,
        None,
        [g[0] for g in graded],
        [g[1] for g in graded],
    )


def engine_calls(url: str) -> int | None:
    """The engine's tool calls so far, from its ``/metrics``."""
    try:
        text = httpx.get(f"{url}/metrics", timeout=10).text
    except httpx.HTTPError:
        return None
    total = 0.0
    for line in text.splitlines():
        if line.startswith("a2e_calls_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return round(total)


GRADERS: dict[str, Callable[[list[Sample], str, int, Server], Graded]] = {
    "A": _verls_path,
    "B": _verls_path,
    "C": _drop_in,
}


def _warmed(server: Server) -> None:
    """One Python and one C++ request before anything is measured: a server's first of each
    pays for what every later one reuses (an interpreter's pages, a precompiled header)."""
    with httpx.Client(timeout=120) as client:
        for language, code in (
            ("python", "print(1)\n"),
            ("cpp", "#include <bits/stdc++.h>\nint main() { std::cout << 1 << std::endl; }\n"),
        ):
            body = {"language": language, "code": code, "compile_timeout": 60, "run_timeout": 10}
            client.post(f"{server.url}/run_code", json=body).raise_for_status()


# -- servers --


@contextlib.contextmanager
def _sandboxfusion(options: Options) -> Iterator[Server]:
    url = options.sandboxfusion_url
    if url is None:
        with sandboxfusion_standin() as (standin, pid):
            yield Server("the SandboxFusion stand-in", standin, pid)
        return
    base = url.rstrip("/").removesuffix("/run_code")
    client = RunCodeClient(base)
    try:
        client.ping()
    finally:
        client.close()
    if options.sandboxfusion_pid is not None:
        yield Server("SandboxFusion", base, options.sandboxfusion_pid)
        return
    listening, why = listening_process(base)
    yield Server("SandboxFusion", base, listening, why)


@contextlib.contextmanager
def _servers(options: Options, failed: dict[str, str]) -> Iterator[dict[str, Server]]:
    """Each system's server, for the whole run; a system whose server cannot be had goes into
    ``failed`` with why, in one line."""
    servers: dict[str, Server] = {}
    with contextlib.ExitStack() as stack:
        if "A" in options.systems:
            try:
                servers["A"] = stack.enter_context(_sandboxfusion(options))
            except Exception as exc:
                failed["A"] = _one_line(exc)
        if {"B", "C"} & set(options.systems):
            try:
                url, pid = stack.enter_context(http_service())
            except Exception as exc:
                for key in ("B", "C"):
                    if key in options.systems:
                        failed[key] = _one_line(exc)
            else:
                for key in ("B", "C"):
                    if key in options.systems:
                        servers[key] = Server("a2e serve --http", url, pid)
        yield servers


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


# -- the run --


def run(options: Options) -> dict[str, Any]:
    """Grade the batch ``options.rounds`` times on each system; the report (``table`` reads
    it; ``--json`` writes it)."""
    batch = samples(options.problems)
    failed: dict[str, str] = {}
    rounds: dict[str, list[Graded]] = {}
    labels: dict[str, str] = {}
    with _servers(options, failed) as servers:
        for url, server in {s.url: s for s in servers.values()}.items():
            try:
                _warmed(server)
            except httpx.HTTPError as exc:
                for key in [k for k, s in servers.items() if s.url == url]:
                    failed[key] = f"{server.label} did not answer a first request: {exc}"
                    del servers[key]
        order = [key for key in options.systems if key in servers]
        for number in range(options.rounds):
            shift = number % max(1, len(order))
            for key in order[shift:] + order[:shift]:
                server = servers[key]
                labels[key] = f"{server.label} at {server.url}"
                tag = f"round {number + 1}, system {key}"
                graded = GRADERS[key](batch, tag, options.threads, server)
                rounds.setdefault(key, []).append(graded)
                _progress(
                    options,
                    f"round {number + 1}/{options.rounds}, {key}: {graded.wall_s:.1f} s, "
                    f"server CPU {_num(graded.server_cpu_s, 1)} s, "
                    f"{graded.passed}/{len(batch)} passed",
                )
        unmeasured = {k: s.unmeasured for k, s in servers.items() if s.unmeasured}
    return _report(options, batch, rounds, labels, failed, unmeasured)


def _progress(options: Options, line: str) -> None:
    if options.progress:
        print(line, file=sys.stderr, flush=True)


def _report(
    options: Options,
    batch: list[Sample],
    rounds: dict[str, list[Graded]],
    labels: dict[str, str],
    failed: dict[str, str],
    unmeasured: dict[str, str],
) -> dict[str, Any]:
    systems: dict[str, Any] = {}
    for key, runs in rounds.items():
        systems[key] = {
            "label": labels[key],
            "wall_s": _median([r.wall_s for r in runs]),
            "server_cpu_s": _median([r.server_cpu_s for r in runs]),
            "machine_cpu_s": _median([r.machine_cpu_s for r in runs]),
            "requests": _median([r.requests for r in runs]),
            "compiles": _median([r.compiles for r in runs]),
            "programs_cpu_s": _median([r.programs_cpu_s for r in runs]),
            "passed": [r.passed for r in runs],
            "passed_by_language": {
                language: [r.passed_of(batch, language) for r in runs]
                for language in ("python", "cpp")
            },
            "cpu_unmeasured": unmeasured.get(key, ""),
            "rounds": [{**asdict(r), "passed": r.passed} for r in runs],
        }
    ratios: dict[str, Any] = {}
    disagreements: dict[str, list[dict[str, Any]]] = {}
    for x, y in PAIRS:
        if x not in rounds or y not in rounds:
            continue
        pairs = list(zip(rounds[x], rounds[y], strict=True))
        ratios[f"{x}/{y}"] = {
            "wall_speedup": _median([_over(b.wall_s, a.wall_s) for a, b in pairs]),
            "server_cpu_saving": _median([_over(b.server_cpu_s, a.server_cpu_s) for a, b in pairs]),
        }
        disagreements[f"{x}/{y}"] = _disagreements(batch, x, y, pairs)
    return {
        "batch": {
            "samples": len(batch),
            "problems": sorted({s.problem for s in batch}),
            "languages": {
                lang: sum(s.language == lang for s in batch) for lang in ("python", "cpp")
            },
            "right": sum(s.kind == "right" for s in batch),
            "threads": options.threads,
            "max_concurrent": MAX_CONCURRENT,
            "timeout_s": TIMEOUT_S,
            "memory_mb": MEMORY_MB,
            "rounds": options.rounds,
            "sample_keys": [s.key for s in batch],
        },
        "systems": systems,
        "failed": failed,
        "ratios": ratios,
        "disagreements": disagreements,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        },
    }


def _median(values: Sequence[float | int | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.median(known), 3) if known else None


def _over(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


def _disagreements(
    batch: list[Sample], x: str, y: str, pairs: list[tuple[Graded, Graded]]
) -> list[dict[str, Any]]:
    """The samples whose score or per-case results differ between ``x`` and ``y`` in some
    round: the rounds where they do, and both sides of the first."""
    found: list[dict[str, Any]] = []
    for index, sample in enumerate(batch):
        differing = [
            number
            for number, (a, b) in enumerate(pairs, 1)
            if abs(a.scores[index] - b.scores[index]) > 1e-9 or a.results[index] != b.results[index]
        ]
        if not differing:
            continue
        a, b = pairs[differing[0] - 1]
        found.append(
            {
                "sample": sample.key,
                "language": sample.language,
                "kind": sample.kind,
                "rounds": differing,
                "scores": {x: a.scores[index], y: b.scores[index]},
                "results": {x: a.results[index], y: b.results[index]},
            }
        )
    return found


# -- the table --


def table(report: dict[str, Any]) -> str:
    batch = report["batch"]
    languages = ", ".join(f"{n} {lang}" for lang, n in batch["languages"].items() if n)
    lines = [
        f"reward batch: {batch['samples']} samples ({languages}; {batch['right']} right), "
        f"{len(batch['problems'])} problems x 8 cases, {batch['threads']} reward threads, "
        f"{batch['max_concurrent']} requests in flight at most, {batch['rounds']} round(s), "
        "medians",
        "",
        f"{'system':42} {'wall s':>7} {'server CPU s':>13} {'machine CPU s':>14} "
        f"{'requests':>9} {'compiles':>9} {'programs CPU s':>15}  passed (python+cpp)",
    ]
    for key, system in report["systems"].items():
        by_language = system["passed_by_language"]
        lines.append(
            f"{key} {SYSTEMS[key]:40} {_num(system['wall_s'], 1):>7} "
            f"{_num(system['server_cpu_s'], 1):>13} {_num(system['machine_cpu_s'], 1):>14} "
            f"{_num(system['requests'], 0):>9} {_num(system['compiles'], 0):>9} "
            f"{_num(system['programs_cpu_s'], 1):>15}  "
            f"{_span(system['passed'])}/{batch['samples']} "
            f"({_span(by_language['python'])}+{_span(by_language['cpp'])})"
        )
    lines.append("")
    for key, system in report["systems"].items():
        lines.append(f"{key}: {SYSTEMS[key]}: {system['label']}")
        if system["cpu_unmeasured"]:
            lines.append(f"   server CPU not measured: {system['cpu_unmeasured']}")
    for key, why in report["failed"].items():
        lines.append(f"{key} ({SYSTEMS[key]}): FAILED: {why}")
    if report["ratios"]:
        lines += ["", "speedups (median of the rounds')      wall     server CPU"]
        for pair, ratio in report["ratios"].items():
            x, y = pair.split("/")
            lines.append(
                f"{x}÷{y}{'':33} {_times(ratio['wall_speedup']):>7}  "
                f"{_times(ratio['server_cpu_saving']):>12}"
            )
    for pair, found in report["disagreements"].items():
        x, y = pair.split("/")
        by_language = ", ".join(
            f"{lang} {n}"
            for lang in ("python", "cpp")
            if (n := sum(d["language"] == lang for d in found))
        )
        lines += [
            "",
            f"{x} vs {y}: {len(found)} of {batch['samples']} samples differ in score or per-case "
            f"results" + (f" ({by_language})" if found else ""),
        ]
        for d in found:
            rounds = ",".join(str(r) for r in d["rounds"])
            lines.append(
                f"  {d['sample']:44} round {rounds:5} "
                f"{x} {d['scores'][x]:.2f} [{_cases(d['results'][x])}]  "
                f"{y} {d['scores'][y]:.2f} [{_cases(d['results'][y])}]"
            )
    return "\n".join(lines)


def _span(values: list[int]) -> str:
    """A figure of every round: one number, or the lowest and the highest."""
    low, high = min(values), max(values)
    return str(low) if low == high else f"{low}-{high}"


def _num(value: float | None, digits: int) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _times(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def _cases(results: list[Any]) -> str:
    """verl's per-case results, short: T, F, or the code (-1 to -4); an error as its words."""
    shown = []
    for result in results:
        if result is True or result is False:
            shown.append("T" if result else "F")
        elif isinstance(result, dict):
            shown.append(str(result.get("error", result)))
        else:
            shown.append(str(result))
    return " ".join(shown)


# -- the command --


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="a2e bench --reward-batch",
        description="One RL reward batch (48 samples, 6 problems in Python and C++, 8 cases "
        "each) graded by verl's path on SandboxFusion (A) and on a2e's /run_code (B), and by "
        "the engine's verl drop-in (C), side by side.",
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds; figures are medians (3)")
    parser.add_argument(
        "--sandboxfusion-url",
        metavar="URL",
        help="a running SandboxFusion (its base URL) for system A; without it, the stand-in",
    )
    parser.add_argument(
        "--sandboxfusion-pid",
        type=int,
        metavar="PID",
        help="the root of SandboxFusion's process tree, for its CPU (default: the process "
        "listening on the URL's port)",
    )
    parser.add_argument(
        "--systems", default="A,B,C", help="comma-separated, of A, B, C (default all)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=8,
        help="samples graded at once, as verl's reward workers (8)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"one round of two problems ({', '.join(QUICK_PROBLEMS)}): seconds, not minutes",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the report as JSON")
    parser.add_argument("--no-progress", action="store_true", help="no line per run on stderr")
    args = parser.parse_args(argv)
    systems = tuple(s.strip() for s in args.systems.split(",") if s.strip())
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown or not systems:
        parser.error(f"--systems: {', '.join(unknown) or 'none'} not of A, B, C")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.threads < 1:
        parser.error("--threads must be at least 1")
    if args.sandboxfusion_url:
        try:
            RunCodeClient(args.sandboxfusion_url)
        except ValueError as exc:
            parser.error(f"--sandboxfusion-url: {exc}")
    if args.sandboxfusion_pid is not None and not args.sandboxfusion_url:
        parser.error("--sandboxfusion-pid needs --sandboxfusion-url")
    refuse_unwritable(parser, "--json", args.json)
    options = Options(
        rounds=1 if args.quick else args.rounds,
        threads=args.threads,
        systems=tuple(dict.fromkeys(systems)),
        problems=QUICK_PROBLEMS if args.quick else None,
        sandboxfusion_url=args.sandboxfusion_url,
        sandboxfusion_pid=args.sandboxfusion_pid,
        progress=not args.no_progress,
    )
    report = run(options)
    publish(report, table(report), args.json, indent=1)
    return 1 if {"B", "C"} & set(report["failed"]) else 0


if __name__ == "__main__":
    sys.exit(main())
