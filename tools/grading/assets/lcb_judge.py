"""LiveCodeBench's judge as SandboxFusion runs it (``run_test`` in ``sandbox/datasets/
live_code_bench.py`` at 469de08, adapted there from LiveCodeBench), written anew. This file is
not imported by the engine: it is sent as a file with each submission and runs **inside the
sandbox**, in the candidate's own process, as LiveCodeBench's does.

What it keeps of theirs, because the verdicts depend on it: the module the candidate's code
runs in (the same star imports first, the recursion limit), a stdin program's code wrapped in
``def code()`` (module-level imports left out), ``open``, ``sys.stdin`` and the ``stdin``
bound before the patches read the case's input, every check a case's output goes through
(stripped text; lines; lines without blanks; numbers within ``np.allclose``'s default
tolerance unless all are integers), the per-case ``signal.alarm``, the functions
``reliability_guard`` takes away, and the first failing case ending the judging.

Where theirs passes a program it did not judge, this one does not: the judge's own verdict
file, signed with a nonce the candidate never sees on disk, is what accepts a submission, so a
program that ends the process early (``os._exit(0)``, or ``sys.exit(0)`` outside a stdin
program, which theirs reads as a pass from its exit status) is not accepted. ``os._exit``
during a stdin program ends only that program, as ``sys.exit`` does in theirs. The test cases
and the nonce are deleted before the candidate's code runs (a call-based program could read
the expected outputs from ``test_cases.txt`` in theirs). The verdict is counted and written
with no builtin the candidate may have replaced, to a name holding the nonce. A candidate
that reads the judge's memory, or replaces what its comparisons call, can still forge its
verdict: this is a harness in the candidate's process, as LiveCodeBench's is; ``code_eval`` is
the engine's judge that runs each case apart.

Sent as ``lcb_judge.py`` and run as ``from lcb_judge import main; main(<seconds a case>,
<files>)``, beside the files ``main`` is told of (the test cases, the code, the nonce); writes
the verdict's, prints the first failure's details (their ``metadata``) and exits 0 when every
case passed, else 255. The engine never imports it: it only reads its text.
"""

from __future__ import annotations

import ast
import builtins
import faulthandler
import json
import math
import os
import signal
import sys
import types
from io import StringIO
from typing import Any
from unittest.mock import mock_open, patch

#: Modules the candidate's module has imported before its code, all of their names and then
#: the modules themselves (LiveCodeBench's, in its order).
_STARRED = (
    "string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random",
    "statistics", "itertools", "functools", "operator", "io", "sys", "json", "builtins", "typing",
)  # fmt: skip
PRELUDE = (
    "".join(f"from {name} import *\n" for name in _STARRED)
    + "".join(f"import {name}\n" for name in _STARRED[:-2])
    + "sys.setrecursionlimit(6*10**5)\n"
)

Metadata = dict[str, Any]


class TimeoutException(Exception):  # the name their metadata's ``error`` shows
    pass


def _alarm(signum: int, frame: object) -> None:
    print("alarm went off")
    raise TimeoutException


