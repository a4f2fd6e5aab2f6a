"""A drop-in for verl's SandboxFusion code reward, graded by an engine over REST.

In verl's configuration (``reward.custom_reward_function``; up to verl 0.7.0,
``custom_reward_function`` at the top)::

    path: <this file: python -c "import a2e_engine.engine.rewards.verl as m; print(m.__file__)">
    name: compute_score
    reward_kwargs: {a2e_url: "http://127.0.0.1:8080", max_concurrent: 32}

``compute_score(data_source, solution_str, ground_truth, extra_info, **reward_kwargs)`` returns
what verl's own SandboxFusion reward gives its trainer for the sample (the share of its first
ten cases that passed: ``engine.rewards._verl_rules`` says how each is judged), from one
``code_eval`` call per sample rather than one ``/run_code`` per case.
``compute_score_with_cases`` returns verl's ``(score, per-case results)`` pair: ``True``,
``False``, or ``-1`` to ``-4`` as verl codes them. ``compute_score_batch`` is the batched form
verl's batch reward manager calls.

The engine is ``a2e_url`` (or ``$A2E_URL``), with ``$A2E_TOKEN`` when it asks for one; at most
``max_concurrent`` (or ``$A2E_REWARD_CONCURRENCY``, 32) samples are graded at once from this
process, over kept-alive connections. An engine that cannot be reached, or a call that fails,
gives every case of the sample ``-1``, as a SandboxFusion that fails does: never an exception
in the trainer.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import threading
from typing import Any
from urllib.parse import urlsplit

from a2e_engine.engine.rewards._verl_rules import (
    MEMORY_MB,
    TIME_LIMIT_S,
    case_result,
    problem_of,
    score_of,
)

__all__ = ["compute_score", "compute_score_batch", "compute_score_with_cases"]

DEFAULT_URL = "http://127.0.0.1:8080"
DEFAULT_CONCURRENCY = 32
#: Cases per ``code_eval`` call: each may take its whole time limit, in turn, and a call must
#: end within the engine's cap on a call's timeout (300 s by default).
CASES_PER_CALL = 25
#: Beyond the cases' own time limits, what a call may take (the engine's queue, the HTTP).
_SLACK_S = 30

log = logging.getLogger("a2e.rewards.verl")


def compute_score(
    data_source: Any = None,
    solution_str: str = "",
    ground_truth: Any = None,
    extra_info: Any = None,
    **reward_kwargs: Any,
) -> float:
    """verl's reward for the sample: the share of its first ten cases that passed."""
    return compute_score_with_cases(solution_str, ground_truth, **reward_kwargs)[0]


def compute_score_batch(
    data_sources: list[Any],
    solution_strs: list[str],
    ground_truths: list[Any],
    extra_infos: list[Any] | None = None,
    **reward_kwargs: Any,
) -> list[float]:
    """Each sample's reward, graded ``max_concurrent`` at a time."""
    from concurrent.futures import ThreadPoolExecutor

    workers = _concurrency(reward_kwargs)
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(solution_strs)))) as pool:
        return list(
            pool.map(
                lambda pair: compute_score(None, pair[0], pair[1], None, **reward_kwargs),
                zip(solution_strs, ground_truths, strict=True),
            )
        )


