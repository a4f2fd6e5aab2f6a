"""The systems that serve SandboxFusion's ``POST /run_code``, for the ``run_code_*`` workloads:
the engine behind ``a2e serve --http`` (``run_code_a2e``), and SandboxFusion (``sandboxfusion``):
a running server given by its URL (``a2e bench --sandboxfusion-url``), or else the stand-in
(``benchmarks.sandboxfusion_standin``) started for the run on 127.0.0.1.

Both get the same requests from the same client (``RunCodeClient``: kept-alive connections of
the standard library, ``benchmarks._http_client``), and every answer is checked: ``status``
``Success`` and the payload's stdout (``wrong_answer``).
A wrong answer is the call's failure, counted by the bench, not a call.

Each system names the root of its server's process tree (``Opened.server``): its CPU per call is
that whole tree's, the programs it ran included. For a server given by URL, that is the process
listening on the URL's port, where it is on this machine (``listening_process``); behind
Docker's proxy, or elsewhere, its CPU is not measured and the report says why.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import itertools
import json
import socket
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import psutil

from a2e_engine.benchmarks._calling import (
    BENCH_ENGINE_FLAGS,
    Call,
    CallFailed,
    Opened,
    http_service,
    next_payload,
)
from a2e_engine.benchmarks._http_client import KeptAlive
from a2e_engine.benchmarks._shared_servers import kept, server_process
from a2e_engine.benchmarks._workloads import Payload, Workload
from a2e_engine.benchmarks.sandboxfusion_standin import READY

__all__ = [
    "RunCodeClient",
    "engine_run_code",
    "listening_process",
    "sandboxfusion",
    "sandboxfusion_standin",
    "wrong_answer",
]

#: How long one request may take: the workloads' compile and run limits, and some.
REQUEST_TIMEOUT_S = 120
#: How long a server given by URL has to answer its ping.
PING_TIMEOUT_S = 5
#: The most of a program's stderr or a server's message that a failure quotes.
QUOTED_CHARS = 300


class RunCodeClient(KeptAlive):
    """``POST /run_code`` and ``GET /v1/ping`` on one server. ``url`` is the base URL that
    SandboxFusion's clients are given (``http://host:port``, any path prefix and query string
    kept); one that ends in ``/run_code``, as verl's does, is taken as its base."""

    def __init__(self, url: str, timeout: float = REQUEST_TIMEOUT_S) -> None:
        super().__init__(url, timeout)
        self.prefix = self.prefix.removesuffix("/run_code")

    def run_code(self, body: dict[str, Any], path: str = "/run_code") -> dict[str, Any]:
        """SandboxFusion's answer (at ``path``: ``/run_code``, ``/submit``); ``CallFailed``
        if it is not one."""

        status, payload = self.request("POST", path, body)
        try:
            answer = json.loads(payload) if status == 200 else None
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            said = _quoted(payload.decode(errors="replace"))
            if status != 200:
                raise CallFailed(f"POST {path} answered HTTP {status}: {said}")
            raise CallFailed(f"POST {path} answered no JSON object: {said}")
        return answer

    def ping(self) -> None:
        """``CallFailed``, in one line, unless ``GET /v1/ping`` answers 200."""

        try:
            status, payload = self.request("GET", "/v1/ping", timeout=PING_TIMEOUT_S)
        except (OSError, http.client.HTTPException) as exc:
            raise CallFailed(f"{self.url} does not answer: {_reason(exc)}") from None
        if status != 200:
            said = _quoted(payload.decode(errors="replace"))
            raise CallFailed(f"{self.url} answered GET /v1/ping with HTTP {status}: {said}")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return " ".join(str(exc).split()) or type(exc).__name__


def _quoted(text: Any) -> str:
    said = " ".join(str(text or "").split())
    return said if len(said) <= QUOTED_CHARS else "..." + said[-QUOTED_CHARS:]


def wrong_answer(answer: dict[str, Any], expected: str | None) -> str:
    """Why ``answer`` is not a correct run of the payload, in one line; empty if it is."""
    status = answer.get("status")
    compiled = answer.get("compile_result") or {}
    ran = answer.get("run_result") or {}
    if status != "Success":
        if compiled and compiled.get("return_code") != 0:
            step, result = "the compile", compiled
        elif ran:
            step, result = "the run", ran
        else:
            return f"{status}: {_quoted(answer.get('message')) or 'no step ran'}"
        how = result.get("status")
        if how == "Finished":
            how = f"exited with {result.get('return_code')}"
        said = _quoted(result.get("stderr")) or _quoted(answer.get("message")) or "no stderr"
        return f"{status}: {step} {how}: {said}"
    if expected is not None and ran.get("stdout") != expected:
        return f"printed {_quoted(ran.get('stdout'))!r}, not {expected.strip()!r}"
    return ""


