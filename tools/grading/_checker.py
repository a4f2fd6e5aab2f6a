"""A problem's checker (a special judge): the program that decides whether a case's output is
right when more than one answer is, as contest datasets ship it, and its verdict on one case.

The convention is testlib's: ``checker <input> <output> <answer>``, the files of the case's
input, what the candidate printed and the jury's answer; it exits 0 (accepted), 1 (wrong
answer), 2 (presentation error: a wrong answer unless the call asks for ``PE``), 3 (the checker
failed: a judge error, never a verdict against the candidate) or 7 (points, ``points X`` first
on its stderr). Any other ending (a signal, its time limit, another code) is a judge error too.
What it printed comes back with the case.

A checker is C++ by default, written against ``testlib.h``: the engine's own header
(``tools/grading/assets/testlib.h``) is put beside it, unless the call gives a ``testlib.h``
of its own in the checker's ``files``. It is any served language otherwise (a Python checker reads
the three paths from ``sys.argv``). It is compiled as any program is, once per engine through the
shared compile cache (``checker_program`` is what the supervisor keys it by), and each case's
check is a fresh run of it in a directory of its own, where the three files are written. That
directory, and the checker, are kept from the candidate by Landlock: the candidate's runs read
only the system, their toolchain and their own directory, and cannot signal or trace a process
outside their own domain (``tools.grading._stdio_judge``).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import os
import re
from dataclasses import dataclass
from typing import Any

from a2e_engine.sandbox._beneath import open_dir, write_beneath
from a2e_engine.sandbox._exits import how_it_ended
from a2e_engine.tools._languages import LANGUAGES, Language
from a2e_engine.tools._steps import Program, Role, RunLimits, StepResult
from a2e_engine.tools._submission import Submission
from a2e_engine.tools.grading._assets import asset
from a2e_engine.tools.grading._judging import (
    ACCEPTED,
    JUDGE_ERROR,
    PARTIAL,
    PRESENTATION,
    WRONG,
    Capture,
    CaseVerdict,
)

__all__ = [
    "CASE_FILES",
    "CHECKER_SECONDS",
    "Checker",
    "CheckerSpec",
    "checker_of",
    "checker_program",
    "compile_failure",
    "jury_memory_mb",
    "jury_submission",
    "message_of",
    "points_of",
    "verdict_of_jury",
]

#: What the checker gets, in its directory: its argv, in this order.
CASE_FILES = ("input.txt", "output.txt", "answer.txt")
#: Wall-clock seconds a check may take: a checker's own bug is a judge error, not a hang.
CHECKER_SECONDS = 10.0
#: The memory a checker or an interactor may hold at the least, whatever the case's limit: it
#: is the jury's, and a program that made it run out (an endless word) would turn its own wrong
#: answer into a judge error.
JURY_MEMORY_MB = 1024
#: What a case's result carries of the checker's message.
MESSAGE_CHARS = 2000
HEADER = "testlib.h"
_POINTS = re.compile(r"\s*points\s+([0-9.eE+-]+)")
#: testlib's exit codes, as the verdicts they stand for.
_VERDICTS = {0: ACCEPTED, 1: WRONG, 2: PRESENTATION, 7: PARTIAL}


@dataclass(frozen=True)
class CheckerSpec:
    language: Language
    source: str
    files: dict[str, str]  # name to base64, as the call gave them
    presentation_error: str  # what exit 2 is: WRONG (the default) or PRESENTATION


def checker_of(value: Any, field: str = "checker") -> CheckerSpec | None:
    """The call's ``checker`` (or ``interactor``: ``field``) checked: an object with
    ``source`` and optionally ``language`` (``cpp``), ``files`` (name to base64) and
    ``presentation_error`` (``WA`` or ``PE``)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"{field} must be an object: {{source, language, files}}")
    unknown = set(value) - {"source", "language", "files", "presentation_error"}
    if unknown:
        raise ValueError(f"{field} has unknown fields: {sorted(unknown)}")
    source, name = value.get("source"), value.get("language", "cpp")
    if not isinstance(source, str) or not source.strip():
        raise ValueError(f"{field}.source must be the {field}'s source text")
    if name not in LANGUAGES:
        raise ValueError(f"{field}.language must be one of {sorted(LANGUAGES)}, not {name!r}")
    files = value.get("files") or {}
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise ValueError(f"{field}.files must be an object of file name to base64 content")
    for path in files:
        if os.path.isabs(path) or os.path.normpath(path).startswith(".."):
            raise ValueError(f"{field}.files: {path!r} must be a name beneath the {field}'s")
        if os.path.normpath(path) in CASE_FILES:
            raise ValueError(f"{field}.files: {path!r} is a name the case's files take")
    pe = value.get("presentation_error", WRONG)
    if pe not in (WRONG, PRESENTATION):
        raise ValueError(f"{field}.presentation_error must be WA or PE, not {pe!r}")
    return CheckerSpec(LANGUAGES[name], source, dict(files), pe)


def checker_program(spec: CheckerSpec) -> tuple[Language, str, dict[str, str]]:
    """What the checker compiles: its language, source and files, with the engine's
    ``testlib.h`` beside a C or C++ checker that has none of its own. The supervisor keys the
    compile cache by this too, so it must be worked out the same way on both sides."""
    files = dict(spec.files)
    if spec.language.name in ("cpp", "c") and HEADER not in files:
        files[HEADER] = _engine_header()
    return spec.language, spec.source, files