def compute_score_with_cases(
    solution_str: str, ground_truth: Any, **reward_kwargs: Any
) -> tuple[float, list[Any]]:
    """verl's ``(score, results)``: each case ``True``, ``False`` or -1 to -4."""
    problem = problem_of(solution_str, ground_truth)
    if problem.error:
        return 0.0, [{"error": problem.error}]
    if not problem.inputs:
        return 0.0, []
    cases = [
        {"input": given, "output": wanted}
        for given, wanted in zip(problem.inputs, problem.outputs, strict=True)
    ]
    try:
        engine = _engine(reward_kwargs)
    except ValueError as exc:
        log.warning("%s: every case scores -1", exc)
        return 0.0, [-1] * len(cases)
    results: list[Any] = []
    with _slots(reward_kwargs):
        for start in range(0, len(cases), CASES_PER_CALL):
            chunk = cases[start : start + CASES_PER_CALL]
            arguments = {
                "program": problem.program,
                "language": "python",
                "test_cases": chunk,
                "compare": "verl",
                "time_limit": TIME_LIMIT_S,
                "memory_mb": MEMORY_MB,
            }
            judged = engine.code_eval(arguments, len(chunk) * TIME_LIMIT_S + _SLACK_S)
            tests = judged.get("tests") if judged is not None else None
            if judged is not None and judged.get("verdict") == "CE" and not tests:
                tests = [{"verdict": "CE"}] * len(chunk)  # a program that does not parse
            if not isinstance(tests, list) or len(tests) != len(chunk):
                results.extend([-1] * len(chunk))
                continue
            results.extend(case_result(str(test.get("verdict"))) for test in tests)
    return score_of(results), results


# -- the engine, over REST --


class _Engine:
    """``POST /v1/tools/code_eval`` on one server, over kept-alive connections that threads
    take and give back."""

    def __init__(self, url: str, token: str | None) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"a2e_url {url!r} is not an http:// or https:// URL")
        self.https = parts.scheme == "https"
        self.host, self.port = parts.hostname, parts.port
        self.path = parts.path.rstrip("/") + "/v1/tools/code_eval"
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def code_eval(self, arguments: dict[str, Any], timeout_s: int) -> dict[str, Any] | None:
        """The tool's data, or None when the engine could not say (verl's -1 for each case)."""
        body = json.dumps({"arguments": arguments, "timeout": timeout_s}).encode()
        for attempt in range(2):  # once more on a kept-alive connection the server had closed
            connection = self._take()
            connection.timeout = timeout_s + _SLACK_S
            if connection.sock is not None:
                connection.sock.settimeout(connection.timeout)
            try:
                connection.request("POST", self.path, body, self.headers)
                response = connection.getresponse()
                payload = response.read()
            except (OSError, http.client.HTTPException):
                connection.close()
                if attempt == 0:
                    continue
                return None
            self._give_back(connection)
            try:
                answer = json.loads(payload)
            except ValueError:
                return None
            data = answer.get("data") if isinstance(answer, dict) else None
            return data if response.status == 200 and isinstance(data, dict) else None
        return None

    def _take(self) -> http.client.HTTPConnection:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        kind = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        return kind(self.host, self.port)

    def _give_back(self, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            self._idle.append(connection)


_engines: dict[tuple[str, str | None], _Engine] = {}
_semaphores: dict[int, threading.BoundedSemaphore] = {}
_shared_lock = threading.Lock()


def _engine(reward_kwargs: dict[str, Any]) -> _Engine:
    url = str(reward_kwargs.get("a2e_url") or os.environ.get("A2E_URL") or DEFAULT_URL)
    token = reward_kwargs.get("a2e_token") or os.environ.get("A2E_TOKEN") or None
    with _shared_lock:
        engine = _engines.get((url, token))
        if engine is None:
            engine = _engines[(url, token)] = _Engine(url, token)
        return engine


def _concurrency(reward_kwargs: dict[str, Any]) -> int:
    given = reward_kwargs.get("max_concurrent") or os.environ.get("A2E_REWARD_CONCURRENCY")
    try:
        return max(1, int(given)) if given is not None else DEFAULT_CONCURRENCY
    except ValueError:
        return DEFAULT_CONCURRENCY


def _slots(reward_kwargs: dict[str, Any]) -> threading.BoundedSemaphore:
    """The bound on samples graded at once from this process, one per size asked for."""
    size = _concurrency(reward_kwargs)
    with _shared_lock:
        semaphore = _semaphores.get(size)
        if semaphore is None:
            semaphore = _semaphores[size] = threading.BoundedSemaphore(size)
        return semaphore
