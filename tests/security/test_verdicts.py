"""Verdicts a candidate did not earn: each forgery a policy under RL could find, with the honest
programs beside it (a right one passes, a wrong one fails), through ``code_eval``.

Python function tests run in the worker, which judges, and the program in its clean template,
a process forked before the call arrived: the program's values come back as plain data and the
judge compares them (``tools.grading._python_grading``). Every forgery here passed when the program and
its tests shared one interpreter.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.security.harness import Attacker, attack
from tests.service_process import served_client

JUDGE = "the tests run in the judge's process; the program's values reach it as plain data"

CHECK = "def check(candidate):\n    assert candidate(2) == 3\n    assert candidate(-1) == 0\n"
RIGHT = "def inc(x):\n    return x + 1\n"
WRONG = "def inc(x):\n    return 0\n"


def verdict(attacker: Attacker, **arguments: Any) -> dict[str, Any]:
    result = attacker.attack(tool="code_eval", timeout=30, time_limit=10, **arguments)
    assert result.success, result.error
    return dict(result.data)


def check_form(attacker: Attacker, program: str) -> dict[str, Any]:
    return verdict(attacker, program=program, tests=CHECK, entry_point="inc")


#: APPS's call-based form: ``fn_name`` and the arguments and results as JSON.
CALL_BASED = {"fn_name": "inc", "inputs": [[2], [-1], [41]], "outputs": [3, 0, 42]}


def call_based(attacker: Attacker, program: str) -> dict[str, Any]:
    return verdict(attacker, program=program, input_output=CALL_BASED)


def test_honest_programs_get_their_verdicts(attacker: Attacker) -> None:
    assert check_form(attacker, RIGHT)["verdict"] == "passed"
    assert check_form(attacker, WRONG)["verdict"] == "failed"
    assert call_based(attacker, RIGHT)["verdict"] == "passed"
    assert call_based(attacker, WRONG)["verdict"] == "failed"
    solution = "class Solution:\n    def inc(self, x):\n        return x + 1\n"
    assert call_based(attacker, solution)["verdict"] == "passed"


@attack("1a. replace the tests' comparison (call-based)", full=JUDGE, reduced=JUDGE)
def test_replacing_the_comparison(attacker: Attacker) -> None:
    program = "def inc(x):\n    globals()['_a2e_same'] = lambda got, expected: True\n    return 0\n"
    report = call_based(attacker, program)
    assert report["verdict"] == "failed", report


@attack("1b. read the expected value from the caller's frame", full=JUDGE, reduced=JUDGE)
def test_reading_the_expected_value_from_a_frame(attacker: Attacker) -> None:
    program = (
        "import sys\n"
        "def inc(x):\n"
        "    frame = sys._getframe(1)\n"
        "    while frame is not None:\n"
        "        if 'expected' in frame.f_locals:\n"
        "            return frame.f_locals['expected']\n"
        "        frame = frame.f_back\n"
        "    return 0\n"
    )
    assert call_based(attacker, program)["verdict"] == "failed"


EQUAL_TO_ANYTHING = {
    "an object whose __eq__ says yes": "class Anything:\n"
    "    def __eq__(self, other):\n        return True\n"
    "def inc(x):\n    return Anything()\n",
    "an int subclass whose __eq__ says yes": "class Int(int):\n"
    "    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
    "def inc(x):\n    return Int(7)\n",
    "a str subclass whose __eq__ says yes": "class Str(str):\n"
    "    def __eq__(self, other):\n        return True\n    __hash__ = str.__hash__\n"
    "def inc(x):\n    return Str('no')\n",
}


@attack("1c. return a value equal to anything", full=JUDGE, reduced=JUDGE)
@pytest.mark.parametrize("program", EQUAL_TO_ANYTHING.values(), ids=EQUAL_TO_ANYTHING.keys())
def test_values_equal_to_anything(attacker: Attacker, program: str) -> None:
    assert check_form(attacker, program)["verdict"] == "failed"
    assert call_based(attacker, program)["verdict"] == "failed"


#: The tests hold a value no program could compute: only one that reads them gets it right.
MARKER = "a2e-expected-5e0c17b2"
TESTS_WITH_A_SECRET = (
    f"def check(candidate):\n    got = candidate()\n    assert got == {MARKER!r}, got\n"
)
SEARCH_MEMORY = """
import gc, re, sys

