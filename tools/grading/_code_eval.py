"""``code_eval``: run a program against its tests the way graders do, and return a verdict.

Judged by its output (any language of ``tools._languages``, ``tools.grading._stdio_judge``):
``language``, ``program`` and ``test_cases`` (``[{"input", "output"}...]``) or APPS/LiveCodeBench's
``input_output``; each case runs in a fresh process and gets ``AC``, ``WA``, ``TLE``, ``MLE``,
``RE`` or ``CE``, compared by a rule of ``tools.grading._judging``. In a language other than Python,
``tests`` are a test program appended to the program and run (MultiPL-E's form: it passes when
it exits 0). With ``by_exit``, in any language, Python too, the program (``tests`` appended, if
given) is run once and passes when it exits 0: how SandboxFusion judges its one-run datasets.
APPS's call-based problems (``input_output`` with ``fn_name``) are Python function tests, one
per case.

A problem with more than one right answer gives a ``checker`` (``tools.grading._checker``: testlib's
convention, the engine's ``testlib.h``), which judges each case's output instead of ``compare``.

A program judged by running it may be limited by CPU time, as contest judges limit it
(``cpu_time_limit``, each case's whole process tree): on a machine busy with other calls a
program is not charged for the time it waited for a core. Its wall-clock limit (``time_limit``,
by default ``WALL_PER_CPU`` times the CPU limit plus ``WALL_SLACK_S``) then only catches a
program that sleeps or waits; a ``TLE`` case says which limit it ran past (``exceeded``).

In Python, function tests, in two shapes, both common in training and benchmark harnesses:

* HumanEval style: ``program`` (prompt + completion), ``tests`` (defining ``check``) and
  ``entry_point``; the harness calls ``check(<entry_point>)``.
* A program plus test code: every ``test_*`` function the tests define is run on its own and
  reported; tests without such functions are one test, ``tests``, that passes if it runs
  through (MBPP-style top-level asserts, or HumanEval's test followed by its own
  ``check(<entry_point>)`` call: such tests must reach an ``assert`` when run).

The verdict is ``passed``, ``failed`` (with the reason) or ``timed out``. It is ``passed`` only
when at least one test ran and every one passed: what the tests define is read from their source
before anything runs (a ``check`` or ``test_*`` function the *program* defines is not a test), and
tests that would run no assert (empty tests, a ``check`` neither called nor given an
``entry_point``, top-level code without an ``assert``) fail with the reason, without running the
program at all.

Why no candidate can forge its verdict: the tests run in the worker, which judges, and the
program in the worker's clean template (``sandbox._template``), a process forked before the call
arrived that holds nothing of the tests; the tests call the program's functions there and get
plain data back (``tools.grading._python_grading``). A candidate that ends, stalls past the
time limit or answers with garbage fails, and the supervisor ends a worker whose tests run past it
(``time_limit_for``). The call runs under the ``process`` profile; the candidate gets no
network, the worker's limits, and may change files only in its own directory (its ``TMPDIR``)
and signal no process outside its own.
"""

from __future__ import annotations

import codecs
import contextlib
import importlib.machinery
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from a2e import _jsonwire as jsonwire
from a2e.caps.tools._plugin import SandboxProfile, ToolContext, ToolExecutionError, ToolPlugin
from a2e.caps.tools._reasons import ENDED_BY_WHAT_RAN, FailureReason
from a2e_engine.sandbox._exits import how_it_ended
from a2e_engine.sandbox._forking import prepare_sibling_forks
from a2e_engine.sandbox._frames import read_frame, write_frame
from a2e_engine.sandbox._paths import under
from a2e_engine.sandbox._run_root import program_writable
from a2e_engine.tools._languages import LANGUAGES, Language
from a2e_engine.tools._output import SPOOL_DIR, CappedText
from a2e_engine.tools._python_main import remember_fresh_interpreter
from a2e_engine.tools._steps import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S, cpu_seconds_of
from a2e_engine.tools._template_cases import ROLE as CASES_ROLE
from a2e_engine.tools._template_cases import TemplateCases, serve_cases
from a2e_engine.tools.grading._call_based import call_based_tests
from a2e_engine.tools.grading._candidate import ROLE as CANDIDATE_ROLE
from a2e_engine.tools.grading._candidate import serve_candidate
from a2e_engine.tools.grading._candidate_process import CandidateProcess
from a2e_engine.tools.grading._checker import checker_of, checker_program
from a2e_engine.tools.grading._comparisons import COMPARISONS, DEFAULT_TOLERANCE
from a2e_engine.tools.grading._judging import cases_from
from a2e_engine.tools.grading._plain_values import decode, encode
from a2e_engine.tools.grading._python_grading import (
    ended_early,
    outcome,
    plan_tests,
    run_tests,
    verdict_of,
)
from a2e_engine.tools.grading._stdio_judge import (
    WALL_PER_CPU,
    WALL_SLACK_S,
    judge_cases,
    judge_options,
    judge_test_program,
    wall_limit_for,
    with_tests,
)

