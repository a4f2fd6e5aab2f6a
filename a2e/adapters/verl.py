"""A drop-in for verl's SandboxFusion code reward, graded by an engine over REST.

In verl's configuration (``reward.custom_reward_function``; up to verl 0.7.0,
``custom_reward_function`` at the top)::

    path: <this file: python -c "import a2e.adapters.verl as m; print(m.__file__)">
    name: compute_score
    reward_kwargs: {a2e_url: "http://127.0.0.1:8080", max_concurrent: 32}

``compute_score(data_source, solution_str, ground_truth, extra_info, **reward_kwargs)`` returns
what verl's own SandboxFusion reward gives its trainer for the sample (the share of its first
ten cases that passed: ``a2e.adapters._verl_rules`` says how each is judged), from
``code_eval`` calls that compile the program once for all its cases, rather than one
``/run_code`` (and one compile) per case.
``compute_score_with_cases`` returns verl's ``(score, per-case results)`` pair: ``True``,
``False``, or ``-1`` to ``-4`` as verl codes them. ``compute_score_batch`` is the batched form
verl's batch reward manager calls.

The language is Python, as verl's ``compute_score`` sends, unless the sample's ``extra_info``
has a ``language`` or the reward's settings do (``reward_kwargs: {language: cpp}``): then the
sample is graded as verl's ``check_correctness`` grades it in that language, SandboxFusion's
name for it (``cpp``, ``java``, ``go``, ``rust``, ``nodejs``, ...); one not served scores -1 a
case, as SandboxFusion's refusal does in verl.

The engine is ``a2e_url`` (or ``$A2E_URL``), with ``$A2E_TOKEN`` when it asks for one; at most
``max_concurrent`` (or ``$A2E_REWARD_CONCURRENCY``, 32) calls are in flight at once from this
process, over kept-alive connections. A sample's cases go one to a ``code_eval`` call, its calls
side by side (``CALLS_PER_SAMPLE``), so that a program that loops forever holds its sample up
for one time limit, as verl's one request per case does; the program compiles once for all
of them (the engine's compile cache). ``compute_score`` judges the first ten cases only, which
alone decide the score. An engine that cannot be reached, or a call that fails, gives every
case of the sample ``-1``, as a SandboxFusion that fails does: never an exception in the
trainer.
"""

from __future__ import annotations

import http.client
import itertools
import json
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

from a2e.adapters._sandbox_fusion_languages import SANDBOX_FUSION_LANGUAGES
from a2e.adapters._verl_rules import (
    FIRST_CASES,
    MEMORY_MB,
    TIME_LIMIT_S,
    Problem,
    case_result,
    problem_of,
    run_result,
    score_of,
)

__all__ = ["compute_score", "compute_score_batch", "compute_score_with_cases"]

DEFAULT_URL = "http://127.0.0.1:8080"
DEFAULT_CONCURRENCY = 32
#: A sample's calls in flight at once (within ``max_concurrent`` for the whole process). A
#: call judges one case: a call's cases would run one after another, each up to its time limit.
CALLS_PER_SAMPLE = 8
#: How long a kept-alive connection may sit idle before it is not used again.
_IDLE_S = 4.0
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
    """verl's reward for the sample: the share of its first ten cases that passed (the cases
    after them are not judged: they change nothing here)."""
    language = extra_info.get("language") if isinstance(extra_info, dict) else None
    if language is not None:
        reward_kwargs = {**reward_kwargs, "language": language}
    return _scored(solution_str, ground_truth, reward_kwargs, FIRST_CASES)[0]


def compute_score_batch(
    data_sources: list[Any],
    solution_strs: list[str],
    ground_truths: list[Any],
    extra_infos: list[Any] | None = None,
    **reward_kwargs: Any,
) -> list[float]:
    """Each sample's reward, ``max_concurrent`` calls at a time."""
    workers = _concurrency(reward_kwargs)
    extras = extra_infos or []
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(solution_strs)))) as pool:
        return list(
            pool.map(
                lambda sample: compute_score(None, *sample, **reward_kwargs),
                itertools.zip_longest(solution_strs, ground_truths, extras[: len(solution_strs)]),
            )
        )


def compute_score_with_cases(
    solution_str: str, ground_truth: Any, **reward_kwargs: Any
) -> tuple[float, list[Any]]:
    """verl's ``(score, results)``: each case ``True``, ``False`` or -1 to -4; what went wrong
    before any case ran, in verl's words, in place of the results."""
    return _scored(solution_str, ground_truth, reward_kwargs, None)


def _scored(
    solution_str: str, ground_truth: Any, reward_kwargs: dict[str, Any], judged: int | None
) -> tuple[float, list[Any]]:
    """``compute_score_with_cases``, judging the first ``judged`` cases only (None: all)."""
    try:
        problem = problem_of(str(solution_str or ""), ground_truth)
        language = str(reward_kwargs.get("language", "python"))
        return _graded(problem, language, reward_kwargs, judged)
    except Exception as exc:  # the trainer must get a reward, as verl's own gives one
        log.exception("grading a sample failed")
        return 0.0, [{"error": f"Unhandled exception: {exc}"}]


