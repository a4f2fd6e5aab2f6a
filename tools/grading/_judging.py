"""Judging a program by its output: the test cases a benchmark gives, and the verdict of each
case and of them all.

Verdicts are the judges': ``AC`` (accepted), ``WA`` (wrong answer), ``TLE`` (time limit),
``MLE`` (memory limit), ``RE`` (runtime error: a non-zero exit, a signal, or a program that
could not start), ``CE`` (compile error); and a checker's (``tools.grading._checker``): ``PE``
(presentation error, when the call asks for it), ``PC`` (partial points) and ``JE`` (the
checker failed: a judge error); and an interactive program's ``IL`` (idleness: it waited
past its wall-clock limit). The overall verdict is ``AC`` when every case is, else
the verdict of the first case, in order, that is not. How an output is compared (``compare``)
is ``tools.grading._comparisons``'s.
"""

from __future__ import annotations

import collections
import json
from dataclasses import dataclass
from typing import Any

from a2e_engine.sandbox._exits import how_it_ended
from a2e_engine.tools.grading._comparisons import compare_outputs

__all__ = [
    "Capture",
    "CaseVerdict",
    "JudgeCase",
    "cases_from",
    "verdict_of_exit",
    "verdict_of_run",
]

ACCEPTED, WRONG, TIME, MEMORY, RUNTIME, COMPILE = "AC", "WA", "TLE", "MLE", "RE", "CE"
#: A checker's other verdicts: presentation error (when asked for), partial points, and its
#: own failure, a judge error that is no verdict on the candidate.
PRESENTATION, PARTIAL, JUDGE_ERROR = "PE", "PC", "JE"
#: An interactive program that waited past its wall-clock limit (for input, or on a pipe).
IDLENESS = "IL"
#: How much a program may print beyond the expected output before it is cut off (and wrong).
OUTPUT_SLACK_CHARS = 1 << 16
MAX_CASES = 10_000


@dataclass(frozen=True)
class JudgeCase:
    input: str
    output: str


@dataclass(frozen=True)
class CaseVerdict:
    verdict: str
    reason: str = ""


def cases_from(test_cases: Any, input_output: Any) -> list[JudgeCase]:
    """The cases given as ``test_cases`` (``[{"input", "output"}...]``) or in the APPS and
    LiveCodeBench ``input_output`` form (``{"inputs": [...], "outputs": [...]}``, the object or
    its JSON text as the datasets store it). An output given as a list of lines is those lines."""
    if test_cases is not None and input_output is not None:
        raise ValueError("give test_cases or input_output, not both")
    if input_output is not None:
        return _from_input_output(input_output)
    if not isinstance(test_cases, list) or not test_cases:
        raise ValueError("test_cases must be a non-empty array of {input, output}")
    cases = []
    for number, case in enumerate(test_cases, 1):
        if not isinstance(case, dict) or "output" not in case:
            raise ValueError(f"test case {number} must be an object with input and output")
        cases.append(JudgeCase(_text(case.get("input", ""), number), _text(case["output"], number)))
    return _bounded(cases)


def _from_input_output(given: Any) -> list[JudgeCase]:
    if isinstance(given, str):
        try:
            given = json.loads(given)
        except ValueError:
            raise ValueError("input_output is not JSON") from None
    if not isinstance(given, dict):
        raise ValueError("input_output must be an object with inputs and outputs")
    inputs, outputs = given.get("inputs"), given.get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or not inputs:
        raise ValueError("input_output needs non-empty inputs and outputs arrays")
    if len(inputs) != len(outputs):
        raise ValueError(f"input_output has {len(inputs)} inputs but {len(outputs)} outputs")
    return _bounded(
        [
            JudgeCase(_text(i, n), _text(o, n))
            for n, (i, o) in enumerate(zip(inputs, outputs, strict=True), 1)
        ]
    )


def _text(value: Any, number: int) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(line, str) for line in value):
        return "\n".join(value)
    raise ValueError(f"test case {number}: input and output must be text (or lists of lines)")


def _bounded(cases: list[JudgeCase]) -> list[JudgeCase]:
    if len(cases) > MAX_CASES:
        raise ValueError(f"at most {MAX_CASES} test cases, got {len(cases)}")
    return cases


class Capture:
    """A program's stdout or stderr kept whole up to ``limit`` characters for the comparison;
    past that it is marked and dropped (the output is then wrong, and the judge's memory safe).
    With ``tail``, the last ``tail`` characters are kept too, whatever was dropped before them:
    what ``ends`` shows of an output too long to keep."""

    def __init__(self, limit: int, tail: int = 0) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0
        self.overflowed = False
        self.written = 0
        self.tail = tail
        self.tail_parts: collections.deque[str] = collections.deque()
        self.tail_size = 0

    def write(self, text: str, /) -> int:
        self.written += len(text)
        if self.tail:
            self._keep_tail(text)
        room = self.limit - self.size
        if len(text) > room:
            self.overflowed = True
            text = text[: max(0, room)]
        if text:
            self.parts.append(text)
            self.size += len(text)
        return len(text)

    def _keep_tail(self, text: str) -> None:
        if len(text) >= self.tail:
            self.tail_parts.clear()
            text = text[-self.tail :]
            self.tail_size = 0
        self.tail_parts.append(text)
        self.tail_size += len(text)
        while self.tail_size - len(self.tail_parts[0]) >= self.tail:
            self.tail_size -= len(self.tail_parts.popleft())

    def getvalue(self) -> str:
        return "".join(self.parts)

    def ends(self, length: int) -> str:
        """All that was written, or past ``length`` characters its two ends around ``...``
        (SandboxFusion's ``truncate_str``); needs ``limit`` and ``tail`` of at least half of
        ``length``."""
        if self.written <= length:
            return self.getvalue()
        keep = (length - 3) // 2
        tail = "".join(self.tail_parts)
        return self.getvalue()[:keep] + "..." + (tail[-keep:] if keep else "")


def verdict_of_run(
    run: dict[str, Any], stdout: Capture, expected: str, rule: str, tolerance: float
) -> CaseVerdict:
    """One case's verdict from its run (``tools._submission`` shape) and what it printed."""
    ended = verdict_of_exit(run)
    if ended.verdict != ACCEPTED:
        return ended
    if stdout.overflowed:
        return CaseVerdict(WRONG, f"printed more than {stdout.limit} characters")
    if not compare_outputs(stdout.getvalue(), expected, rule, tolerance):
        return CaseVerdict(WRONG, "its output differs from the expected one")
    return CaseVerdict(ACCEPTED)


def verdict_of_exit(run: dict[str, Any]) -> CaseVerdict:
    """The verdict of how a run ended, its output aside: a test program's (MultiPL-E), or
    the part of a case's before its output is compared."""
    status = run["status"]
    if status == "TimeLimitExceeded":
        spent = f"{run['execution_time']:.2f} s of wall-clock time, {run['cpu_time']:.2f} s of CPU"
        which = "CPU time" if run.get("exceeded") == "cpu_time" else "wall-clock time"
        return CaseVerdict(TIME, f"ran past its {which} limit ({spent})")
    if status == "MemoryLimitExceeded":
        return CaseVerdict(MEMORY, f"held {run['peak_memory_kb']} KiB, past its limit")
    if status != "Finished":
        return CaseVerdict(RUNTIME, f"could not start: {run['stderr']}")
    code = run["return_code"]
    if code != 0:
        return CaseVerdict(RUNTIME, how_it_ended(code))
    return CaseVerdict(ACCEPTED)