if TYPE_CHECKING:
    from a2e.caps.tools._models import ToolDefinition, ToolResult

__all__ = ["CodeEval"]

DEFAULT_TIME_LIMIT_S = 10.0
MAX_TIME_LIMIT_S = 300.0
MAX_OUTPUT_CHARS = 20_000
#: Past its time limit, what a worker may take to start and to send its report.
SETUP_SLACK_S = 0.5
_WARM_UP_TESTS = "def check(candidate):\n    assert candidate() == 1\n"


class CodeEval(ToolPlugin):
    name = "code_eval"
    sandbox_profile = SandboxProfile.PROCESS
    retry_crashes = False  # a worker that died ran the candidate: that is its verdict
    clean_template = True  # the candidate of function tests runs there, apart from its tests
    #: The engine's shared compile cache and precompiled headers, as ``run_code``'s
    #: (``tools._compile_cache.caches_for``); empty: the session's own cache.
    plugin_dirs: tuple[str, ...] = ()

    def _list_tools(self) -> list[ToolDefinition]:
        from a2e.caps.tools._models import ToolDefinition, ToolParameter

        return [
            ToolDefinition(
                name="code_eval",
                description="Judge a program: by stdin/stdout test cases in any language "
                "(verdict AC, WA, TLE, MLE, RE or CE per case and overall), by a test program "
                "appended to it (other languages: passes on exit 0), or by Python function "
                "tests (HumanEval style: tests defining check, entry_point; or test_* "
                "functions: passed, failed with the reason, or timed out).",
                input_parameters=[
                    ToolParameter(
                        name="program",
                        type="string",
                        description="the program (for HumanEval: prompt + completion)",
                        required=True,
                    ),
                    ToolParameter(
                        name="tests",
                        type="string",
                        description="test code: defines check(candidate), or test_* functions",
                    ),
                    ToolParameter(
                        name="entry_point",
                        type="string",
                        description="the function check() is called with",
                    ),
                    ToolParameter(
                        name="time_limit",
                        type="number",
                        description=f"wall-clock seconds the program and its tests may take, "
                        f"or each test case (default {DEFAULT_TIME_LIMIT_S:g}; with "
                        f"cpu_time_limit, {WALL_PER_CPU} times it + {WALL_SLACK_S:g})",
                    ),
                    ToolParameter(
                        name="cpu_time_limit",
                        type="number",
                        description="CPU seconds each test case may spend, as contest judges "
                        "limit it (all its processes and threads); a program that waits for "
                        "the CPU on a busy machine is not charged for it",
                    ),
                    ToolParameter(
                        name="language",
                        type="string",
                        description="the program's language (default python)",
                        enum=sorted(LANGUAGES),
                    ),
                    ToolParameter(
                        name="test_cases",
                        type="array",
                        description="stdin/stdout cases: [{input, output}...]",
                    ),
                    ToolParameter(
                        name="input_output",
                        type="object",
                        description="APPS/LiveCodeBench cases: {inputs, outputs[, fn_name]}, "
                        "or its JSON text as the datasets store it",
                    ),
                    ToolParameter(
                        name="compare",
                        type="string",
                        description="how outputs are compared (default whitespace)",
                        enum=sorted(COMPARISONS),
                    ),
                    ToolParameter(
                        name="checker",
                        type="object",
                        description="a checker (special judge) for problems with more than one "
                        "right answer: {source, language (cpp), files, presentation_error (WA "
                        "or PE)}, run per case as testlib's checker <input> <output> <answer>; "
                        "C++ gets the engine's testlib.h unless files holds one",
                    ),
                    ToolParameter(
                        name="interactor",
                        type="object",
                        description="for an interactive problem: {source, language (cpp), "
                        "files, presentation_error}, run beside the program per case as "
                        "testlib's interactor <input> <output>, each one's stdout the other's "
                        "stdin; its exit code is the verdict (then the checker's, if given)",
                    ),
                    ToolParameter(
                        name="float_tolerance",
                        type="number",
                        description=f"for compare=float (default {DEFAULT_TOLERANCE:g}); "
                        "EvalPlus's atol for compare=evalplus (default 0)",
                    ),
                    ToolParameter(
                        name="by_exit",
                        type="boolean",
                        description="judge the program, in any language, by its own exit, run "
                        "once: passed when it exits 0 in time (SandboxFusion's one run; tests, "
                        "if given, appended to it); forgeable, as its tests run in its process",
                    ),
                    ToolParameter(
                        name="stop_at_first_failure",
                        type="boolean",
                        description="skip the cases after the first that fails",
                    ),
                    ToolParameter(
                        name="output_chars",
                        type="integer",
                        description="what every case's result keeps of its stdout and of its "
                        "stderr, passing or not, with its run's status: past it, its two ends "
                        "(default: a failing case's first 2000 characters)",
                    ),
                    ToolParameter(
                        name="memory_mb",
                        type="integer",
                        description="resident memory each case may hold, in MiB "
                        f"(default {DEFAULT_MEMORY_MB})",
                    ),
                    ToolParameter(
                        name="compile_timeout",
                        type="number",
                        description=f"seconds for the compile step (default {DEFAULT_TIMEOUT_S:g})",
                    ),
                ],
                output_parameters=[
                    ToolParameter(name="verdict", type="string", description="the verdict"),
                    ToolParameter(name="passed", type="boolean", description="verdict == passed"),
                    ToolParameter(name="reason", type="string", description="why not passed"),
                    ToolParameter(name="tests", type="array", description="per-test results"),
                    ToolParameter(
                        name="forgeable",
                        type="boolean",
                        description="whether the program could have forged the verdict: true "
                        "for a test program appended to it (its tests run in its process)",
                    ),
                ],
                idempotent=True,
                tags=["code", "python", "grading", "judge"],
                toolkit="code",
            )
        ]

    def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        template = self.context.template if self.context is not None else None
        try:
            return self._judged(arguments)
        finally:
            if template is not None:  # whatever used it is done with it
                template.close()

    def _judged(self, arguments: dict[str, Any]) -> dict[str, Any]:
        time_limit = _time_limit(arguments)
        if not 0 < time_limit <= MAX_TIME_LIMIT_S:
            raise ValueError(f"time_limit must be in (0, {MAX_TIME_LIMIT_S:g}] seconds")
        if arguments.get("by_exit") is True:
            for given in ("test_cases", "input_output", "checker", "interactor", "entry_point"):
                if arguments.get(given) is not None:
                    raise ValueError(f"by_exit judges the program by its exit alone: no {given}")
        if _judged_by_function_tests(arguments):
            for jury in ("checker", "interactor"):
                if arguments.get(jury) is not None:
                    raise ValueError(f"a {jury} judges test cases: give test_cases")
            if arguments.get("cpu_time_limit") is not None:
                raise ValueError(
                    "cpu_time_limit applies to programs judged by test cases or a test program; "
                    "Python function tests have time_limit, in wall-clock seconds"
                )
            tests, entry_point = _tests_and_entry_point(arguments)
            spec = {"program": arguments["program"], "tests": tests, "entry_point": entry_point}
            return {**self._function_tests(spec, time_limit), "forgeable": False}
        language = LANGUAGES[str(arguments.get("language") or "python")]
        return self._judge(language, arguments, time_limit, arguments.get("input_output"))

    def _judge(
        self, language: Language, arguments: dict[str, Any], time_limit: float, given: Any
    ) -> dict[str, Any]:
        """By running the program: per stdin/stdout case, or with its test program appended."""
        missing = language.missing()
        if missing:
            raise ValueError(missing)
        cpu_time_limit = _cpu_time_limit(arguments)
        if cpu_time_limit is not None and arguments.get("time_limit") is None:
            time_limit = wall_limit_for(cpu_time_limit)
        options = judge_options(arguments, time_limit, cpu_time_limit)
        workspace = self.context.workspace if self.context else os.getcwd()
        program = str(arguments["program"])
        by_cases = arguments.get("test_cases") is not None or given is not None
        forks = self._case_forks(language.warm)
        if not by_cases:
            tests = str(arguments.get("tests") or "")
            if not tests.strip() and arguments.get("by_exit") is not True:
                raise ValueError(
                    "give test_cases, input_output or tests to judge the program by, or by_exit"
                )
            for jury in ("checker", "interactor"):
                if getattr(options, jury) is not None:
                    raise ValueError(f"a {jury} judges test cases: give test_cases")
            # The tests run in the program's own process (MultiPL-E's form): it can end them,
            # or change them, in its favour.
            judged = judge_test_program(
                language, program, tests, options, workspace, self.plugin_dirs, forks
            )
            return {**judged, "forgeable": True}
        judged_otherwise = options.checker is not None or options.interactor is not None
        if judged_otherwise and arguments.get("compare") is not None:
            raise ValueError(
                "give a checker or an interactor, or compare, not both: they judge the outputs"
            )
        cases = cases_from(arguments.get("test_cases"), given)
        read_roots = self.context.read_roots if self.context else ()
        judged = judge_cases(
            language, program, cases, options, workspace, self.plugin_dirs, read_roots, forks
        )
        return {**judged, "forgeable": False}

    def _function_tests(self, spec: dict[str, Any], time_limit: float) -> dict[str, Any]:
        """Python function tests: the tests here, the program in a process of its own (under
        the engine the worker's clean template, which holds nothing of the tests; called
        directly, a fork of this process), ``tools.grading._python_grading``."""
        plan = plan_tests(str(spec["tests"] or ""), str(spec["entry_point"] or ""))
        if plan.refusal:
            return {
                **outcome("failed", plan.refusal, []),
                "duration_ms": 0,
                "stdout": "",
                "stderr": "",
            }
        workdir = self._workdir()
        # The candidate changes files only in its own directory, where long output is saved,
        # and its run layer: not the rest of the session's workspace (beneath /tmp), where
        # run_code's compile cache lives.
        writable = (workdir, self._spool_dir(), *program_writable())
        started = time.monotonic()
        candidate = self._candidate(started + time_limit)
        try:
            with _JudgeOutput(self.context) as judge_output:
                if self.context is not None:
                    _enter_beside(workdir, writable)
                result = run_tests(spec, plan, candidate, workdir, writable, time_limit)
            result["duration_ms"] = int((time.monotonic() - started) * 1000)
            for name, file in (("stdout", "out"), ("stderr", "err")):
                kept = self._capped(name, os.path.join(workdir, file), judge_output.get(name))
                result[name] = kept.value()
                result.update(kept.report())
                if kept.truncated:
                    result["truncated"] = True
            return result
        finally:
            candidate.finish()
            if self.context is None:
                # Under the engine the call's tmp dir goes with the call (the worker's own
                # tmpfs, or a directory the supervisor removes); called directly, nothing would.
                shutil.rmtree(workdir, ignore_errors=True)

    def _candidate(self, deadline: float) -> CandidateProcess:
        """The candidate's process: the worker's clean template under the engine."""
        if self.context is None:
            return CandidateProcess.forked(deadline)
        template = self.context.template
        if template is None:
            raise ToolExecutionError(
                "code_eval could not start a process for the program apart from its tests "
                "(the worker had no clean template)",
                retryable=True,
            )
        write_frame(template.channel, CANDIDATE_ROLE)
        channel = template.channel
        return CandidateProcess(template.pid, channel, channel, template.close, deadline)

    def _case_forks(self, wanted: bool) -> TemplateCases | None:
        """The clean template as what a Python program's runs (each case, or its one run with
        its tests) are forked from, when ``wanted`` and there is one: smaller and quieter than
        the worker, which has read the call; one not wanted is ended now, before a sweep
        between two cases would wait for it, or count it as theirs."""
        template = self.context.template if self.context is not None else None
        if template is None:
            return None
        if wanted and TemplateCases.possible():
            return TemplateCases(template)
        template.close()
        return None

    def template_main(self, channel: int) -> None:
        """In the clean template: the candidate's side of function tests, or the forks of a
        Python program's cases, as the worker's first frame says."""
        try:
            role = read_frame(channel, 1024)
        except (EOFError, OSError, ValueError):
            return
        if role == CASES_ROLE:
            serve_cases(channel)
        elif role == CANDIDATE_ROLE:
            serve_candidate(channel, channel)

    def _workdir(self) -> str:
        """A directory of the candidate's own, not the call's /tmp: the workspace is mounted
        beneath that. Under the engine the call's tmp dir is new and the name is known, so no
        random name (whose generator every fresh worker would seed again) is needed."""
        if self.context is None:
            return tempfile.mkdtemp(prefix="code_eval-")
        workdir = os.path.join(self.context.tmp_dir, "code_eval")
        os.mkdir(workdir, 0o700)
        return workdir

    def preload(self) -> None:
        """Run the function-test path's own machinery once here, in the zygote.

        Parsing the tests (``ast``), compiling, encoding and decoding values and decoding the
        output each set themselves up lazily on first use; done here, every worker (and its
        template) is forked with them ready instead of paying for them (and their
        copy-on-write faults) per call.
        """
        plan_tests(_WARM_UP_TESTS, "f")
        compile(_WARM_UP_TESTS, "<tests>", "exec", dont_inherit=True)
        sample = [1, 2.5, "x", None, True, (1,), {"k": {1, 2}}, b"x", float("nan")]
        decode(jsonwire.loads(jsonwire.dumps({"value": encode(sample)}))["value"])
        verdict_of(None, [{"name": "check", "passed": True}])
        # Programs judged on their output run as a fork of this interpreter (tools._python_main),
        # and their cases as forks of the worker's template (tools._template_cases).
        remember_fresh_interpreter()
        prepare_sibling_forks()
        codecs.getincrementaldecoder("utf-8")(errors="replace").decode(b"ok", final=True)

    # -- in the supervisor --

    def time_limit_for(self, tool_name: str, arguments: dict[str, Any]) -> float | None:
        if not _judged_by_function_tests(arguments):
            return None  # the worker times each run of a program itself
        return _time_limit(arguments) + SETUP_SLACK_S

    def accept_result(
        self,
        tool_name: str,
        arguments: dict[str, Any],
        secrets_given: dict[str, str],
        result: ToolResult,
    ) -> ToolResult:
        """Function tests' verdict when the worker, their judge, did not give one: past the
        time limit it timed out; ended by what ran in it (the call's memory, say), it failed."""
        if result.success or not _judged_by_function_tests(arguments):
            return result
        if result.reason == FailureReason.TIMEOUT:
            verdict = outcome(
                "timed out", f"did not finish within {_time_limit(arguments):g} s", []
            )
        elif result.reason in ENDED_BY_WHAT_RAN:
            # The exit code is the negated signal number when a signal ended the worker; one
            # that exited cleanly without crashing sent its own failure (a MemoryError).
            code = result.exit_code
            said = code == 0 and result.reason != FailureReason.WORKER_CRASHED
            how = f"failed ({result.error})" if said or code is None else how_it_ended(code)
            verdict = ended_early(how)
        else:
            return result  # cancelled, or the sandbox could not run it: not a verdict
        data = {
            **verdict,
            "duration_ms": result.duration_ms,
            "stdout": "",
            "stderr": "",
            "forgeable": False,
        }
        return result.model_copy(
            update={
                "success": True,
                "data": data,
                "error": None,
                "error_code": None,
                "reason": None,
            }
        )

    def _spool_dir(self) -> str:
        """Where output past the cap is saved (made now: a Landlock rule needs it to exist)."""
        path = os.path.join(self.context.workspace if self.context else ".", SPOOL_DIR)
        if self.context is not None:  # called directly, only output past the cap makes it
            with contextlib.suppress(OSError):
                os.makedirs(path, exist_ok=True)
        return path

    def _capped(self, name: str, path: str, more: str = "") -> CappedText:
        """What the program printed (the file at ``path``), then what the tests printed
        (``more``), capped like every tool's output (``tools._output``)."""
        context = self.context
        kept = CappedText(
            name,
            cap=MAX_OUTPUT_CHARS,
            spool_dir=self._spool_dir(),
            prefix=context.call_id if context else "",
        )
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        try:
            with open(path, "rb") as fh:
                while chunk := fh.read(65536):
                    kept.add(decoder.decode(chunk))
        except OSError:
            pass
        kept.add(decoder.decode(b"", final=True))
        if more:
            kept.add(more)
        return kept