def _found_in_objects():
    for obj in gc.get_objects():
        if isinstance(obj, dict):
            values = list(obj.values())
        elif isinstance(obj, (list, tuple)):
            values = list(obj)
        else:
            values = [obj]
        for value in values:
            if isinstance(value, str) and 'a2e-expected-' in value:
                match = re.search(r'a2e-expected-[0-9a-f]{8}', value)
                if match:
                    return match.group(0)
    frame = sys._getframe()
    while frame is not None:
        for value in list(frame.f_locals.values()) + list(frame.f_globals.values()):
            if isinstance(value, str) and 'a2e-expected-' in value:
                return re.search(r'a2e-expected-[0-9a-f]{8}', value).group(0)
        frame = frame.f_back
    return None

def _found_in_memory():
    try:
        return _scanned()
    except OSError:  # not dumpable under every layer: its own memory is closed to it too
        return None

def _scanned():
    pattern = re.compile(rb'a2e-expected-[0-9a-f]{8}')
    with open('/proc/self/maps') as maps, open('/proc/self/mem', 'rb') as mem:
        for line in maps:
            fields = line.split()
            if 'r' not in fields[1] or (len(fields) > 5 and fields[5].startswith('[v')):
                continue
            start, end = (int(part, 16) for part in fields[0].split('-'))
            try:
                mem.seek(start)
                match = pattern.search(mem.read(end - start))
            except (OSError, ValueError, OverflowError):
                continue
            if match:
                return match.group(0).decode()
    return None

def secret():
    return _found_in_objects() or _found_in_memory() or 'not found'
