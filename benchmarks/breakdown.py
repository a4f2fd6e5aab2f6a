"""Where one request's CPU goes: by process (the server, its zygotes, the workers, the
programs they ran), user and kernel, and within the server by stage of the request.

    python -m a2e_engine.benchmarks.breakdown [--paths run_code_python,...] [--requests 300]
        [--concurrency 1,4] [--kernel] [--json PATH]
    a2e bench --breakdown [the same options]

It starts ``a2e serve --http`` on 127.0.0.1, sends each path's requests from
``--concurrency`` threads of one kept-alive client, and reads, before and after:

- every process of the server's tree (psutil): the server's own CPU, its zygotes' own, and
  the rest: the workers and what they ran, charged when they are reaped. A program's own CPU
  is what ``run_code`` says it took (``run_result.cpu_time``); the workers' is the rest.
- py-spy's samples of the server's thread that holds the GIL, by stage
  (``benchmarks._stages``: HTTP and body, the front-end's request and response, the session,
  gate and validation, pool and supply, the job and its frames, the event loop);
- with ``--kernel``, a second pass as long under ``perf record -a``: what each process did,
  and a worker's phases (``benchmarks._kernel_profile``).

Beside them, the floor: what a fresh process of the serving zygote's size costs at the least
(``benchmarks.bounds``, run from a bare interpreter), times the fresh processes the path needs.

The whole tree is measured, so this is what a request costs the machine, as SandboxFusion's
server is charged in ``a2e bench``. The client's own CPU is not in it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psutil

from a2e_engine.benchmarks._calling import BENCH_ENGINE_FLAGS, http_service
from a2e_engine.benchmarks._kernel_profile import ROLES, KernelProfile, available, recorded
from a2e_engine.benchmarks._measure import closed_loop, concurrency_levels
from a2e_engine.benchmarks._run_code_systems import RunCodeClient
from a2e_engine.benchmarks._stages import STAGES, StageSamples, sampled
from a2e_engine.benchmarks._stages import available as sampling_unavailable
from a2e_engine.benchmarks.bounds import COW_PAGES

__all__ = ["PATHS", "main", "measure"]


@dataclass(frozen=True)
class Path:
    """One kind of request: where it goes, what it sends, what a right answer holds, and how
    many fresh processes it needs at the least (a worker; and the program, for ``run_code``)."""

    method: str
    url_path: str
    body: dict[str, Any]
    expected_stdout: str
    processes: int


PATHS: dict[str, Path] = {
    "run_code_python": Path(
        "POST", "/run_code", {"language": "python", "code": "print(1)"}, "1\n", 2
    ),
    "run_code_bash": Path("POST", "/run_code", {"language": "bash", "code": "echo 1"}, "1\n", 2),
    "rest_python_eval": Path(
        "POST", "/v1/tools/python_eval", {"arguments": {"code": "print(1)"}}, "1\n", 1
    ),
}

#: Requests sent before measuring: every zygote started, every first-call cost paid.
WARM_UP = 60


@dataclass
class _Process:
    own_user: float
    own_system: float
    reaped: float  # user + system of the children it reaped


@dataclass
class _Reading:
    processes: dict[tuple[int, float], _Process] = field(default_factory=dict)
    parents: dict[tuple[int, float], int] = field(default_factory=dict)


def _read(root: int) -> _Reading:
    reading = _Reading()
    try:
        top = psutil.Process(root)
        tree = [top, *top.children(recursive=True)]
    except psutil.Error as exc:
        raise RuntimeError(f"the server ({root}) is gone: {exc}") from None
    for process in tree:
        try:
            with process.oneshot():
                times, parent = process.cpu_times(), process.ppid()
                key = (process.pid, process.create_time())
        except psutil.Error:
            continue
        reading.processes[key] = _Process(
            times.user, times.system, times.children_user + times.children_system
        )
        reading.parents[key] = parent
    return reading


def _difference(
    before: _Reading, after: _Reading, root: int, requests: int, stages: StageSamples
) -> dict[str, Any]:
    """Milliseconds of CPU per request, by process role and by server stage."""

    def ms(seconds: float) -> float:
        return round(seconds * 1000 / requests, 3)

    roles = {"server_user": 0.0, "server_system": 0.0, "zygotes_user": 0.0, "zygotes_system": 0.0}
    total = 0.0
    serving, most_reaped = 0, -1.0
    for key, now in after.processes.items():
        was = before.processes.get(key, _Process(0.0, 0.0, 0.0))
        own_user, own_system = now.own_user - was.own_user, now.own_system - was.own_system
        total += own_user + own_system + now.reaped - was.reaped
        if key[0] == root:
            roles["server_user"] += own_user
            roles["server_system"] += own_system
        elif after.parents.get(key) == root and key in before.processes:
            roles["zygotes_user"] += own_user
            roles["zygotes_system"] += own_system
            if now.reaped - was.reaped > most_reaped:
                serving, most_reaped = key[0], now.reaped - was.reaped
    for key, was in before.processes.items():
        if key not in after.processes:  # gone without a reaper in the tree (not expected)
            total -= was.own_user + was.own_system + was.reaped
    server = roles["server_user"] + roles["server_system"]
    zygotes = roles["zygotes_user"] + roles["zygotes_system"]
    sampled = sum(stages.by_stage.values()) or 1

    def share(count: int) -> float:
        return round(server * 1000 / requests * count / sampled, 3)

    return {
        "whole_tree_ms": ms(total),
        "server_ms": ms(server),
        "server_user_ms": ms(roles["server_user"]),
        "server_system_ms": ms(roles["server_system"]),
        "zygotes_ms": ms(zygotes),
        "zygotes_system_ms": ms(roles["zygotes_system"]),
        "workers_and_programs_ms": ms(total - server - zygotes),
        "server_stages_ms": {stage: share(stages.by_stage[stage]) for stage in [*STAGES, "other"]},
        "server_top_modules_ms": {
            module: share(count) for module, count in stages.by_module.most_common(TOP_MODULES)
        },
        "samples": sum(stages.by_stage.values()),
        "serving_zygote": serving,
    }


#: The server's modules listed by what they cost, at most this many.
TOP_MODULES = 15


def _send(
    client: RunCodeClient, path: Path, requests: int, concurrency: int
) -> tuple[float, float]:
    """Sends ``requests`` from ``concurrency`` threads; the requests per second, and the CPU
    seconds the programs said they took (``run_result.cpu_time``; 0 where there is none)."""
    lock = threading.Lock()
    program_cpu = [0.0]

    def one() -> None:
        status, payload = client.request(path.method, path.url_path, path.body)
        answer = json.loads(payload) if status == 200 else {}
        run = answer.get("run_result") or {}
        stdout = run.get("stdout", (answer.get("data") or {}).get("stdout"))
        if status != 200 or stdout != path.expected_stdout:
            raise RuntimeError(f"{path.url_path}: HTTP {status}: {payload[:300]!r}")
        with lock:
            program_cpu[0] += float(run.get("cpu_time") or 0.0)

    figures = closed_loop(one, requests, concurrency, warmup=0)
    return figures.calls_per_s, program_cpu[0]


def measure(
    paths: Sequence[str], requests: int, levels: Sequence[int], kernel: bool
) -> dict[str, Any]:
    """Each path at each concurrency level: CPU per request by process and by stage; with
    ``kernel``, a second pass of as many requests under ``perf`` splits each process's."""
    with tempfile.TemporaryDirectory(prefix="a2e-breakdown-") as scratch:
        floor = _bare_bounds(scratch)
        report: dict[str, Any] = {"requests": requests, "floor": floor, "paths": {}}
        with http_service(*BENCH_ENGINE_FLAGS) as (url, root):
            client = RunCodeClient(url)
            for name in paths:
                path = PATHS[name]
                _send(client, path, WARM_UP, max(levels))
                report["paths"][name] = {}
                for c in levels:
                    figures = _measured(client, path, requests, c, root, scratch)
                    zygote_mib = _anonymous_mib(figures["serving_zygote"])
                    figures["zygote_anonymous_mib"] = round(zygote_mib, 1)
                    figures["floor_ms"] = round(_floor_ms(floor, zygote_mib) * path.processes, 3)
                    if kernel:
                        with recorded(root, scratch) as profile:
                            _send(client, path, requests, c)
                        figures["kernel"] = _kernel_figures(profile, figures)
                    report["paths"][name][str(c)] = figures
    return report