def _enter_beside(workdir: str, writable: tuple[str, ...]) -> None:
    """The tests run where the program does: ``workdir`` their working and temporary
    directory too (what they compare the program's paths or files with). Nothing they import
    may come from there, nor from anywhere else the program may write (its run layer's
    ``/tmp``): a module of the program's, imported by the judge, would run its code there.
    Under the engine only: called directly, this is the caller's process."""
    sys.path[:] = [entry for entry in sys.path if _importable_from(entry, writable)]
    os.chdir(workdir)
    os.environ["TMPDIR"] = tempfile.tempdir = workdir


def _importable_from(entry: str, writable: tuple[str, ...]) -> bool:
    """Whether the judge may import from this entry of ``sys.path``: a directory the program
    cannot write (absolute, beneath none of ``writable`` or mounted read-only there: the run
    layer's ``/root`` is writable, the Python installation bound in it is not), or what a
    path hook other than the file system's serves (an editable install's finder); never the
    working directory (``""``, relative)."""
    if os.path.isabs(entry):
        if not any(under(os.path.normpath(entry), place) for place in writable):
            return True
        try:  # beneath a place the program writes: only where that is mounted read-only
            return bool(os.statvfs(entry).f_flag & os.ST_RDONLY)
        except OSError:
            return False
    finder = sys.path_importer_cache.get(entry)
    return finder is not None and not isinstance(finder, importlib.machinery.FileFinder)