def _graded(
    problem: Problem, language: str, reward_kwargs: dict[str, Any], judged: int | None
) -> tuple[float, list[Any]]:
    if problem.error:
        return 0.0, [{"error": problem.error}]
    if problem.failed:
        return 0.0, [-1] * problem.failed
    if not problem.inputs:
        return 0.0, []
    try:
        engine = _engine(reward_kwargs)
    except ValueError as exc:
        log.warning("%s: every case scores -1", exc)
        return 0.0, [-1] * len(problem.inputs)
    tool_language = SANDBOX_FUSION_LANGUAGES.get(language)
    if tool_language is None:  # SandboxFusion would refuse it, or not serve it: -1 each
        log.warning("language %r is not served: every case scores -1", language)
        return 0.0, [-1] * len(problem.inputs)
    slots = _slots(reward_kwargs)
    judge = _run_one if problem.programs is not None or None in problem.outputs else _judge_one
    cases = range(len(problem.inputs))[:judged]

    def in_a_slot(index: int) -> bool | int:
        with slots:
            return judge(engine, problem, tool_language, index)

    with ThreadPoolExecutor(max_workers=min(len(cases), CALLS_PER_SAMPLE)) as pool:
        results: list[Any] = list(pool.map(in_a_slot, cases))
    if -4 in results:  # verl: a compile error, and every case after it
        first = results.index(-4)
        results[first:] = [-4] * (len(results) - first)
    return score_of(results), results


def _judge_one(engine: _Engine, problem: Problem, language: str, index: int) -> bool | int:
    """One case, judged by a ``code_eval`` call with verl's rule."""
    arguments = {
        "program": problem.program,
        "language": language,
        "test_cases": [{"input": problem.inputs[index], "output": problem.outputs[index]}],
        "compare": "verl",
        "time_limit": TIME_LIMIT_S,
        "compile_timeout": TIME_LIMIT_S,
        "memory_mb": MEMORY_MB,
    }
    judged = engine.call("code_eval", arguments, 2 * TIME_LIMIT_S + _SLACK_S)
    if judged is None:
        return -1
    tests = judged.get("tests")
    if judged.get("verdict") == "CE" and not tests:
        return case_result("CE", language)  # it did not compile, or does not parse
    if not isinstance(tests, list) or len(tests) != 1 or not isinstance(tests[0], dict):
        return -1
    return case_result(str(tests[0].get("verdict")), language)


def _run_one(engine: _Engine, problem: Problem, language: str, index: int) -> bool | int:
    """One case as its own ``run_code`` call, as verl sends each, for what ``code_eval`` does
    not take: a program per case (asserts), or a case that passes whatever it prints."""
    program = problem.programs[index] if problem.programs is not None else problem.program
    arguments = {
        "language": language,
        "code": program,
        "stdin": problem.inputs[index],
        "compile_timeout": TIME_LIMIT_S,
        "run_timeout": TIME_LIMIT_S,
        "memory_mb": MEMORY_MB,
    }
    ran = engine.call("run_code", arguments, 2 * TIME_LIMIT_S + _SLACK_S)
    return run_result(ran, problem.outputs[index]) if ran is not None else -1


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
        self.prefix = parts.path.rstrip("/")
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if token:
            if any(c in str(token) for c in "\r\n"):
                raise ValueError("the token is not one line")
            self.headers["Authorization"] = f"Bearer {token}"
        self._idle: list[tuple[http.client.HTTPConnection, float]] = []
        self._lock = threading.Lock()

    def call(self, tool: str, arguments: dict[str, Any], timeout_s: int) -> dict[str, Any] | None:
        """The tool's data, or None when the engine could not say (verl's -1 for each case).
        A kept-alive connection the server closed meanwhile is retried once, on a new one;
        nothing else is (a call sent twice is graded twice)."""
        body = json.dumps({"arguments": arguments, "timeout": timeout_s}).encode()
        for reused in (True, False):
            connection = self._take() if reused else None
            if connection is None:
                connection = self._connect()
                reused = False
            connection.timeout = timeout_s + _SLACK_S
            if connection.sock is not None:
                connection.sock.settimeout(connection.timeout)
            try:
                connection.request("POST", f"{self.prefix}/v1/tools/{tool}", body, self.headers)
                response = connection.getresponse()
                payload = response.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                connection.close()
                if reused:
                    continue
                return None
            except (OSError, http.client.HTTPException):
                connection.close()
                return None
            self._give_back(connection)
            try:
                answer = json.loads(payload)
            except ValueError:
                return None
            data = answer.get("data") if isinstance(answer, dict) else None
            return data if response.status == 200 and isinstance(data, dict) else None
        return None

    def _take(self) -> http.client.HTTPConnection | None:
        """An idle connection young enough that the server has not closed it (uvicorn closes
        one idle for 5 s), or None."""
        now = time.monotonic()
        with self._lock:
            while self._idle:
                connection, since = self._idle.pop()
                if now - since < _IDLE_S:
                    return connection
                connection.close()
        return None

    def _connect(self) -> http.client.HTTPConnection:
        kind = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        return kind(self.host, self.port)

    def _give_back(self, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            self._idle.append((connection, time.monotonic()))


_engines: dict[tuple[str, str | None], _Engine] = {}
_semaphores: dict[int, threading.BoundedSemaphore] = {}
_shared_lock = threading.Lock()


def _forget() -> None:
    """In a forked reward worker: its parent's connections and held slots are not its own."""
    global _shared_lock
    _engines.clear()
    _semaphores.clear()
    _shared_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget)


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
    except (TypeError, ValueError):
        return DEFAULT_CONCURRENCY


def _slots(reward_kwargs: dict[str, Any]) -> threading.BoundedSemaphore:
    """The bound on calls in flight from this process, one per size asked for."""
    size = _concurrency(reward_kwargs)
    with _shared_lock:
        semaphore = _semaphores.get(size)
        if semaphore is None:
            semaphore = _semaphores[size] = threading.BoundedSemaphore(size)
        return semaphore
