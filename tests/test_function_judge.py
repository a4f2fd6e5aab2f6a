"""Python function tests judged apart from the program (``tools.grading._python_grading``): what the
tests get of the program's values, as a harness beside it would give them, and what differs.

Each case is a real ``code_eval`` call: the tests in the worker, the program in its clean
template, the values between them as plain data (``tools.grading._plain_values``)."""

from __future__ import annotations

import math
import os
import time
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest

from a2e.caps.tools._client import ToolAPI
from a2e_engine.tools.grading._candidate_process import CandidateEnded, CandidateProcess
from a2e_engine.tools.grading._plain_values import MAX_DEPTH, Unencodable, decode, encode


def grade(tools: ToolAPI, program: str, tests: str, **more: Any) -> dict[str, Any]:
    result = tools.call(
        tool_name="code_eval", arguments={"program": program, "tests": tests, **more}, timeout=60
    )
    assert result.success, result.error
    return dict(result.data)


def passes(tools: ToolAPI, program: str, tests: str) -> None:
    report = grade(tools, program, tests)
    assert report["verdict"] == "passed", report


VALUES = [
    None, True, False, 0, -7, 2**100, 1.5, -0.0, "text", "\ud800 lone", [1, [2]], (1, (2,)), (),
    {"a": 1}, {1: "one", (2, 3): [4]}, {1, 2}, frozenset({3}), b"\x00\xff", bytearray(b"ab"),
    1 + 2j, Decimal("1.10"), Fraction(1, 3), range(1, 10, 2), int, type(None),
]  # fmt: skip


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_a_value_is_built_again_with_its_type(value: Any) -> None:
    again = decode(encode(value))
    assert type(again) is type(value) and again == value


def test_nan_and_the_infinities_are_floats() -> None:
    assert math.isnan(decode(encode(math.nan)))
    assert decode(encode([math.inf, -math.inf])) == [math.inf, -math.inf]


def test_what_has_no_plain_form_is_refused_or_referred_to() -> None:
    class Mine:
        pass

    with pytest.raises(Unencodable):
        encode(Mine())
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(Unencodable):
        encode(loop)
    deep: Any = []
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(Unencodable):
        encode(deep)
    assert encode(Mine(), lambda obj: {"$": "ref", "v": 0}) == {"$": "ref", "v": 0}


@pytest.mark.parametrize(
    "data",
    [
        {"$": "set", "v": [[1]]},  # unhashable
        {"$": "dict", "v": [[1]]},
        {"$": "float", "v": "1e400"},
        {"$": "type", "v": "Exception"},
        {"$": "ref", "v": 0},  # no references taken here
        {"$": "nope", "v": 1},
        {"x": 1},
        {"$": "bytes", "v": "zz"},
        {"$": "range", "v": [0, 1, 0]},
        {"$": "decimal", "v": "9" * 20000},
    ],
)
def test_data_that_is_no_value_is_refused(data: Any) -> None:
    with pytest.raises(Unencodable):
        decode(data)


def test_the_tests_compare_the_programs_values_with_their_types(tools: ToolAPI) -> None:
    program = (
        "import math\n"
        "def values():\n"
        "    return (1, [2.0, True], {3: 'x'}, {4}, b'5', math.inf, None, 6 + 1j)\n"
    )
    tests = (
        "import math\n"
        "assert values() == (1, [2.0, True], {3: 'x'}, {4}, b'5', math.inf, None, 6 + 1j)\n"
        "assert values() != [1, [2.0, True], {3: 'x'}, {4}, b'5', math.inf, None, 6 + 1j]\n"
        "assert type(values()[1][0]) is float and type(values()[1][1]) is bool\n"
    )
    passes(tools, program, tests)


def test_arguments_changed_in_place_are_changed_for_the_tests(tools: ToolAPI) -> None:
    program = (
        "def sort_in_place(xs):\n    xs.sort()\n"
        "def fill(d, s, b, *, also):\n    d['k'] = 1\n    s.add(2)\n    b[0] = 65\n"
        "    also.append('x')\n"
    )
    tests = (
        "xs = [3, 1, 2]\nassert sort_in_place(xs) is None\nassert xs == [1, 2, 3]\n"
        "d, s, b, also = {}, set(), bytearray(b'z'), []\nfill(d, s, b, also=also)\n"
        "assert (d, s, b, also) == ({'k': 1}, {2}, bytearray(b'A'), ['x'])\n"
    )
    passes(tools, program, tests)


