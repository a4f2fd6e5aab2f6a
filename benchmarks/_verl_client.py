"""verl's SandboxFusion code reward, its client path written anew: the oracle that the engine's
drop-in (``a2e.adapters.verl``) is checked against, and the grader of the ``--reward-batch``
benchmark's systems A and B.

Written from volcengine/verl b178a3c ``verl/utils/reward_score/sandbox_fusion`` (its
``__init__.py`` and ``utils.py``, byte-identical from v0.6.0 to 0.10.0.dev and in the 0.9.1
wheel), not imported from it: verl's package imports torch and Ray. What it does, as verl does:

* the code cut from the completion (``compute_score``): after the last "```python" up to the
  next fence; else the first fenced block, less its first line when that is a language name
  (letters only); a completion without a fence scores 0 untried;
* one ``POST /run_code`` per test case with verl's eight fields (``compile_timeout`` and
  ``run_timeout`` both the case's timeout, ``memory_limit_MB``, ``files`` ``{}``,
  ``fetch_files`` ``[]``), a sample's cases side by side (``check_correctness``'s thread pool),
  each request holding a slot of the semaphore that every sample shares (verl's
  ``Semaphore(sandbox_fusion.max_concurrent)``, 32 by default), tried up to three times on a 504;
* each answer mapped as ``_process_single_case`` maps it: ``True`` (stdout equal to the
  expected output once trailing newlines are dropped), ``False``, ``-1`` (the request or the
  sandbox failed), ``-2`` (a runtime error), ``-3`` (the time limit), ``-4`` (a compile error,
  and every case after the first one that had it);
* ``continuous=True``'s score: the share of the first ten cases that are ``True``.

verl's ``compute_score`` always sends ``language: "python"``; its ``check_correctness`` takes a
``language``, which is how a verl user grades another language (a reward function of their own
that passes it): ``language`` here.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from a2e.adapters._verl_rules import extracted_code

__all__ = ["FIRST_CASES", "Answer", "verl_case", "verl_reward", "verl_wrapped"]

#: verl's ``continuous=True`` scores the first this many cases.
FIRST_CASES = 10
#: verl's ``MAX_RETRIES`` (on a 504 only) and ``API_TIMEOUT`` (added to a request's limits).
_ATTEMPTS = 3
_API_TIMEOUT_S = 10

#: A ``/run_code`` answer, or ``None`` where the request failed.
Answer = dict[str, Any] | None


def verl_reward(
    run_code_url: str,
    completion: str,
    ground_truth: Any,
    semaphore: threading.Semaphore,
    client: httpx.Client,
    *,
    language: str = "python",
    timeout: int = 10,
    memory_limit_mb: int = 1024,
    on_answer: Callable[[Answer], None] | None = None,
) -> tuple[float, list[Any]]:
    """verl's ``(score, results)`` for one sample, graded through ``run_code_url`` (verl's
    ``sandbox_fusion_url``: the endpoint itself, ``.../run_code``); what went wrong before any
    case ran, in verl's words, in place of the results. ``on_answer`` sees every request's
    answer (``None`` for one that failed), to count requests and compiles."""
    code = extracted_code(completion)
    if code is None:
        return 0.0, [{"error": "Invalid completion (missing code block)"}]
    try:
        cases = ground_truth
        if not isinstance(cases, dict):
            try:
                cases = json.loads(cases)
            except json.JSONDecodeError:
                return 0.0, [{"error": "Invalid test_cases JSON format"}]
        if (
            cases is not None
            and "assert_case" in cases
            and isinstance(cases.get("assert_case"), list)
        ):
            cases.setdefault("inputs", ["" for _ in cases["assert_case"]])
            cases.setdefault("outputs", [None for _ in cases["assert_case"]])
        elif not cases or "inputs" not in cases or "outputs" not in cases:
            return 0.0, [{"error": "Invalid test_cases structure (missing inputs/outputs)"}]
        post = _Poster(run_code_url, client, semaphore, timeout, memory_limit_mb, on_answer)
        results = _check_correctness(post, cases, code, language)
    except Exception as exc:  # verl's compute_score catches everything, and scores it 0
        return 0.0, [{"error": f"Unhandled exception: {exc}"}]
    first = results[:FIRST_CASES]
    return (sum(1 for r in first if r is True) / len(first) if first else 0.0), results


def verl_case(answer: Answer, expected: Any) -> bool | int:
    """verl's ``_process_single_case`` on one ``/run_code`` answer (``None``: the request
    failed)."""
    if not answer:
        return -1
    status = answer.get("status")
    compiled, run = answer.get("compile_result"), answer.get("run_result")
    if status == "SandboxError":
        return -1
    if status == "Failed":
        if compiled and (
            compiled.get("status") in ("Error", "TimeLimitExceeded")
            or (compiled.get("status") == "Finished" and compiled.get("return_code") != 0)
        ):
            return -4
        if run:
            if run.get("status") == "TimeLimitExceeded":
                return -3
            if run.get("status") == "Error" or (
                run.get("status") == "Finished" and run.get("return_code") != 0
            ):
                return -2
        return -1
    if status == "Success" and run and run.get("status") == "Finished":
        stdout = run.get("stdout")
        printed = str(stdout if stdout is not None else "")
        return expected is None or printed.rstrip("\n") == str(expected).rstrip("\n")
    return -1


def verl_wrapped(code: str, fn_name: str) -> str:
    """``code`` inside verl's call-based wrapper (a program that reads one JSON value per line
    of stdin as the arguments of ``fn_name`` and prints what it returns)."""
    from a2e.adapters._verl_rules import _call_based

    return _call_based(code, fn_name)


def _check_correctness(
    post: _Poster, cases: dict[str, Any], code: str, language: str
) -> list[bool | int]:
    """verl's ``check_correctness``: the cases side by side, in a pool of verl's size."""
    inputs, outputs = cases["inputs"], cases["outputs"]
    count = len(inputs)
    asserts = cases.get("assert_case", [""] * count)
    if count == 0:
        return []
    if len(outputs) != count or len(asserts) != count:
        return [-1] * count
    fn_name = cases.get("fn_name")

    def one(index: int) -> bool | int:
        program = code + "\n\n" + asserts[index]
        if fn_name and language == "python":
            program = verl_wrapped(program, fn_name)
        given = inputs[index]
        try:
            answer = post(program, None if given is None else str(given), language)
        except Exception:  # verl logs it: the case is -1
            answer = None
        return verl_case(answer, outputs[index])

    with ThreadPoolExecutor(max_workers=max(32, (os.cpu_count() or 1) * 5)) as pool:
        results = list(pool.map(one, range(count)))
    if -4 in results:
        first = results.index(-4)
        results[first:] = [-4] * (count - first)
    return results


class _Poster:
    """verl's ``call_sandbox_api`` within a slot of the shared semaphore."""

    def __init__(
        self,
        url: str,
        client: httpx.Client,
        semaphore: threading.Semaphore,
        timeout: int,
        memory_limit_mb: int,
        on_answer: Callable[[Answer], None] | None,
    ) -> None:
        self.url, self.client, self.semaphore = url, client, semaphore
        self.timeout, self.memory_limit_mb, self.on_answer = timeout, memory_limit_mb, on_answer

    def __call__(self, code: str, stdin: str | None, language: str) -> Answer:
        body = {
            "compile_timeout": self.timeout,
            "run_timeout": self.timeout,
            "code": code,
            "stdin": stdin,
            "memory_limit_MB": self.memory_limit_mb,
            "language": language,
            "files": {},
            "fetch_files": [],
        }
        with self.semaphore:
            for attempt in range(_ATTEMPTS):
                status, answer = self._posted(body)
                if self.on_answer is not None:
                    self.on_answer(answer)
                if status != 504:
                    return answer
                if attempt < _ATTEMPTS - 1:
                    time.sleep(attempt + 1)
        return None

    def _posted(self, body: dict[str, Any]) -> tuple[int, Answer]:
        """The HTTP status (0 if there was none) and the answer, ``None`` unless it is a JSON
        object of a 2xx."""
        try:
            response = self.client.post(
                self.url, json=body, timeout=2 * self.timeout + _API_TIMEOUT_S
            )
        except httpx.HTTPError:
            return 0, None
        if not response.is_success:
            return response.status_code, None
        try:
            answer = response.json()
        except ValueError:
            return response.status_code, None
        return response.status_code, answer if isinstance(answer, dict) else None