def not_accepted(answer: dict[str, Any]) -> str:
    """Why a ``/submit`` answer does not accept its (correct) submission; empty if it does."""
    if answer.get("accepted") is True:
        return ""
    tests = answer.get("tests") or []
    failing = next((t for t in tests if not t.get("passed")), None)
    if failing is None:
        return f"accepted={answer.get('accepted')!r} with {len(tests)} tests"
    return f"a failing case: {wrong_answer(failing.get('exec_info') or {}, None) or 'wrong'}"


def _calls(client: RunCodeClient, workload: Workload, payloads: list[Payload], who: str) -> Call:

    take = next_payload(payloads)
    numbers = itertools.count()

    def call() -> tuple[int, Any]:
        index, payload = take()
        body = dict(payload.arguments)
        if payload.tool == "submit":
            if workload.fresh_source:
                marked = f"\n// request {next(numbers)}\n```"  # in the closing fence
                body["completion"] = body["completion"].replace("\n```", marked, 1)
            why = not_accepted(client.run_code(body, "/submit"))
        else:
            if workload.fresh_source:
                body["code"] = f"{body['code']}// request {next(numbers)}\n"
            why = wrong_answer(client.run_code(body), payload.expected)
        if why:
            raise CallFailed(f"{who} answered {why}")
        return index, "passed"

    return call


@contextlib.contextmanager
def _opened(
    url: str, workload: Workload, payloads: list[Payload], who: str, server: int | None, why: str
) -> Iterator[Opened]:

    client = RunCodeClient(url)
    try:
        call = _calls(client, workload, payloads, who)
        processes = {"supervisor": [server]} if server is not None else {}
        yield Opened(call, lambda: processes, server=server, server_unmeasured=why)
    finally:
        client.close()


@contextlib.contextmanager
def engine_run_code(workload: Workload, payloads: list[Payload]) -> Iterator[Opened]:
    """``POST /run_code`` on ``a2e serve --http``, the same server the WebSocket and REST
    systems use."""

    with (
        http_service(*BENCH_ENGINE_FLAGS) as (url, pid),
        _opened(url, workload, payloads, "a2e serve --http", pid, "") as opened,
    ):
        yield opened


@contextlib.contextmanager
def sandboxfusion(
    workload: Workload, payloads: list[Payload], url: str | None = None
) -> Iterator[Opened]:
    """SandboxFusion at ``url``, or the stand-in started for this run."""
    if url is None:
        with (
            kept("sandboxfusion-standin", sandboxfusion_standin) as (standin, pid),
            _opened(standin, workload, payloads, "the SandboxFusion stand-in", pid, "") as opened,
        ):
            yield opened
        return
    client = RunCodeClient(url)
    try:
        client.ping()
    finally:
        client.close()
    server, why = listening_process(url)
    with _opened(url, workload, payloads, f"SandboxFusion at {url}", server, why) as opened:
        yield opened


def sandboxfusion_standin() -> contextlib.AbstractContextManager[tuple[str, int]]:
    """The stand-in on 127.0.0.1 (a free port), in a process of its own: its URL and pid."""
    command = [sys.executable, "-m", "a2e_engine.benchmarks.sandboxfusion_standin"]

    def url_in(line: str) -> str:
        return line[len(READY) :].strip() if line.startswith(READY) else ""

    return server_process(command, url_in, "the SandboxFusion stand-in", grace_s=30)


def listening_process(url: str) -> tuple[int | None, str]:
    """The process that serves ``url`` on this machine, the root of its tree (a server with
    workers has them listen too), or ``None`` and why it is not measured."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, port)}
    except OSError as exc:
        return None, f"{host} does not resolve: {_reason(exc)}"
    if not all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses):
        return None, f"{host} is not this machine's loopback"
    try:
        listening = {
            c.pid
            for c in psutil.net_connections("tcp")
            if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid
        }
    except psutil.Error as exc:
        return None, f"the processes listening here cannot be listed: {exc}"
    roots = []
    for pid in listening:
        with contextlib.suppress(psutil.Error):
            if psutil.Process(pid).ppid() not in listening:
                roots.append(pid)
    if not roots:
        return None, f"no process here listens on port {port} (is it in a container?)"
    root = min(roots)
    with contextlib.suppress(psutil.Error):
        if psutil.Process(root).name() == "docker-proxy":
            return None, f"port {port} is Docker's proxy: the server runs in a container"
    return root, ""