class _JudgeOutput:
    """What the tests print, where the candidate cannot read it: under the engine the
    worker's stdout and stderr go to files of no name while they run (``get`` reads them
    back); called directly, they stay the caller's (``get`` is empty)."""

    def __init__(self, context: ToolContext | None) -> None:
        self.enabled = context is not None
        self.tmp_dir = context.tmp_dir if context is not None else ""
        self.files: dict[str, int] = {}
        self.saved: dict[int, int] = {}
        self.text: dict[str, str] = {}

    def __enter__(self) -> _JudgeOutput:
        if self.enabled:
            for fd, name in ((1, "stdout"), (2, "stderr")):
                self.files[name] = os.open(self.tmp_dir, os.O_TMPFILE | os.O_RDWR, 0o600)
                self.saved[fd] = os.dup(fd)
                os.dup2(self.files[name], fd)
        return self

    def __exit__(self, *exc: object) -> None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        for fd, saved in self.saved.items():
            os.dup2(saved, fd)
            os.close(saved)
        for name, file in self.files.items():
            with contextlib.suppress(OSError):
                os.lseek(file, 0, os.SEEK_SET)
                self.text[name] = os.read(file, MAX_OUTPUT_CHARS * 4).decode("utf-8", "replace")
            os.close(file)

    def get(self, name: str) -> str:
        return self.text.get(name, "")


