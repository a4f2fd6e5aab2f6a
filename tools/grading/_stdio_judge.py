"""Judging a submission in any language by running it: once per stdin/stdout test case, or once
with its test program appended (MultiPL-E's form: pass is exit 0). ``code_eval`` calls these.

Each case runs in a fresh process in a fresh directory (``tools._submission``), compiled once for
all of them. The expected outputs never leave this process: the program gets its input on a
pipe and nothing else; it runs as a child of a worker that is not dumpable and under a seccomp
filter that refuses ``ptrace`` and ``process_vm_readv``, so it cannot read them from memory,
and they are never written to a file. A Python program therefore never runs in a fork of this
one (``tools._python_main``), whose memory holds them all: under the engine each case is a
fork of the worker's clean template, which holds none (``tools._template_cases``), and
without one an interpreter of its own. What it prints is kept whole up to the expected
output's size plus ``OUTPUT_SLACK_CHARS`` for the comparison (``tools.grading._judging``).
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from typing import Any

from a2e_engine.sandbox._landlock import abi_version
from a2e_engine.sandbox._run_domain import sweep
from a2e_engine.tools._languages import Language
from a2e_engine.tools._steps import (
    Program,
    Role,
    RunLimits,
    StepResult,
    memory_mb_of,
    seconds_of,
)
from a2e_engine.tools._submission import Submission
from a2e_engine.tools._template_cases import TemplateCases
from a2e_engine.tools.grading._checker import Checker, CheckerSpec, checker_of
from a2e_engine.tools.grading._comparisons import COMPARISONS, default_tolerance
from a2e_engine.tools.grading._interaction import Interactor
from a2e_engine.tools.grading._judging import (
    ACCEPTED,
    COMPILE,
    JUDGE_ERROR,
    OUTPUT_SLACK_CHARS,
    WRONG,
    Capture,
    CaseVerdict,
    JudgeCase,
    verdict_of_exit,
    verdict_of_run,
)

__all__ = [
    "WALL_PER_CPU",
    "WALL_SLACK_S",
    "JudgeOptions",
    "judge_cases",
    "judge_options",
    "judge_test_program",
    "wall_limit_for",
    "with_tests",
]

#: What a failing case's result carries of its stderr (and, when wrong, of its stdout).
SHOWN_CHARS = 2000
#: Under a CPU-time limit, the wall-clock limit when none is given: ``WALL_PER_CPU`` times it
#: plus ``WALL_SLACK_S``. It only catches a program that sleeps or waits: one that computes is
#: stopped by its CPU time first, unless it gets less than a third of a core.
WALL_PER_CPU = 3
WALL_SLACK_S = 1.0


#: What ``output_chars`` may ask each case to keep of each stream. The whole result still
#: travels in one frame (``sandbox._frames``): a call whose cases keep more than that fails
#: with ``output_limit``, so a caller sizes it by its cases (``/submit`` keeps 64 KiB at most).
MAX_OUTPUT_CHARS = 1 << 20

#: With a checker, what a case's output may be: a right answer need not be as long as the
#: jury's.
CHECKED_OUTPUT_CHARS = 16 << 20


@dataclass(frozen=True)
class JudgeOptions:
    limits: RunLimits  # per case
    compile_seconds: float
    compare: str
    tolerance: float
    stop_at_first_failure: bool
    checker: CheckerSpec | None = None  # judges each case's output instead of ``compare``
    interactor: CheckerSpec | None = None  # talks to the program: an interactive problem
    #: What every case's result keeps of its stdout and stderr, passing or not, with the
    #: run's status (``/submit`` reports each case's run as ``/run_code`` would); None: a
    #: failing case's first ``SHOWN_CHARS``.
    output_chars: int | None = None


def judge_options(
    arguments: dict[str, Any], seconds: float, cpu_seconds: float | None = None
) -> JudgeOptions:
    """The judging arguments of a ``code_eval`` call, checked. ``seconds`` is the wall-clock
    limit of each run; given ``cpu_seconds``, runs are limited by CPU time too."""
    compare = str(arguments.get("compare") or "whitespace")
    if compare not in COMPARISONS:
        raise ValueError(f"compare must be one of {sorted(COMPARISONS)}, not {compare!r}")
    tolerance = arguments.get("float_tolerance", default_tolerance(compare))
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or tolerance < 0:
        raise ValueError(f"float_tolerance must be a number >= 0, got {tolerance!r}")
    return JudgeOptions(
        RunLimits(seconds, memory_mb_of(arguments.get("memory_mb")), cpu_seconds),
        seconds_of(arguments.get("compile_timeout"), "compile_timeout"),
        compare,
        float(tolerance),
        bool(arguments.get("stop_at_first_failure")),
        checker_of(arguments.get("checker")),
        checker_of(arguments.get("interactor"), "interactor"),
        _output_chars(arguments.get("output_chars")),
    )


def _output_chars(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_OUTPUT_CHARS:
        most = MAX_OUTPUT_CHARS
        raise ValueError(f"output_chars must be an integer from 1 to {most}, got {value!r}")
    return value


def wall_limit_for(cpu_seconds: float) -> float:
    """The wall-clock limit of a run limited to ``cpu_seconds`` of CPU time, when none is given."""
    return WALL_PER_CPU * cpu_seconds + WALL_SLACK_S


def judge_cases(
    language: Language,
    program: str,
    cases: list[JudgeCase],
    options: JudgeOptions,
    workspace: str,
    plugin_dirs: tuple[str, ...] = (),
    read_roots: tuple[str, ...] = (),
    template: TemplateCases | None = None,
) -> dict[str, Any]:
    """``plugin_dirs``: the engine's shared compile cache, as ``Submission`` takes it;
    ``read_roots``: what the engine lets calls read besides the system; ``template``: the
    worker's clean template, which a Python program's cases are forks of.

    With a checker or an interactor, the candidate is compiled before either is written
    anywhere, and its runs are sealed (``Role.SEALED_CASE``): they read nothing of the
    workspace but their own directory, so neither the jury's programs nor a case's files for
    them, and cannot signal them."""
    started = time.monotonic()
    sealed = options.checker is not None or options.interactor is not None
    if sealed and abi_version() == 0:
        raise ValueError(
            "a checker or an interactor needs Landlock, which this host lacks: without it the "
            "program judged could read them and the answers"
        )
    # Never a fork of this worker: it holds every case's expected output, and a fork would
    # too (``sys._getframe`` reaches the case being judged; its memory holds them all).
    judged = Program(language, program, {}, Role.SEALED_CASE if sealed else Role.CASE)
    submission = Submission(judged, workspace, plugin_dirs, read_roots, template)
    jury = Jury()
    try:
        compiled = _compile(submission, options)
        if compiled is not None and compiled["return_code"] != 0:
            return _compile_error(compiled, len(cases), started)
        memory_mb = options.limits.memory_mb
        if options.interactor is not None:
            jury.interactor = Interactor(options.interactor, workspace, plugin_dirs, memory_mb)
            failed = jury.interactor.compile(options.compile_seconds)
            if failed is not None:
                return _jury_error("interactor", failed, len(cases), compiled, started)
        if options.checker is not None:
            jury.checker = Checker(options.checker, workspace, plugin_dirs, memory_mb)
            failed = jury.checker.compile(options.compile_seconds)
            if failed is not None:
                return _jury_error("checker", failed, len(cases), compiled, started)
        results: list[dict[str, Any]] = []
        for number, case in enumerate(cases, 1):
            if options.stop_at_first_failure and results and not results[-1]["passed"]:
                results.append({"name": f"case {number}", "verdict": "skipped", "passed": False})
                continue
            results.append(_judge_case(submission, number, case, options, jury))
        return _overall(results, compiled, started)
    finally:
        submission.close()
        jury.close()


@dataclass
class Jury:
    """What judges a problem's cases besides its expected outputs, when it has them."""

    checker: Checker | None = None
    interactor: Interactor | None = None

    def close(self) -> None:
        for program in (self.checker, self.interactor):
            if program is not None:
                program.close()


