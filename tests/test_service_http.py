"""``a2e serve --http`` over plain HTTP, driven by httpx and by a SandboxFusion-style client:
REST for tools (JSON and server-sent events), ``/run_code`` and ``/v1/ping``, OpenAPI, and the
attacks a service must survive (bodies too large, too slow or malformed, overload, a client
that leaves mid-call)."""

from __future__ import annotations

import base64
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import httpx
import pytest

from tests.guessing_game import BINARY_SEARCH
from tests.service_process import ServiceProcess, wait_for

TOKEN = "http-tests-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def service() -> Iterator[ServiceProcess]:
    server = ServiceProcess(
        "--token", TOKEN, "--max-message-bytes", "200000", "--request-timeout-s", "1"
    )
    yield server
    assert server.stop() == 0


@pytest.fixture()
def http(service: ServiceProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url, headers=AUTH, timeout=60) as client:
        yield client


# -- REST for tools --


def test_list_and_search_tools(http: httpx.Client) -> None:
    tools = http.get("/v1/tools").json()["tools"]
    assert {"python_eval", "run_code", "run_shell"} <= {t["name"] for t in tools}
    found = http.get("/v1/tools", params={"query": "run a shell command"}).json()["tools"]
    assert found and found[0]["name"] == "run_shell"
    tagged = http.get("/v1/tools", params={"tags": "judge"}).json()["tools"]
    assert [t["name"] for t in tagged] == ["code_eval", "run_code"]


def test_call_a_tool(http: httpx.Client) -> None:
    response = http.post("/v1/tools/python_eval", json={"arguments": {"code": "print(6 * 7)"}})
    assert response.status_code == 200
    result = response.json()
    assert result["success"] and result["data"]["stdout"] == "42\n"
    failed = http.post("/v1/tools/python_eval", json={"arguments": {"code": "1/0"}})
    assert failed.status_code == 200, "the tool ran: its failure is its result"
    assert (
        failed.json()["reason"] == "tool_failed" and "ZeroDivisionError" in failed.json()["error"]
    )
    timed_out = http.post(
        "/v1/tools/run_shell", json={"arguments": {"command": "sleep 5"}, "timeout": 1}
    )
    assert timed_out.status_code == 200 and timed_out.json()["reason"] == "timeout"
    unknown = http.post("/v1/tools/nope", json={"arguments": {}})
    assert unknown.status_code == 404 and unknown.json()["error_code"] == "unknown_tool"
    assert unknown.json()["reason"] == "unknown_tool"
    invalid = http.post("/v1/tools/python_eval", json={"arguments": {"code": 5}})
    assert invalid.status_code == 400, "the request's fault: no tool ran"
    assert (
        invalid.json()["reason"] == "invalid_arguments"
        and "invalid arguments" in invalid.json()["error"]
    )
    assert invalid.json()["error_code"] == "tool_error"  # the spec's code, as the spec has it


def test_contest_judging_over_rest(http: httpx.Client) -> None:
    """``code_eval`` with a checker, an interactor and a CPU-time limit, as a REST client sends
    them: the same verdicts as in process (``tests/test_checkers.py``, ``test_interactors.py``)."""
    checkers = Path(__file__).parent / "testlib_checkers"
    derangement = {"source": (checkers / "derangement.cpp").read_text()}
    game = {"source": (checkers / "guess_interactor.cpp").read_text()}
    calls = [
        ({"program": "print('3 1 2')", "test_cases": [{"input": "3", "output": "2 3 1"}],
          "checker": derangement}, "AC"),
        ({"program": "print('1 2 3')", "test_cases": [{"input": "3", "output": "2 3 1"}],
          "checker": derangement}, "WA"),
        ({"program": BINARY_SEARCH, "test_cases": [{"input": "4242", "output": ""}],
          "interactor": game}, "AC"),
        ({"program": "while True: pass", "test_cases": [{"input": "", "output": ""}],
          "cpu_time_limit": 0.3}, "TLE"),
    ]  # fmt: skip
    for arguments, verdict in calls:
        response = http.post("/v1/tools/code_eval", json={"arguments": arguments, "timeout": 60})
        assert response.status_code == 200, response.text
        assert response.json()["data"]["verdict"] == verdict, response.json()