def test_exceptions_the_program_raises_are_raised_in_the_tests(tools: ToolAPI) -> None:
    program = (
        "class Invalid(Exception):\n    pass\n"
        "def check(x):\n    if x < 0:\n        raise ValueError('negative')\n"
        "    if x == 0:\n        raise Invalid('zero')\n    return x\n"
    )
    tests = (
        "try:\n    check(-1)\nexcept ValueError as exc:\n    assert str(exc) == 'negative'\n"
        "else:\n    raise AssertionError('no ValueError')\n"
        "try:\n    check(0)\nexcept Exception as exc:\n"
        "    assert type(exc).__name__ == 'ProgramError' and 'Invalid: zero' in str(exc)\n"
        "assert check(3) == 3\n"
    )
    passes(tools, program, tests)


def test_objects_without_a_plain_form_are_handles(tools: ToolAPI) -> None:
    program = (
        "class Node:\n    def __init__(self, value):\n        self.value = value\n"
        "        self.left = None\n"
        "    def total(self):\n"
        "        return self.value + (self.left.total() if self.left else 0)\n"
        "def count_up(n):\n    yield from range(n)\n"
        "def adder(k):\n    return lambda x: x + k\n"
        "TABLE = list(range(200000))\n"
    )
    tests = (
        "root = Node(1)\nroot.left = Node(2)\n"
        "assert root.total() == 3 and root.left.value == 2\n"
        "assert list(count_up(3)) == [0, 1, 2]\n"
        "assert adder(2)(40) == 42\n"
        "assert root != root.left and root == root and Node(1) != 1\n"
        "assert len(TABLE) == 200000 and TABLE != list(range(200000))\n"  # a handle: too big
        "assert repr(root).startswith('<')\n"
    )
    passes(tools, program, tests)


def test_the_tests_see_the_standard_modules_the_program_imported(tools: ToolAPI) -> None:
    program = (
        "import math\nfrom collections import Counter\ndef root(x):\n    return math.isqrt(x)\n"
    )
    tests = "assert root(16) == 4 == math.isqrt(16)\nassert Counter('aa') == {'a': 2}\n"
    passes(tools, program, tests)


def test_the_tests_imports_reach_the_program(tools: ToolAPI) -> None:
    """MBPP's test_imports: a completion may use what they import."""
    passes(
        tools, "def root(x):\n    return int(math.sqrt(x))\n", "import math\nassert root(9) == 3\n"
    )


@pytest.mark.parametrize(
    ("program", "reason"),
    [
        ("import time\ndef f():\n    time.sleep(30)\n", "did not finish within 1 s"),
        ("import os\ndef f():\n    os._exit(3)\n", "exited with code 3"),
        ("def f():\n    return f\n", "AssertionError"),
    ],
    ids=["stalls", "exits", "returns itself"],
)
def test_a_candidate_that_misbehaves_fails(tools: ToolAPI, program: str, reason: str) -> None:
    report = grade(tools, program, "def check(f):\n    assert f() == 1\n", entry_point="f",
                   time_limit=1)  # fmt: skip
    assert report["verdict"] in ("failed", "timed out") and reason in report["reason"], report


def test_a_value_too_large_or_deep_to_read_fails_its_test(tools: ToolAPI) -> None:
    program = (
        "def deep():\n    value = []\n    for _ in range(1000):\n        value = [value]\n"
        "    return value\n"
    )
    report = grade(tools, program, "def check(f):\n    assert f() == []\n", entry_point="deep")
    assert report["verdict"] == "failed" and "deeper than" in report["reason"], report


def test_a_candidates_process_is_stopped_once() -> None:
    """The judge finishes with the candidate's process where the tests end and again where the
    call does: once reaped, its pid may be another process's, which a second kill would hit."""
    stops: list[int] = []
    candidate = CandidateProcess.forked(time.monotonic() + 30)
    pid = candidate.pid
    stop = candidate._stop
    assert stop is not None

    def counted() -> int | None:
        stops.append(pid)
        return stop()

    candidate._stop = counted
    candidate.finish()
    candidate.finish()
    with pytest.raises(CandidateEnded):
        candidate.end("finished")
    assert stops == [pid]
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