def judge_test_program(
    language: Language,
    program: str,
    tests: str,
    options: JudgeOptions,
    workspace: str,
    plugin_dirs: tuple[str, ...] = (),
    template: TemplateCases | None = None,
) -> dict[str, Any]:
    """The program with its tests appended (none: the program alone), run once: accepted when
    it exits 0 in time."""
    started = time.monotonic()
    source = with_tests(program, tests)
    tested = Program(language, source, {}, Role.TESTS)
    submission = Submission(tested, workspace, plugin_dirs, template=template)
    try:
        compiled = _compile(submission, options)
        if compiled is not None and compiled["return_code"] != 0:
            return _compile_error(compiled, 1, started)
        shown = options.output_chars or 0
        out = Capture(max(OUTPUT_SLACK_CHARS, shown), tail=shown // 2)
        err = Capture(max(OUTPUT_SLACK_CHARS, shown), tail=shown // 2)
        where = submission.fresh_directory()
        try:
            run = submission.run(where, None, [], options.limits, out, err)
        finally:
            shutil.rmtree(where, ignore_errors=True)
        verdict = verdict_of_exit(run)  # a test program says how it went by its exit
        case = _case_result("tests", verdict, run, out, err, options)
        return _overall([case], compiled, started)
    finally:
        submission.close()


def with_tests(program: str, tests: str) -> str:
    """What a program judged by its test program compiles and runs: the tests after it (the
    program as it is when it has none)."""
    return program + "\n" + tests + "\n" if tests else program


def _compile(submission: Submission, options: JudgeOptions) -> StepResult | None:
    """The compile step, or for a language without one, a failed parse (as graders judge a
    program that does not parse: a compile error before any case runs)."""
    seconds = options.compile_seconds
    compiled = submission.compile(seconds, Capture(OUTPUT_SLACK_CHARS), Capture(OUTPUT_SLACK_CHARS))
    if compiled is None:
        return submission.check_syntax(
            seconds, Capture(OUTPUT_SLACK_CHARS), Capture(OUTPUT_SLACK_CHARS)
        )
    return compiled


def _judge_case(
    submission: Submission, number: int, case: JudgeCase, options: JudgeOptions, jury: Jury
) -> dict[str, Any]:
    if jury.interactor is not None:
        return _interactive_case(submission, number, case, options, jury.interactor, jury.checker)
    checker = jury.checker
    cap = CHECKED_OUTPUT_CHARS if checker is not None else len(case.output)
    shown = options.output_chars or 0
    out = Capture(max(cap + OUTPUT_SLACK_CHARS, shown), tail=shown // 2)
    err = Capture(max(OUTPUT_SLACK_CHARS, shown), tail=shown // 2)
    where = submission.fresh_directory()
    try:
        run = submission.run(where, case.input, [], options.limits, out, err)
    finally:
        # What the run left: before its files go, and before anything else runs.
        sweep(submission.steps.spared())
        shutil.rmtree(where, ignore_errors=True)
    checked: dict[str, Any] = {}
    if checker is None:
        verdict = verdict_of_run(run, out, case.output, options.compare, options.tolerance)
    else:
        verdict = verdict_of_exit(run)
        if verdict.verdict == ACCEPTED and out.overflowed:
            verdict = CaseVerdict(WRONG, f"printed more than {out.limit} characters")
        elif verdict.verdict == ACCEPTED:
            verdict, checked = checker.check(case.input, out.getvalue(), case.output)
    return {**_case_result(f"case {number}", verdict, run, out, err, options), **checked}


def _case_result(
    name: str,
    verdict: CaseVerdict,
    run: StepResult,
    out: Capture,
    err: Capture,
    options: JudgeOptions | None = None,
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "name": name,
        "verdict": verdict.verdict,
        "passed": verdict.verdict == ACCEPTED,
        "time": run["execution_time"],
        "cpu_time": run["cpu_time"],
        "peak_memory_kb": run["peak_memory_kb"],
        "return_code": run["return_code"],
    }
    if "exceeded" in run:
        result["exceeded"] = run["exceeded"]
    if verdict.verdict != ACCEPTED:
        result["reason"] = verdict.reason
    shown = options.output_chars if options is not None else None
    if shown is not None:
        result["status"] = run["status"]
        result["stdout"] = out.ends(shown)
        result["stderr"] = err.ends(shown)
    elif verdict.verdict != ACCEPTED:
        result["stderr"] = err.getvalue()[:SHOWN_CHARS]
        result["stdout"] = out.getvalue()[:SHOWN_CHARS]
    return result


def _compile_error(compiled: StepResult, count: int, started: float) -> dict[str, Any]:
    message = (compiled["stderr"] or compiled["stdout"])[:SHOWN_CHARS]
    reason = "compile error" + (f": {message}" if message else "")
    if compiled["status"] == "TimeLimitExceeded":
        reason = "compile error: the compiler did not finish in time"
    return {
        "verdict": COMPILE,
        "passed": False,
        "reason": reason,
        "compile": compiled,
        "tests": [],
        "summary": {COMPILE: count},
        "duration_ms": int((time.monotonic() - started) * 1000),
    }


def _interactive_case(
    submission: Submission,
    number: int,
    case: JudgeCase,
    options: JudgeOptions,
    interactor: Interactor,
    checker: Checker | None,
) -> dict[str, Any]:
    """One case of an interactive problem: the talk, the interactor's verdict, and then the
    checker's on what the interactor wrote, when there is one."""
    talk = interactor.talk(submission, case.input, options.limits)
    verdict, said = interactor.verdict(talk, options.limits.cpu_seconds is not None)
    if verdict.verdict == ACCEPTED and checker is not None:
        verdict, checked = checker.check(case.input, talk.written, case.output)
        said.update(checked)
    out, err = Capture(SHOWN_CHARS), Capture(SHOWN_CHARS)
    err.write(talk.program["stderr"])
    return {**_case_result(f"case {number}", verdict, talk.program, out, err, options), **said}


def _jury_error(
    who: str, failed: StepResult, count: int, compiled: StepResult | None, started: float
) -> dict[str, Any]:
    """The call's verdict when its checker or interactor does not compile: a judge error, no
    case run."""
    message = (failed["stderr"] or failed["stdout"])[:SHOWN_CHARS]
    return {
        "verdict": JUDGE_ERROR,
        "passed": False,
        "reason": f"the {who} does not compile" + (f": {message}" if message else ""),
        "compile": compiled,
        f"{who}_compile": failed,
        "tests": [],
        "summary": {JUDGE_ERROR: count},
        "duration_ms": int((time.monotonic() - started) * 1000),
    }


def _overall(
    results: list[dict[str, Any]], compiled: StepResult | None, started: float
) -> dict[str, Any]:
    failing = next((r for r in results if not r["passed"]), None)
    summary: dict[str, int] = {}
    for result in results:
        summary[result["verdict"]] = summary.get(result["verdict"], 0) + 1
    return {
        "verdict": failing["verdict"] if failing else ACCEPTED,
        "passed": failing is None,
        "reason": f"{failing['name']}: {failing['reason']}" if failing else None,
        "compile": compiled,
        "tests": results,
        "summary": summary,
        "duration_ms": int((time.monotonic() - started) * 1000),
    }