@functools.cache
def _engine_header() -> str:
    return base64.b64encode(asset(HEADER)).decode()


class Checker:
    """A checker made ready to run once per case (compiled at most once)."""

    def __init__(
        self, spec: CheckerSpec, workspace: str, plugin_dirs: tuple[str, ...], memory_mb: int
    ) -> None:
        self.spec = spec
        self.limits = RunLimits(CHECKER_SECONDS, jury_memory_mb(memory_mb))
        self.submission = jury_submission(spec, Role.CHECKER, workspace, plugin_dirs)

    def compile(self, seconds: float) -> StepResult | None:
        """The compile step, when it failed (None when it did not, or there is none)."""
        return compile_failure(self.submission, seconds)

    def check(self, given: str, output: str, answer: str) -> tuple[CaseVerdict, dict[str, Any]]:
        """The checker's verdict on one case, and what the case's result says of it
        (``checker_message``, ``points``)."""
        # In the directory it was compiled in, not a copy of it per case: the case's files
        # are written there for this run alone (the program judged cannot read them: its
        # runs are sealed, and what they left is gone before a checker runs).
        where = self.submission.home
        fd = open_dir(where)
        try:
            for name, text in zip(CASE_FILES, (given, output, answer), strict=True):
                write_beneath(fd, name, text.encode("utf-8", "replace"))
            out, err = Capture(MESSAGE_CHARS), Capture(MESSAGE_CHARS)
            run = self.submission.run(where, None, list(CASE_FILES), self.limits, out, err)
        finally:
            for name in CASE_FILES:
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=fd)
            os.close(fd)
        message = message_of(run)
        return self._verdict(run, message), {"checker_message": message, **points_of(run, message)}

    def _verdict(self, run: StepResult, message: str) -> CaseVerdict:
        return verdict_of_jury(run, message, self.spec, "checker")

    def close(self) -> None:
        self.submission.close()


def jury_memory_mb(case_mb: int) -> int:
    """What a checker or an interactor may hold: the case's limit, or ``JURY_MEMORY_MB`` if
    that is more."""
    return max(case_mb, JURY_MEMORY_MB)


def jury_submission(
    spec: CheckerSpec, role: Role, workspace: str, plugin_dirs: tuple[str, ...]
) -> Submission:
    """A checker's or an interactor's program (``role``), made ready to compile and run in a
    process of its own (never a fork of the worker, which holds the answers)."""
    language, source, files = checker_program(spec)
    program = Program(language, source, files, role)
    return Submission(program, workspace, plugin_dirs, fresh_interpreter=True)


def compile_failure(submission: Submission, seconds: float) -> StepResult | None:
    """A checker's or an interactor's compile step when it failed (None when it did not, or
    there is none; for a language without one, a failed parse)."""
    out, err = Capture(MESSAGE_CHARS), Capture(MESSAGE_CHARS)
    compiled = submission.compile(seconds, out, err)
    if compiled is None:
        compiled = submission.check_syntax(seconds, out, err)
    if compiled is not None and compiled["return_code"] != 0:
        return compiled
    return None


def verdict_of_jury(run: StepResult, message: str, spec: CheckerSpec, who: str) -> CaseVerdict:
    """The verdict a checker's or an interactor's run gives (testlib's exit codes), ``who``
    naming it in the reason; any other ending is a judge error."""
    code = run["return_code"] if run["status"] == "Finished" else None
    verdict = _VERDICTS.get(code) if isinstance(code, int) else None
    if verdict is None:
        return CaseVerdict(JUDGE_ERROR, f"the {who} failed: {_ending(run, message)}")
    if verdict == PRESENTATION:
        verdict = spec.presentation_error
    if verdict == PARTIAL and not points_of(run, message):
        return CaseVerdict(JUDGE_ERROR, f"the {who} gave points but said not how many")
    reason = f"the {who} says: {message}" if message else f"the {who} says so"
    return CaseVerdict(verdict, "" if verdict == ACCEPTED else reason)


def message_of(run: StepResult) -> str:
    """What a checker or an interactor said: its stderr (testlib's), else its stdout."""
    return (run["stderr"].strip() or run["stdout"].strip())[:MESSAGE_CHARS]


def points_of(run: StepResult, message: str) -> dict[str, float]:
    """``points`` of a check that exited 7, read from ``points X`` that starts its message."""
    if run["return_code"] != 7:
        return {}
    found = _POINTS.match(message)
    try:
        return {"points": float(found.group(1))} if found else {}
    except ValueError:
        return {}


def _ending(run: StepResult, message: str) -> str:
    status = run["status"]
    if status == "TimeLimitExceeded":
        return f"it ran past its time limit ({run['execution_time']:.2f} s)"
    if status == "MemoryLimitExceeded":
        return "it ran past its memory limit"
    if status != "Finished":
        return f"it could not start: {run['stderr'][:MESSAGE_CHARS]}"
    code = run["return_code"]
    said = f": {message}" if message else ""
    ended = how_it_ended(code) if code < 0 else f"exited {code}" + (", FAIL" if code == 3 else "")
    return ended + said