def test_a_call_streams_its_events_as_server_sent_events(http: httpx.Client) -> None:
    code = "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.2)"
    seen: list[tuple[str, float]] = []
    started = time.monotonic()
    with http.stream(
        "POST",
        "/v1/tools/python_eval",
        json={"arguments": {"code": code}},
        headers={"Accept": "text/event-stream"},
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        event = ""
        for line in response.iter_lines():
            if line.startswith("event: "):
                event = line[len("event: ") :]
            elif line.startswith("data: "):
                seen.append((event, time.monotonic() - started))
                if event == "result":
                    result = json.loads(line[len("data: ") :])
    kinds = [kind for kind, _ in seen]
    assert kinds[-1] == "result" and kinds.count("tool/event") >= 3
    assert result["success"] and result["data"]["stdout"] == "0\n1\n2\n"
    # Streamed: the first event came well before the result.
    assert seen[-1][1] - seen[0][1] > 0.3


@pytest.mark.parametrize(
    ("body", "status", "said"),
    [
        (b"{not json", 400, "not JSON"),
        (b"[1, 2]", 400, "must be a JSON object"),
        (b'{"arguments": {}, "timout": 3}', 400, "timout"),
        (b'{"arguments": "code"}', 400, "arguments"),
        (b'{"arguments": {}, "timeout": -1}', 400, "timeout"),
        (b'{"arguments": {"code": "' + b"x" * 250_000 + b'"}}', 413, "over the limit"),
    ],
)
def test_bad_bodies_are_refused_naming_the_problem(
    http: httpx.Client, body: bytes, status: int, said: str
) -> None:
    response = http.post(
        "/v1/tools/python_eval", content=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == status, response.text
    assert said in response.json()["message"]


def test_a_body_that_never_ends_is_timed_out(service: ServiceProcess) -> None:
    host, port = service.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        raw.sendall(
            b"POST /v1/tools/python_eval HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + TOKEN.encode()
            + b'\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"argu'
        )
        started = time.monotonic()
        reply = raw.recv(4096)
    assert reply.startswith(b"HTTP/1.1 408"), reply
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("trickle", [b"", b"GET /healthz HTTP/1.1\r\nHo"])
def test_a_request_head_that_never_ends_is_cut_off(service: ServiceProcess, trickle: bytes) -> None:
    host, port = service.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        started = time.monotonic()
        raw.sendall(trickle)
        # A byte now and then resets no timer: the head has its deadline from the start.
        closed = False
        while time.monotonic() - started < 5 and not closed:
            time.sleep(0.3)
            try:
                raw.sendall(b"x")
                raw.settimeout(0.01)
                closed = raw.recv(1) == b""
            except TimeoutError:
                pass
            except OSError:
                closed = True
    assert closed and time.monotonic() - started < 3


@pytest.mark.parametrize("where", ["header", "url"])
def test_a_request_head_too_large_is_refused(service: ServiceProcess, where: str) -> None:
    """Sent as fast as the socket takes it, a huge head is refused at 64 KiB, long before the
    head's deadline; what the server read of it is not kept."""
    host, port = service.url.removeprefix("http://").split(":")
    filler = b"a" * 4096
    start = b"GET /healthz?" if where == "url" else b"GET /healthz HTTP/1.1\r\nX-Filler: "
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        raw.sendall(start)
        sent, reply = 0, b""
        while sent < 1 << 20 and not reply:
            try:
                raw.sendall(filler)
                sent += len(filler)
                raw.settimeout(0.001)
                reply = raw.recv(4096)
            except TimeoutError:
                pass
            except OSError:
                break
            finally:
                raw.settimeout(10)
        while not reply.endswith(b"}"):
            more = raw.recv(4096)
            if not more:
                break
            reply += more
    assert reply.startswith(b"HTTP/1.1 431 "), reply[:200]
    assert b"exceed 65536 bytes" in reply
    assert sent < 1 << 20


def test_a_client_that_leaves_mid_call_has_its_call_killed(service: ServiceProcess) -> None:
    baseline = service.settled_workers()
    sleeper = {"arguments": {"code": "import time\ntime.sleep(60)"}, "timeout": 60}

    def call() -> None:
        try:
            httpx.post(f"{service.url}/v1/tools/python_eval", json=sleeper, headers=AUTH, timeout=2)
        except httpx.TimeoutException:
            pass  # the client gives up and closes its connection

    caller = threading.Thread(target=call)
    caller.start()
    assert wait_for(lambda: service.workers() > baseline, 10)
    caller.join()
    assert wait_for(lambda: service.workers() <= baseline, 10)


def test_a_client_that_leaves_an_event_stream_has_its_call_killed(
    service: ServiceProcess,
) -> None:
    baseline = service.settled_workers()
    code = "import time\nprint('started', flush=True)\ntime.sleep(60)"
    with (
        httpx.Client(base_url=service.url, headers=AUTH, timeout=30) as http,
        http.stream(
            "POST",
            "/v1/tools/python_eval",
            json={"arguments": {"code": code}, "timeout": 60},
            headers={"Accept": "text/event-stream"},
        ) as response,
    ):
        for line in response.iter_lines():
            if line.startswith("data: "):  # the first event: the call is running
                # Its worker, and the one forked to replace it in waiting.
                assert wait_for(lambda: service.workers() > baseline, 10)
                break  # leaving the stream closes it
    assert wait_for(lambda: service.workers() <= baseline, 10)


def test_openapi_describes_the_endpoints(http: httpx.Client) -> None:
    document = http.get("/openapi.json").json()
    assert document["openapi"].startswith("3.")
    assert {"/v1/tools", "/v1/tools/{tool_name}", "/run_code", "/v1/ping"} <= set(document["paths"])
    assert "ToolResult" in document["components"]["schemas"]


# -- SandboxFusion --


def _run_code(service: ServiceProcess, body: dict, url_suffix: str = "") -> dict:
    """As verl's client does: POST to the URL it was given, all eight fields."""
    full = {
        "compile_timeout": 10,
        "run_timeout": 10,
        "stdin": None,
        "memory_limit_MB": 1024,
        "language": "python",
        "files": {},
        "fetch_files": [],
        **body,
    }
    response = httpx.post(
        f"{service.url}{url_suffix or '/run_code?token=' + TOKEN}",
        content=json.dumps(full),
        headers={"Content-Type": "application/json", "Accept": "application/json"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    answer = response.json()
    assert list(answer) == [
        "status",
        "message",
        "compile_result",
        "run_result",
        "executor_pod_name",
        "files",
    ]
    return answer


def test_stdin_stdout_problems_are_judged_as_sandbox_fusion_does(service: ServiceProcess) -> None:
    solution = "a, b = map(int, input().split())\nprint(a + b)"
    cases = [("1 2\n", "3"), ("10 -4\n", "6"), ("0 0\n", "0")]
    for given, expected in cases:
        answer = _run_code(service, {"code": solution, "stdin": given})
        assert answer["status"] == "Success" and answer["message"] == ""
        run = answer["run_result"]
        assert run["status"] == "Finished" and run["return_code"] == 0
        assert run["stdout"].rstrip("\n") == expected and run["stderr"] == ""
    wrong = _run_code(service, {"code": "print(int(input().split()[0]))", "stdin": "1 2\n"})
    assert wrong["status"] == "Success" and wrong["run_result"]["stdout"] != "3\n"
    crashed = _run_code(service, {"code": "raise ValueError('no')", "stdin": "1 2\n"})
    assert crashed["status"] == "Failed" and crashed["run_result"]["return_code"] == 1
    assert "ValueError: no" in crashed["run_result"]["stderr"]
    slow = _run_code(service, {"code": "while True: pass", "run_timeout": 1})
    assert slow["status"] == "Failed"
    assert slow["run_result"]["status"] == "TimeLimitExceeded"
    assert slow["run_result"]["return_code"] is None
    assert slow["run_result"]["exceeded"] == "wall_time"


def test_run_code_takes_a_cpu_time_limit_beside_its_wall_clock_timeout(
    service: ServiceProcess,
) -> None:
    spun = _run_code(service, {"code": "while True: pass", "cpu_time_limit": 0.3})
    run = spun["run_result"]
    assert (spun["status"], run["status"], run["exceeded"]) == (
        "Failed",
        "TimeLimitExceeded",
        "cpu_time",
    )
    assert run["cpu_time"] < 5  # stopped at its CPU limit, not at run_timeout (10 s)
    slept = _run_code(
        service, {"code": "import time; time.sleep(9)", "cpu_time_limit": 0.3, "run_timeout": 0.5}
    )
    assert slept["run_result"]["exceeded"] == "wall_time"
    refused = httpx.post(
        f"{service.url}/run_code?token={TOKEN}",
        json={"code": "print(1)", "language": "python", "cpu_time_limit": 0},
        timeout=30,
    )
    assert refused.status_code == 422 and "cpu_time_limit" in refused.text


def test_bash_files_and_fetch_files(service: ServiceProcess) -> None:
    answer = _run_code(
        service,
        {
            "language": "bash",
            "code": "tr a-z A-Z < in.txt > out.txt; cat out.txt",
            "files": {"in.txt": base64.b64encode(b"shout\n").decode()},
            "fetch_files": ["out.txt"],
        },
    )
    assert answer["status"] == "Success" and answer["run_result"]["stdout"] == "SHOUT\n"
    assert base64.b64decode(answer["files"]["out.txt"]) == b"SHOUT\n"


def test_cpp_with_its_memory_limit_as_sandbox_fusion_sends_it(service: ServiceProcess) -> None:
    solution = (
        "#include <iostream>\nint main() { long a, b; std::cin >> a >> b; std::cout << a + b; }"
    )
    answer = _run_code(service, {"language": "cpp", "code": solution, "stdin": "40 2"})
    assert answer["status"] == "Success", answer
    assert answer["compile_result"]["return_code"] == 0
    assert answer["run_result"]["stdout"] == "42"
    greedy = (
        "#include <vector>\nint main() { std::vector<std::vector<char>> v;\n"
        "  for (;;) v.emplace_back(1 << 20, 1); }"
    )
    answer = _run_code(service, {"language": "cpp", "code": greedy, "memory_limit_MB": 48})
    assert answer["status"] == "Failed"
    # As SandboxFusion says it (its clients know no other status): finished, killed.
    run = answer["run_result"]
    assert run["status"] == "Finished" and run["return_code"] == -9, run
    assert run["memory_exceeded"] is True and run["peak_memory_kb"] > 48 * 1024, run
    python = _run_code(service, {"language": "python", "code": "x = [0] * (10**10)"})
    run = python["run_result"]  # MemoryError: exit 1, as SandboxFusion's python gives it
    assert python["status"] == "Failed" and run["status"] == "Finished", python
    assert run["return_code"] == 1 and run["memory_exceeded"] is True, run


def test_sandbox_fusions_language_names_reach_their_languages(service: ServiceProcess) -> None:
    programs = {
        "R": "cat(1 + 1)",
        "php": "echo 1 + 1;",
        "js": "console.log(1 + 1)",
        "ts": "const two: number = 1 + 1;\nconsole.log(two)",
        "D_ut": "void main() { import std.stdio; write(1 + 1); }",
        "csharp": "class P { static void Main() { System.Console.Write(1 + 1); } }",
    }
    for language, code in programs.items():
        answer = _run_code(service, {"language": language, "code": code})
        assert answer["status"] == "Success", (language, answer)
        assert answer["run_result"]["stdout"].strip() == "2", (language, answer)
    # D_ut's tests are unittest blocks (MultiPL-E's D), run instead of main: a failing one
    # fails the run.
    for sum_, status in ((2, "Success"), (3, "Failed")):
        tested = f"unittest {{ assert(1 + 1 == {sum_}); }}\nvoid main() {{}}"
        assert _run_code(service, {"language": "D_ut", "code": tested})["status"] == status


def test_sandbox_fusions_own_client_runs_code_here(service: ServiceProcess) -> None:
    """``pip install sandbox-fusion``: its ``run_code``, given this server's base URL."""
    import sandbox_fusion

    endpoint = f"{service.url}/t/{TOKEN}"

    def run(**request: Any) -> Any:
        return sandbox_fusion.run_code(
            sandbox_fusion.RunCodeRequest(**request), endpoint=endpoint, max_attempts=1
        )

    echoed = run(code="print(input()[::-1])", language="python", stdin="olleh\n")
    assert echoed.status == sandbox_fusion.RunStatus.Success
    assert echoed.run_result is not None and echoed.run_result.stdout == "hello\n"
    for language, code in {
        "cpp": "#include <bits/stdc++.h>\nint main() { std::cout << 1 + 1; }",
        "php": "echo 1 + 1;",
        "R": "cat(1 + 1)",
        "scala": "object Main extends App { print(1 + 1) }",
        "kotlin_script": "print(1 + 1)",
        "sql": "SELECT 1 + 1;",
    }.items():
        # SandboxFusion's default 10 s compile is what a JVM's cold scalac can take on a slow
        # machine (seen: compile_result TimeLimitExceeded at 10.017 s); what this asks is
        # whether its client's request and answer go through, not how fast Scala compiles.
        answer = run(code=code, language=language, compile_timeout=60)
        assert answer.status == sandbox_fusion.RunStatus.Success, (language, answer)
        assert answer.run_result is not None and answer.run_result.stdout.strip() == "2", answer
    failed = run(code="import sys\nsys.exit(3)", language="python")
    assert failed.status == sandbox_fusion.RunStatus.Failed
    assert failed.run_result is not None and failed.run_result.return_code == 3
    spun = run(code="while True: pass", language="python", run_timeout=0.5)
    assert spun.run_result is not None
    assert spun.run_result.status == sandbox_fusion.CommandRunStatus.TimeLimitExceeded
    with pytest.raises(Exception, match="not served here"):  # its client raises on SandboxError
        run(code="1", language="julia")


#: SandboxFusion's ``Language`` (sandbox/runners/types.py), every name its /run_code takes.
SANDBOX_FUSION_LANGUAGES = (
    *("python", "cpp", "nodejs", "go", "go_test", "java", "php", "csharp", "bash", "typescript"),
    *("sql", "rust", "cuda", "lua", "R", "perl", "D_ut", "ruby", "scala", "julia", "pytest"),
    *("junit", "kotlin_script", "jest", "verilog", "python_gpu", "lean", "swift", "racket"),
)


def test_every_language_is_served_under_a_sandbox_fusion_name() -> None:
    from a2e_engine.engine.service._sandbox_fusion import LANGUAGES as SERVED
    from a2e_engine.engine.service._sandbox_fusion import NOT_SERVED
    from a2e_engine.engine.service._sandbox_fusion_oj_types import SandboxFusionLanguage
    from a2e_engine.tools._languages import LANGUAGES

    assert set(SERVED.values()) == set(LANGUAGES)
    # Each of SandboxFusion's names is served, or refused by name with the reason; c, js and
    # ts are names of this engine's besides.
    assert set(SANDBOX_FUSION_LANGUAGES) == (set(SERVED) | set(NOT_SERVED)) - {"c", "js", "ts"}
    # /submit's config.language takes the same names, SandboxFusion's own, and no other.
    assert set(get_args(SandboxFusionLanguage)) == set(SANDBOX_FUSION_LANGUAGES)
    assert not set(SERVED) & set(NOT_SERVED)


def test_sandbox_fusions_own_client_runs_jupyter_cells_here(service: ServiceProcess) -> None:
    """Its ``run_jupyter``, with the cells of SandboxFusion's own jupyter tests."""
    import sandbox_fusion

    endpoint = f"{service.url}/t/{TOKEN}"

    def run(cells: list[str], **request: Any) -> Any:
        ask = sandbox_fusion.RunJupyterRequest(cells=cells, **request)
        return sandbox_fusion.run_jupyter(ask, endpoint=endpoint, max_attempts=1)

    answer = run(
        [
            'a = "hello"',
            "a",
            'import sys\nsys.stderr.write("This is an error message\\n")',
            "assert False",
            "print(a)",
            "open('out.txt', 'w').write(open('in.txt').read() * 2)",
        ],
        files={"in.txt": base64.b64encode(b"ab").decode()},
        fetch_files=["out.txt"],
    )
    assert answer.status == sandbox_fusion.RunStatus.Success, answer
    assert answer.driver is not None and answer.driver.status == "Finished"
    cells = answer.cells
    assert cells[0].stdout == "" and cells[1].display[0]["text/plain"] == "'hello'"
    assert cells[2].stderr == "This is an error message\n"
    assert cells[3].error[0]["ename"] == "AssertionError"
    assert cells[4].stdout == "hello\n"
    assert base64.b64decode(answer.files["out.txt"]) == b"abab"
    timed = run(["x = 1", "while True:\n    pass", "print('never')"], total_timeout=1)
    assert timed.status == sandbox_fusion.RunStatus.Failed
    assert timed.driver is not None and timed.driver.status == "TimeLimitExceeded"
    assert len(timed.cells) == 2 and timed.cells[1].error[0]["ename"] == "CellTimeoutError"


def test_run_jupyter_past_its_deadline_and_bad_requests(service: ServiceProcess) -> None:
    url = f"{service.url}/run_jupyter?token={TOKEN}"
    # A long call into C outlasts the interruptions: the worker is killed at total_timeout plus
    # the slack, and the answer is SandboxFusion's for a run past its time.
    killed = httpx.post(
        url, json={"cells": ["sum(range(10**12))"], "total_timeout": 0.5}, timeout=30
    )
    assert killed.status_code == 200
    assert killed.json() == {
        **killed.json(),
        "status": "Failed",
        "cells": [],
        "driver": {**killed.json()["driver"], "status": "TimeLimitExceeded", "return_code": None},
    }
    huge = httpx.post(url, json={"cells": ["1"], "total_timeout": 1e308, "cell_timeout": 1e308})
    assert huge.status_code == 200 and huge.json()["status"] == "Success", huge.text
    for body, field in (
        ({}, "cells"),
        ({"cells": "print(1)"}, "cells"),
        ({"cells": [], "kernel": "julia"}, "kernel"),
        ({"cells": [], "total_timeout": 0}, "total_timeout"),
        ({"cells": [], "cell_timeout": -1}, "cell_timeout"),
    ):
        refused = httpx.post(url, json=body, timeout=30)
        assert refused.status_code == 422 and field in refused.json()["message"], body
    unauthorized = httpx.post(f"{service.url}/run_jupyter", json={"cells": ["1"]}, timeout=30)
    assert unauthorized.status_code == 401


def test_an_unknown_language_is_a_sandbox_error(service: ServiceProcess) -> None:
    answer = _run_code(service, {"language": "brainfuck", "code": "+."})
    assert answer["status"] == "SandboxError" and "'brainfuck' is not served" in answer["message"]
    assert answer["run_result"] is None
    from a2e_engine.engine.service._sandbox_fusion import NOT_SERVED

    for language, why in NOT_SERVED.items():
        refused = _run_code(service, {"language": language, "code": "1"})
        assert refused["status"] == "SandboxError" and refused["run_result"] is None
        assert refused["message"] == f"language {language!r} is not served here: {why}"


def test_sandbox_fusion_tokens_and_ping(service: ServiceProcess) -> None:
    # SkyRL and SandboxFusion's SDK append /run_code to a base URL: the token goes in the path.
    answer = _run_code(service, {"code": "print(1)"}, url_suffix=f"/t/{TOKEN}/run_code")
    assert answer["run_result"]["stdout"] == "1\n"
    ping = httpx.get(f"{service.url}/t/{TOKEN}/v1/ping", timeout=10)
    assert ping.status_code == 200 and ping.content == b'"pong"'
    for url in ("/run_code", f"/run_code?token={TOKEN}x", f"/t/{TOKEN}x/run_code", "/t//run_code"):
        response = httpx.post(f"{service.url}{url}", json={"code": "1", "language": "python"})
        assert response.status_code == 401, url
    missing = httpx.post(f"{service.url}/run_code?token={TOKEN}", json={"language": "python"})
    assert missing.status_code == 422 and "code" in missing.json()["message"]


def test_overload_is_429_with_retry_after(tmp_path: Path) -> None:
    config = tmp_path / "engine.toml"
    config.write_text("[engine]\nmax_workers = 1\n[engine.admission]\nmax_pending_calls = 1\n")
    server = ServiceProcess("--config", str(config))
    try:
        sleeper = {"arguments": {"code": "import time\ntime.sleep(1)"}}
        statuses: list[tuple[int, str | None]] = []

        def call() -> None:
            response = httpx.post(f"{server.url}/v1/tools/python_eval", json=sleeper, timeout=30)
            statuses.append((response.status_code, response.headers.get("retry-after")))

        callers = [threading.Thread(target=call) for _ in range(4)]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join()
        assert (200, None) in statuses and (429, "1") in statuses, statuses
        assert len(statuses) == 4
        answer = httpx.post(
            f"{server.url}/run_code",
            json={"code": "import time\ntime.sleep(1)", "language": "python"},
        )
        assert answer.status_code == 200
    finally:
        assert server.stop() == 0


# -- output cut short: its file was in the request's session --

BIG = "print('x' * 1_500_000)"
GONE = re.compile(r"\[\.\.\. \d+ characters of (\S+) omitted; ([^\n]*?) \.\.\.\]")


def _says_it_is_not_kept(text: str) -> None:
    """The marker says where the whole stream went: not a path (on the server, and gone with
    the request's session) but that it was not kept."""
    (where,) = [match[2] for match in GONE.finditer(text)]
    assert where.startswith("not kept: it was in the request's session"), where
    assert "/" not in where, where


def test_a_stream_cut_short_names_no_file_of_the_ended_session(http: httpx.Client) -> None:
    data = http.post("/v1/tools/python_eval", json={"arguments": {"code": BIG}}).json()["data"]
    assert data["truncated"] and "stdout_path" not in data, sorted(data)
    _says_it_is_not_kept(data["stdout"])
    assert data["stdout_note"].startswith("not kept")
    with http.stream(
        "POST",
        "/v1/tools/python_eval",
        json={"arguments": {"code": BIG}},
        headers={"Accept": "text/event-stream"},
    ) as response:
        results = [line for line in response.iter_lines() if line.startswith('data: {"success')]
    streamed = json.loads(results[-1][len("data: ") :])["data"]
    assert "stdout_path" not in streamed
    _says_it_is_not_kept(streamed["stdout"])
    ran = http.post("/run_code", json={"code": BIG, "language": "python"}).json()
    assert ran["status"] == "Success", ran["message"]
    _says_it_is_not_kept(ran["run_result"]["stdout"])