#: Forks that ``benchmarks.bounds`` measures the floor with.
FLOOR_FORKS = 100


def _floor_ms(floor: dict[str, float], zygote_mib: float) -> float:
    """The least CPU one fresh process of the zygote's size costs: its fork, its exit and the
    shared pages any forked Python writes (``benchmarks.bounds``, measured from a bare
    interpreter in a process of its own)."""
    extra = max(0.0, zygote_mib - floor["own_mib"])
    per_mib = floor["fork_ms_per_mib"] + floor["exit_ms_per_mib"]
    return (
        floor["fork_ms"]
        + floor["exit_ms"]
        + extra * per_mib
        + COW_PAGES * floor["cow_fault_us"] / 1000
    )


def _bare_bounds(scratch: str) -> dict[str, float]:
    """``benchmarks.bounds`` from a process of its own: this one holds more than a zygote."""
    path = os.path.join(scratch, "bounds.json")
    command = [
        sys.executable, "-m", "a2e_engine.benchmarks.bounds", "--forks", str(FLOOR_FORKS),
        "--calls", "20", "--json", path,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"benchmarks.bounds failed: {done.stderr.strip()[-300:]}")
    with open(path) as measured:
        bounds: dict[str, float] = json.load(measured)
    return bounds


def _anonymous_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Anonymous:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _measured(
    client: RunCodeClient, path: Path, requests: int, c: int, root: int, scratch: str
) -> dict[str, Any]:
    with sampled(root, scratch) as stages:
        before = _read(root)
        per_s, program_cpu = _send(client, path, requests, c)
        time.sleep(REAPED_S)
        after = _read(root)
    figures = _difference(before, after, root, requests, stages)
    programs = round(program_cpu * 1000 / requests, 3)
    figures["programs_ms"] = programs
    figures["workers_ms"] = round(figures["workers_and_programs_ms"] - programs, 3)
    figures["requests_per_s"] = round(per_s, 1)
    return figures