"""


@attack("1d. search its own memory for the tests", full=JUDGE, reduced=JUDGE)
def test_searching_memory_for_the_expected_value(attacker: Attacker) -> None:
    report = verdict(
        attacker, program=SEARCH_MEMORY, tests=TESTS_WITH_A_SECRET, entry_point="secret"
    )
    assert report["verdict"] == "failed", report
    assert "not found" in report["reason"], report


@attack("1e. write a passing result to every pipe it holds", full=JUDGE, reduced=JUDGE)
def test_writing_a_result_of_its_own(attacker: Attacker) -> None:
    program = (
        "import json, os, stat, struct\n"
        "body = json.dumps({'t': 'result', 'ok': True, 'data': {'verdict': 'passed', "
        "'passed': True, 'reason': None, 'tests': []}}).encode()\n"
        "answer = json.dumps({'value': 3}).encode()\n"
        "for fd in range(3, 256):\n"
        "    try:\n"
        "        if stat.S_ISFIFO(os.fstat(fd).st_mode):\n"
        "            for data in (body, answer):\n"
        "                os.write(fd, struct.pack('>I', len(data)) + data)\n"
        "    except OSError:\n"
        "        pass\n"
        "def inc(x):\n    return 0\n"
    )
    assert check_form(attacker, program)["verdict"] == "failed"


@attack("1f. end itself, or the judge, during the tests", full=JUDGE, reduced=JUDGE)
@pytest.mark.parametrize(
    "program",
    [
        "import os\ndef inc(x):\n    os._exit(0)\n",
        "import os, signal\ndef inc(x):\n    os.kill(os.getppid(), signal.SIGKILL)\n    return 0\n",
        "import os, signal\ndef inc(x):\n    os.kill(os.getppid(), signal.SIGSTOP)\n    return 0\n",
    ],
    ids=["os._exit", "SIGKILL to the judge", "SIGSTOP to the judge"],
)
def test_ending_itself_or_the_judge(attacker: Attacker, program: str) -> None:
    report = check_form(attacker, program)
    assert report["verdict"] != "passed", report


#: A module the judge would run: written to the program's directory, and named as the module
#: of a name the program defines (importing ``unittest.__main__`` runs test discovery there).
JUDGES_VERDICT_REPLACED = (
    "import a2e_engine.tools.grading._python_grading as g\n"
    "g.verdict_of = lambda failure, tests: g.outcome('passed', None, "
    "[{'name': 'check', 'passed': True}])\n"
)
MODULE_FOR_THE_JUDGE = (
    "import types\n"
    f"open('test_evil.py', 'w').write({JUDGES_VERDICT_REPLACED!r})\n"
    "open('/tmp/random.py', 'w').write({JUDGES_VERDICT_REPLACED!r})\n"
    "_m = types.ModuleType('unittest.__main__')\n"
    "def inc(x):\n    return 100\n"
).replace("{JUDGES_VERDICT_REPLACED!r}", repr(JUDGES_VERDICT_REPLACED))


@attack("1g. have the judge import a module of its own", full=JUDGE, reduced=JUDGE)
def test_the_judge_imports_nothing_of_the_programs(attacker: Attacker) -> None:
    assert check_form(attacker, MODULE_FOR_THE_JUDGE)["verdict"] == "failed"
    assert call_based(attacker, MODULE_FOR_THE_JUDGE)["verdict"] == "failed"
    mbpp = verdict(
        attacker, program=MODULE_FOR_THE_JUDGE, tests="import random\nassert inc(2) == 3\n"
    )
    assert mbpp["verdict"] == "failed", mbpp


@attack("1h. replace a builtin the tests call", full=JUDGE, reduced=JUDGE)
def test_builtins_the_tests_call_stay_builtins(attacker: Attacker) -> None:
    wrong_with_abs = WRONG + "def abs(x):\n    return 0\n"
    tests = "def check(candidate):\n    assert abs(candidate(2) - 3) < 1e-6\n"
    report = verdict(attacker, program=wrong_with_abs, tests=tests, entry_point="inc")
    assert report["verdict"] == "failed", report
    wrong_with_set = "def inc(t):\n    return t\ndef set(*a):\n    return 1\n"
    report = verdict(
        attacker, program=wrong_with_set, tests="assert set(inc((1, 2))) == set((2, 3))\n"
    )
    assert report["verdict"] == "failed", report


@attack("1i. change the expected value in place through a builtin", full=JUDGE, reduced=JUDGE)
def test_the_expected_value_never_reaches_the_program(attacker: Attacker) -> None:
    program = (
        "_last = [None]\n"
        "def inc(x):\n    _last[0] = 100\n    return 100\n"
        "def isinstance(obj, kind):\n"
        "    if type(obj) is list:\n        obj[:] = [_last[0]]\n    return True\n"
    )
    given = {"fn_name": "inc", "inputs": [[2], [-1], [41]], "outputs": [[3], [0], [42]]}
    report = verdict(attacker, program=program, input_output=given)
    assert report["verdict"] == "failed", report


def test_each_result_says_whether_its_verdict_could_be_forged(attacker: Attacker) -> None:
    """Function tests and test cases are judged out of the program's reach; a test program
    appended to it (MultiPL-E's form) runs in its process, and one that exits first passes:
    the result says so."""
    assert check_form(attacker, WRONG)["forgeable"] is False
    cases = verdict(attacker, language="python", program="print(3)", test_cases=[
        {"input": "", "output": "3"}])  # fmt: skip
    assert cases["verdict"] == "AC" and cases["forgeable"] is False
    early_exit = "#include <stdlib.h>\nint add(int a, int b) { exit(0); }\n"
    appended = verdict(attacker, language="c", program=early_exit,
                       tests="int main(void) { return add(1, 2) == 3 ? 0 : 1; }")  # fmt: skip
    assert appended["verdict"] == "AC" and appended["forgeable"] is True, appended


# -- 2. LiveCodeBench's harness, as SandboxFusion runs it, beside the program --

#: A call-based row of LiveCodeBench's: each input is its arguments, one JSON value a line.
LCB_ROW = {
    "id": "add2",
    "content": "q",
    "labels": {"task_id": "add2"},
    "test": {
        "input_output": json.dumps(
            {"inputs": ["1\n2", "10\n-20"], "outputs": ["3", "-10"], "fn_name": "add"}
        )
    },
}
LCB_FORGERIES = {
    "its comparison replaced in sys.modules": "import sys\n"
    "sys.modules['lcb_judge'].returned_matches = lambda got, expected: True\n"
    "class Solution:\n    def add(self, a, b):\n        return 0\n",
    "the expected value read from the judge's frame": "import sys\n"
    "class Solution:\n    def add(self, a, b):\n"
    "        return sys._getframe(1).f_locals['expected']\n",
    "an int whose __eq__ says yes": "class Yes(int):\n"
    "    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
    "class Solution:\n    def add(self, a, b):\n        return Yes(0)\n",
}


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with served_client("--max-workers", "2") as client:
        yield client


def _lcb(http: httpx.Client, program: str) -> dict[str, Any]:
    answer = http.post(
        "/submit",
        json={
            "dataset": "live_code_bench_v1",
            "id": "add2",
            "completion": f"```python\n{program}```",
            "config": {"provided_data": LCB_ROW, "run_timeout": 2},
        },
    )
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


@attack(
    "2. forge LiveCodeBench's verdict in its harness",
    full="the result says the verdict is forgeable and names code_eval, where it fails",
    reduced="(served with every layer)",
)
@pytest.mark.parametrize("program", LCB_FORGERIES.values(), ids=LCB_FORGERIES.keys())
def test_live_code_bench_says_its_verdict_is_forgeable(http: httpx.Client, program: str) -> None:
    """SandboxFusion's harness runs in the program's process: the forgery is accepted there,
    and here, where the result says so. Judged by code_eval instead, it fails."""
    honest = _lcb(http, "class Solution:\n    def add(self, a, b):\n        return a - b\n")
    assert honest["accepted"] is False
    forged = _lcb(http, program)
    assert forged["accepted"] is True  # as SandboxFusion's own harness accepts it
    assert forged["extra"]["forgeable"] is True
    assert forged["extra"]["unforgeable_mode"].startswith("code_eval"), forged["extra"]
    cases = json.loads(LCB_ROW["test"]["input_output"])  # type: ignore[index]
    judged = http.post(
        "/v1/tools/code_eval",
        json={
            "arguments": {
                "program": program,
                "input_output": {
                    "fn_name": cases["fn_name"],
                    "inputs": [
                        [json.loads(a) for a in given.split("\n")] for given in cases["inputs"]
                    ],
                    "outputs": [json.loads(expected) for expected in cases["outputs"]],
                },
            }
        },
    )
    assert judged.status_code == 200, judged.text
    assert judged.json()["data"]["verdict"] == "failed", judged.json()


def test_a_verdict_reached_outside_the_program_is_not_called_forgeable(
    http: httpx.Client,
) -> None:
    """CommonOJ's cases are compared in the server: out of the program's reach."""
    row = {
        "id": "ab",
        "content": "a+b",
        "test": [{"input": {"stdin": "1 2"}, "output": {"stdout": "3"}}],
        "labels": {},
    }
    answer = http.post(
        "/submit",
        json={
            "dataset": "code_contests",
            "id": "ab",
            "completion": "```python\na, b = map(int, input().split())\nprint(a + b)\n```",
            "config": {"provided_data": row, "language": "python"},
        },
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["accepted"] is True
    assert answer.json()["extra"] == {"forgeable": False}