def _shown(text: str, length: int = 300) -> str:
    assert isinstance(text, str)
    if len(text) <= length:
        return text
    return text[: length // 2] + "...(truncated) ..." + text[-length // 2 :]


def _failure(code: int, message: str, **details: Any) -> Metadata:
    return {**details, "error_code": code, "error_message": message}


def _raised(error: BaseException, shown_in: str, shown_out: str) -> Metadata:
    timed_out = "timeoutexception" in repr(error).lower()
    return {
        "error": repr(error),
        "error_code": -3 if timed_out else -4,
        "error_message": "Time Limit Exceeded" if timed_out else "Runtime Error",
        "inputs": shown_in,
        "expected": shown_out,
    }


def _int_keys(value: Any) -> Any:
    """JSON's string keys read back as integers, where all of them are (theirs does so)."""
    return {int(k): v for k, v in value.items()}


def _as_stdin_program(code: str) -> str:
    """The program's lines in ``def code()``, its top-level imports left at the top, and a last
    ``if __name__ == '__main__':`` opened up first."""
    try:
        tree = ast.parse(code)
        last = tree.body[-1]
        if isinstance(last, ast.If) and ast.unparse(last.test).strip() == "__name__ == '__main__'":
            # a list, as theirs: a Module would quote a leading docstring its own way
            body, main = tree.body[:-1], last.body
            code = ast.unparse(body) + "\n" + ast.unparse(main)  # type: ignore[arg-type]
    except Exception:  # a program that does not parse fails when it runs
        pass
    program, started = "", False
    for line in code.split("\n"):
        imports = line.startswith("from ") or line.startswith("import ")
        if not imports and not started:
            program += "stdin = sys.stdin\nstdout = sys.stdout\ndef code():\n"
            started = True
        program += ("\t" if started or not imports else "") + line + "\n"
    return program


def _load(program: str) -> types.ModuleType:
    module = types.ModuleType("tmp_sol")
    # the candidate's code, in the sandbox, compiled without this file's ``__future__`` flags
    exec(compile(program, "<string>", "exec", dont_inherit=True), module.__dict__)
    return module


def _run_stdin(method: Any, given: str) -> None:
    """``method`` with the case's input behind ``open``, ``sys.stdin`` and the module's
    ``stdin`` (the real stream, whose reading functions are patched first), as theirs."""
    lines = iter(given.split("\n"))
    with (
        patch("sys.stdin.read", lambda *args: given),
        patch("sys.stdin.readlines", lambda *args: given.split("\n")),
        patch("sys.stdin.readline", lambda *args: next(lines)),
        patch("sys.stdin", StringIO(given)),
        patch("builtins.open", mock_open(read_data=given)),
    ):
        try:
            method()
        except _ProgramExit as ended:
            if ended.code not in (0, None):  # theirs: the judge's status, a failure
                raise RuntimeError(f"os._exit({ended.code})") from None
        except SystemExit:
            pass


def _is_int(value: Any) -> bool:
    return isinstance(value, int) or (isinstance(value, str) and value.isdigit())


def _close(a: float, b: float) -> bool:
    """``numpy.isclose`` with its defaults (rtol 1e-5, atol 1e-8): infinities of one sign
    equal, NaN never."""
    if math.isfinite(a) and math.isfinite(b):
        return abs(a - b) <= 1e-8 + 1e-5 * abs(b)
    return a == b


def stdout_matches(printed: str, expected: str) -> bool:
    """Their checks on a stdin program's output, in their order, each a way to pass."""
    got = printed.splitlines()
    if "\n".join(got).strip() == expected.strip():
        return True
    if "\n".join(line.strip() for line in got).strip() == expected.strip():
        return True
    if got == [expected]:
        return True
    wanted = [line.strip() for line in expected.split("\n") if line]
    if got == wanted:
        return True
    got = [line for line in got if line]
    if got == wanted:
        return True
    try:
        if not all(_is_int(a) and _is_int(b) for a, b in zip(got, wanted, strict=False)):
            numbers = [float(a) for a in got], [float(b) for b in wanted]
            return len(numbers[0]) == len(numbers[1]) and all(
                _close(a, b) for a, b in zip(*numbers, strict=True)
            )
    except Exception:  # text that is not numbers fails this check only
        pass
    return False


def returned_matches(got: Any, expected: Any) -> bool:
    """Their checks on a function's return value (which ``==`` may make anything)."""
    if isinstance(got, tuple):
        got = list(got)
    same = got == expected
    if isinstance(expected, list) and expected:
        same = same or (got == expected[0])
    try:
        if isinstance(got[0], tuple):
            same = same or ([list(x) for x in got] == expected[0])
    except Exception:  # not a sequence of tuples
        pass
    return same  # type: ignore[no-any-return]


def judge(tests: dict[str, Any], code: str, timeout: int) -> tuple[list[Any], Metadata]:
    """Each case in turn up to the first that fails: its results and their metadata."""
    cases = json.loads(tests["input_output"])
    name = cases.get("fn_name")
    call_based = name is not None
    if not call_based:
        program, name = PRELUDE + _as_stdin_program(code), "code"
    else:
        program = PRELUDE + code
    signal.alarm(timeout)
    try:
        module = _load(program)
        target: Any = module.Solution() if call_based and "class Solution" in code else module
    except BaseException as error:  # SystemExit too: a program that ends here is not judged
        signal.alarm(0)
        return [-2], _failure(-1, "Compilation Error", error=repr(error))
    signal.alarm(0)
    try:
        method = getattr(target, name)
    except Exception:
        return [-2], _failure(-1, "Unable to extract code", error=repr(sys.exc_info()))
    results: list[Any] = []
    for index, given in enumerate(cases["inputs"]):
        expected = cases["outputs"][index]
        if call_based:
            failure = _judge_call(method, given, expected, timeout, results)
        else:
            failure = _judge_stdin(method, given, expected, timeout, results)
        if failure is not None:
            return results, failure
    return results, {}


def _judge_call(
    method: Any, given: str, raw_expected: str, timeout: int, results: list[Any]
) -> Metadata | None:
    arguments = [json.loads(line) for line in given.split("\n")]
    expected = json.loads(raw_expected)
    width = 300 // (given.count("\n") + 1)
    shown_in = "\n".join(_shown(line, width) for line in given.strip().split("\n"))
    shown_out = _shown(raw_expected, 200)
    try:
        if isinstance(arguments[0], dict):
            arguments = [_int_keys(arguments[0])]
    except Exception:  # keys that are not all integers stay text
        pass
    for unwrap in (lambda e: e, lambda e: e[0]):
        try:
            if isinstance(unwrap(expected), dict):
                expected = [_int_keys(unwrap(expected))]
        except Exception:  # as above
            pass
    signal.alarm(timeout)
    faulthandler.enable()
    try:
        got = method(*arguments)
        shown_got = _shown(json.dumps(got), 200)
        passed = returned_matches(got, expected)
        results.append(passed)
        if passed != True:  # noqa: E712 - theirs: anything but True fails
            return _failure(-2, "Wrong Answer", output=shown_got, expected=shown_out,
                            inputs=shown_in)  # fmt: skip
        signal.alarm(0)
    except (Exception, SystemExit) as error:  # SystemExit: the judge ended before its verdict
        signal.alarm(0)
        faulthandler.disable()
        results.append(-1)
        return _raised(error, shown_in, shown_out)
    faulthandler.disable()
    signal.alarm(0)
    return None


def _judge_stdin(
    method: Any, given: Any, expected: Any, timeout: int, results: list[Any]
) -> Metadata | None:
    shown_in, shown_out = _shown(given), _shown(expected, 200)
    faulthandler.enable()
    if isinstance(given, list):
        given = "\n".join(given)
    if isinstance(expected, list):
        expected = "\n".join(expected)
    signal.alarm(timeout)
    captured, real = StringIO(), sys.stdout
    sys.stdout = captured
    try:
        _run_stdin(method, given)
        signal.alarm(0)
    except Exception as error:
        signal.alarm(0)
        print(f"Call-based runtime error or time limit exceeded error = {error!r}{error}")
        results.append(-1)
        return _raised(error, shown_in, shown_out)
    finally:
        sys.stdout = real
    printed = captured.getvalue()
    passed = stdout_matches(printed, expected)
    results.append(passed)
    if not passed:
        return _failure(-2, "Wrong Answer", output=_shown(printed, 200), expected=shown_out,
                        inputs=shown_in)  # fmt: skip
    return None


class _ProgramExit(SystemExit):
    """``os._exit`` while a program runs: the end of that program, not of the judge."""


def _program_exit(status: int) -> None:
    raise _ProgramExit(status)


def reliability_guard() -> None:
    """What theirs takes away before the candidate's code runs: a program that calls one of
    these fails here as it fails there (``exit()`` at the end of a script is one)."""
    faulthandler.disable()
    builtins.exit = None  # type: ignore[assignment]
    builtins.quit = None  # type: ignore[assignment]
    os.environ["OMP_NUM_THREADS"] = "1"
    taken = (
        "kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "fork",
        "forkpty", "killpg", "rename", "renames", "truncate", "replace", "unlink", "fchmod",
        "fchown", "chmod", "chown", "chroot", "lchflags", "lchmod", "lchown", "getcwd", "chdir",
    )  # fmt: skip
    for name in taken:
        setattr(os, name, None)
    import shutil
    import subprocess

    shutil.rmtree = shutil.move = shutil.chown = None  # type: ignore[assignment]
    subprocess.Popen = None  # type: ignore[assignment, misc]
    builtins.help = None  # type: ignore[assignment]
    for name in ("ipdb", "joblib", "resource", "psutil", "tkinter"):
        sys.modules[name] = None  # type: ignore[assignment]


def main(timeout: int, files: dict[str, str]) -> None:
    """``files`` names the ``nonce``, ``tests`` and ``code`` files and the ``verdict``'s, a
    name with ``{nonce}`` in it: one the candidate cannot know, nor fill first."""
    with open(files["nonce"]) as file:
        nonce = file.read()
    with open(files["tests"]) as file:
        tests = json.load(file)
    with open(files["code"]) as file:
        code = file.read()
    os.unlink(files["nonce"])
    os.unlink(files["tests"])
    verdict_file = files["verdict"].format(nonce=nonce)
    write = open  # the candidate may replace the builtin; the verdict is written with this
    signal.signal(signal.SIGALRM, _alarm)
    try:
        import numpy  # noqa: F401 - theirs imports it before the guard, which breaks its import
    except ImportError:
        pass
    reliability_guard()
    process_exit, os._exit = os._exit, _program_exit  # type: ignore[assignment]
    try:
        results, metadata = judge(tests, code, timeout)
    finally:
        signal.alarm(0)
        os._exit = process_exit  # the interpreter's own ending uses it
    passed = True
    for result in results:  # no builtin the candidate may have replaced (``all``, ``json``)
        if result != True:  # noqa: E712 - theirs: anything but True fails
            passed = False
    with write(verdict_file, "w") as file:
        verdict = "true" if passed else "false"
        file.write(f'{{"nonce": "{nonce}", "passed": {verdict}}}')
    if not passed:
        print(metadata)
    sys.exit(0 if passed else -1)