def _time_limit(arguments: dict[str, Any]) -> float:
    value = arguments.get("time_limit")
    return float(value) if isinstance(value, int | float) and value else DEFAULT_TIME_LIMIT_S


def _cpu_time_limit(arguments: dict[str, Any]) -> float | None:
    limit = cpu_seconds_of(arguments.get("cpu_time_limit"))
    if limit is not None and limit > MAX_TIME_LIMIT_S:
        raise ValueError(f"cpu_time_limit must be in (0, {MAX_TIME_LIMIT_S:g}] seconds")
    return limit


def _tests_and_entry_point(arguments: dict[str, Any]) -> tuple[str, str]:
    """A function-test call's tests and entry point, as the worker runs them."""
    given = arguments.get("input_output")
    if isinstance(given, dict) and given.get("fn_name"):
        return call_based_tests(given), ""
    return str(arguments.get("tests") or ""), str(arguments.get("entry_point") or "")


def compiled_sources(arguments: Mapping[str, Any]) -> list[tuple[str, str, dict[str, str]]]:
    """The language, source and files of each program a call compiles, as ``_judge`` compiles
    them (the program judged first, then its checker and its interactor): what the engine's
    shared compile cache works each key out from (``engine._compile_store``, in the
    supervisor); none for Python's function tests, which compile nothing."""
    program = arguments.get("program")
    if _judged_by_function_tests(arguments) or not isinstance(program, str):
        return []
    language = str(arguments.get("language") or "python")
    if arguments.get("test_cases") is None and arguments.get("input_output") is None:
        return [(language, with_tests(program, str(arguments.get("tests") or "")), {})]
    sources: list[tuple[str, str, dict[str, str]]] = [(language, program, {})]
    for jury in ("checker", "interactor"):
        try:
            spec = checker_of(arguments.get(jury), jury)
        except ValueError:  # the worker refuses it: nothing of it is compiled
            spec = None
        if spec is not None:
            jury_language, source, files = checker_program(spec)
            sources.append((jury_language.name, source, files))
    return sources


def _judged_by_function_tests(arguments: Mapping[str, Any]) -> bool:
    """Whether a call is judged by Python function tests: what ``_execute_tool`` judges apart
    from the program, in the clean template, and what the supervisor's hooks time and turn
    into a verdict, decided in this one place."""
    language = str(arguments.get("language") or "python")
    given = arguments.get("input_output")
    if language != "python" or arguments.get("by_exit") is True:
        return False
    if isinstance(given, dict) and given.get("fn_name"):
        return True
    return arguments.get("test_cases") is None and given is None