#: How long the last workers have to exit and be reaped (and so counted) after the last answer.
REAPED_S = 0.3


def _kernel_figures(profile: KernelProfile, figures: dict[str, Any]) -> dict[str, Any]:
    """The perf pass's shares, in milliseconds of the psutil pass's figures."""
    measured = {
        "server": figures["server_ms"],
        "zygote": figures["zygotes_ms"],
        "worker": figures["workers_ms"],
        "program": figures["programs_ms"],
    }
    return {
        "worker_phases_ms": {
            phase: round(share * measured["worker"], 3)
            for phase, share in profile.phase_shares().items()
        },
        "by_role_ms": {
            role: {
                what: round(share * measured[role], 3)
                for what, share in list(profile.shares(role).items())[:KERNEL_ROWS]
            }
            for role in ROLES
        },
        "samples": dict(profile.by_role),
    }


#: What each role did, at most this many kinds.
KERNEL_ROWS = 7


def table(report: dict[str, Any]) -> str:
    """The report as Markdown: a table per path, a column per concurrency level."""
    lines: list[str] = []
    rows = [
        ("requests/s", "requests_per_s"),
        ("**whole tree, ms CPU**", "whole_tree_ms"),
        ("server", "server_ms"),
        ("server, kernel", "server_system_ms"),
        ("zygotes (fork, reap)", "zygotes_ms"),
        ("zygotes, kernel", "zygotes_system_ms"),
        ("workers (hardening, job, exit)", "workers_ms"),
        ("programs (their own account)", "programs_ms"),
        ("floor: fork, exit, 500 shared pages written", "floor_ms"),
    ]
    for name, levels in report["paths"].items():
        columns = list(levels)
        lines += ["", f"### {name} ({report['requests']} requests at each c)", ""]
        lines.append("| ms of CPU per request | " + " | ".join(f"c={c}" for c in columns) + " |")
        lines.append("|---|" + "---|" * len(columns))

        def row(label: str, values: list[float]) -> str:
            return f"| {label} | " + " | ".join(f"{v:g}" for v in values) + " |"

        lines += [row(label, [levels[c][key] for c in columns]) for label, key in rows]
        for stage in [*STAGES, "other"]:
            values = [levels[c]["server_stages_ms"][stage] for c in columns]
            lines.append(row(f"server: {stage}", values))
        first = levels[columns[0]]
        if "kernel" in first:
            for phase in first["kernel"]["worker_phases_ms"]:
                values = [levels[c]["kernel"]["worker_phases_ms"][phase] for c in columns]
                lines.append(row(f"worker: {phase}", values))
            lines += ["", f"What each process did at c={columns[0]} (perf, ms per request):", ""]
            for role, doing in first["kernel"]["by_role_ms"].items():
                said = ", ".join(f"{what} {ms:g}" for what, ms in doing.items())
                lines.append(f"- {role}: {said}")
        lines += ["", f"Server modules at c={columns[0]} ({first['samples']} samples):", ""]
        lines += [f"- `{m}` {v:g} ms" for m, v in first["server_top_modules_ms"].items()]
        lines.append(
            f"\nThe floor is per fresh process of the serving zygote's size "
            f"({first['zygote_anonymous_mib']:g} MiB anonymous) times {PATHS[name].processes}."
        )
    return "\n".join(lines).lstrip("\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="a2e bench --breakdown",
        description="Where one request's CPU goes, by process and by stage of the server.",
    )
    parser.add_argument(
        "--paths", default="run_code_python", help="comma-separated: " + ",".join(PATHS)
    )
    parser.add_argument("--requests", type=int, default=300, help="per path and level (300)")
    parser.add_argument("--concurrency", default="1,4", help="comma-separated levels (1,4)")
    parser.add_argument(
        "--kernel",
        action="store_true",
        help="also split each process's CPU with perf (what it did; a worker's phases): a "
        "second pass of as many requests",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the report as JSON")
    args = parser.parse_args(argv)
    if sampling_unavailable():
        parser.error(sampling_unavailable())
    if args.kernel and available():
        parser.error(f"--kernel: {available()}")
    paths = args.paths.split(",")
    unknown = sorted(set(paths) - set(PATHS))
    if unknown:
        parser.error(f"--paths: unknown {unknown}")
    try:
        levels = concurrency_levels(args.concurrency)
    except ValueError as exc:
        parser.error(f"--concurrency: {exc}")
    if args.requests < 20:
        parser.error("--requests must be at least 20")
    try:
        report = measure(paths, args.requests, levels, args.kernel)
    except RuntimeError as exc:
        print(f"a2e bench --breakdown: {exc}", file=sys.stderr)
        return 1
    print(table(report))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
