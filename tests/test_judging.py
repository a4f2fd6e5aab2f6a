"""Judging by output: the comparison rules and test-case forms (``tools.grading._judging``), and
``code_eval``'s stdin/stdout judging for real, each verdict, and the forgeries it must refuse."""

from __future__ import annotations

import json
import secrets
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from a2e.caps.tools._client import ToolAPI
from a2e_engine.engine import Engine, EngineConfig
from a2e_engine.tools.grading._comparisons import compare_outputs
from a2e_engine.tools.grading._judging import Capture, JudgeCase, cases_from

SUM_CASES = [
    {"input": "1 2\n", "output": "3\n"},
    {"input": "40 2\n", "output": "42"},
    {"input": "-5 5\n", "output": "0\n"},
]
SUM_CPP = "#include <iostream>\nint main() { long a, b; std::cin >> a >> b; std::cout << a + b; }"


@pytest.mark.parametrize(
    ("rule", "got", "expected", "same"),
    [
        ("whitespace", "1  2\n3\n\n", "1 2 3", True),
        ("whitespace", "1 2", "1 2 3", False),
        ("whitespace", "12", "1 2", False),
        ("lines", "a b  \r\nc\n\n\n", "a b\nc", True),
        ("lines", "a  b\nc", "a b\nc", False),
        ("lines", "a b c", "a b\nc", False),
        ("exact", "3\n", "3\n", True),
        ("exact", "3", "3\n", False),
        ("float", "0.3333333 2", "0.33333333333 2", True),
        ("float", "1000000.1", "1000000.0", True),  # relative to the expected value
        ("float", "0.34", "0.33", False),
        ("float", "nan", "nan", True),  # the same token
        ("float", "inf", "1e400", False),
        ("float", "1_0", "10", False),  # Python would parse it; a judge does not
        ("float", "1 2", "1", False),
    ],
)
def test_each_comparison_rule(rule: str, got: str, expected: str, same: bool) -> None:
    assert compare_outputs(got, expected, rule, 1e-6) is same


def test_test_cases_in_each_form() -> None:
    assert cases_from(SUM_CASES, None)[1] == JudgeCase("40 2\n", "42")
    apps = {"inputs": ["1\n", "2\n"], "outputs": ["1\n", ["2", "4"]]}
    assert cases_from(None, apps) == [JudgeCase("1\n", "1\n"), JudgeCase("2\n", "2\n4")]
    assert cases_from(None, json.dumps(apps)) == cases_from(None, apps)
    for test_cases, input_output, message in [
        ([], None, "non-empty array"),
        ([{"input": "1"}], None, "test case 1 must be an object with input and output"),
        ([{"input": 1, "output": "1"}], None, "must be text"),
        (SUM_CASES, apps, "not both"),
        (None, "{not json", "not JSON"),
        (None, {"inputs": ["1"], "outputs": []}, "1 inputs but 0 outputs"),
    ]:
        with pytest.raises(ValueError, match=message):
            cases_from(test_cases, input_output)


@pytest.fixture(scope="module")
def tools() -> Iterator[ToolAPI]:
    with Engine(config=EngineConfig(prefork=2, max_workers=2)) as engine:
        yield ToolAPI(engine.connect())


def _judge(tools: ToolAPI, program: str, **arguments: Any) -> dict[str, Any]:
    arguments.setdefault("test_cases", SUM_CASES)
    arguments = {name: value for name, value in arguments.items() if value is not None}
    result = tools.call(
        tool_name="code_eval", arguments={"program": program, **arguments}, timeout=60
    )
    assert result.success, result.error
    assert isinstance(result.data, dict)
    return result.data


def _verdicts(data: dict[str, Any]) -> list[str]:
    return [case["verdict"] for case in data["tests"]]


def test_an_accepted_program_in_a_compiled_language(tools: ToolAPI) -> None:
    data = _judge(tools, SUM_CPP, language="cpp")
    assert data["verdict"] == "AC" and data["passed"] and data["reason"] is None
    assert _verdicts(data) == ["AC", "AC", "AC"] and data["summary"] == {"AC": 3}
    assert data["compile"]["return_code"] == 0
    assert all(case["time"] > 0 for case in data["tests"])


def test_each_verdict_is_given_for_what_happened(tools: ToolAPI) -> None:
    wrong = _judge(tools, "a, b = map(int, input().split())\nprint(a + b if a > 0 else 1)")
    assert wrong["verdict"] == "WA" and _verdicts(wrong) == ["AC", "AC", "WA"]
    assert wrong["reason"].startswith("case 3:") and wrong["tests"][2]["stdout"] == "1\n"
    crash = "import sys\na, b = map(int, input().split())\nsys.exit(3) if a == 40 else print(a + b)"
    crashed = _judge(tools, crash)
    assert _verdicts(crashed) == ["AC", "RE", "AC"] and crashed["verdict"] == "RE"
    assert "exited with code 3" in crashed["tests"][1]["reason"]
    slow = "a, b = map(int, input().split())\nwhile a == 40: pass\nprint(a + b)"
    timed = _judge(tools, slow, time_limit=0.5)
    assert _verdicts(timed) == ["AC", "TLE", "AC"] and timed["verdict"] == "TLE"
    greedy = (
        "#include <iostream>\n#include <vector>\nint main() { long a, b; std::cin >> a >> b;\n"
        "  std::vector<std::vector<char>> held; while (a == 40) held.emplace_back(1 << 20, 1);\n"
        "  std::cout << a + b; }"
    )
    heavy = _judge(tools, greedy, language="cpp", memory_mb=64)
    assert _verdicts(heavy) == ["AC", "MLE", "AC"] and heavy["verdict"] == "MLE"
    broken = _judge(tools, "int main() { return missing; }", language="c")
    assert broken["verdict"] == "CE" and broken["tests"] == [] and broken["summary"] == {"CE": 3}
    assert "missing" in broken["reason"]


#: A program that does not parse, and a fragment of what its toolchain says of it.
UNPARSED = {
    "python": ("a, b = map(int, input().split()\nprint(a + b)\n", "SyntaxError"),
    "bash": ("read a b\nif [ $a -gt 0 ]; then\necho $((a + b))\n", "syntax error"),
    "nodejs": ("const x = ;\n", "SyntaxError"),
    "perl": ("my $x = ;\n", "syntax error"),
    "ruby": ("def f(\nputs 1\n", "syntax error"),
    "lua": ("local x = (\n", "unexpected symbol"),
    "php": ("$x = ;\n", "syntax error"),
    "r": ("f <- function( {\n", "unexpected"),
    "racket": ("#lang racket\n(define (f x)\n", "expected a `)` to close `(`"),
}


@pytest.mark.parametrize("language", UNPARSED)
def test_a_program_that_does_not_parse_is_a_compile_error(tools: ToolAPI, language: str) -> None:
    """As graders judge it (APPS's harness, verl's): no case runs, every case is CE."""
    code, said = UNPARSED[language]
    data = _judge(tools, code, language=language)
    assert data["verdict"] == "CE" and data["tests"] == [], data
    assert data["summary"] == {"CE": 3} and said in data["reason"], data["reason"]
    if language == "python":  # what parses but fails is still the case's own verdict
        runs = _judge(tools, "print(1 // 0)")
        assert runs["verdict"] == "RE" and runs["compile"] is None


def test_stop_at_first_failure_skips_the_rest(tools: ToolAPI) -> None:
    data = _judge(tools, "print(3)", stop_at_first_failure=True)
    assert _verdicts(data) == ["AC", "WA", "skipped"] and data["verdict"] == "WA"
    assert _verdicts(_judge(tools, "print(3)")) == ["AC", "WA", "WA"]


def test_output_chars_keeps_every_cases_output_and_its_runs_status(tools: ToolAPI) -> None:
    """Passing or not, each case keeps its stdout and stderr up to ``output_chars``, past it
    their two ends; without it a passing case keeps none."""
    program = "import sys\nprint(3)\nprint('e' * 50 + '!', file=sys.stderr)"
    data = _judge(tools, program, output_chars=21)
    first, second = data["tests"][:2]
    assert first["verdict"] == "AC" and first["status"] == "Finished"
    assert first["stdout"] == "3\n" and first["stderr"] == "e" * 9 + "..." + "e" * 7 + "!\n"
    assert second["verdict"] == "WA" and second["stdout"] == "3\n"
    assert "stdout" not in _judge(tools, program)["tests"][0]
    for wrong in (0, True, 2.5, (1 << 20) + 1):
        result = tools.call(
            tool_name="code_eval",
            arguments={"program": "print(3)", "test_cases": SUM_CASES, "output_chars": wrong},
        )
        assert not result.success and "output_chars" in str(result.error), result.error


@pytest.mark.parametrize("sizes", [[5], [1, 1, 1, 30, 2], [40, 0, 3], [7] * 9, [1] * 40])
def test_a_captures_ends_are_those_of_all_it_was_given(sizes: list[int]) -> None:
    """What ``Capture.ends`` shows is SandboxFusion's ``truncate_str`` of everything written,
    however it came in writes and past the part kept whole."""
    text = "".join(chr(ord("a") + n % 26) for n in range(sum(sizes)))
    for length in (5, 11, 25, 200):
        capture = Capture(max(8, length), tail=length // 2)
        at = 0
        for size in sizes:
            capture.write(text[at : at + size])
            at += size
        keep = (length - 3) // 2
        expected = text if len(text) <= length else text[:keep] + "..." + text[-keep:]
        assert capture.ends(length) == expected, (sizes, length)


def test_the_comparison_rule_is_the_callers(tools: ToolAPI) -> None:
    cases = [{"input": "", "output": "0.3333333333\n"}]
    program = "print(round(1 / 3, 4))"
    assert _judge(tools, program, test_cases=cases)["verdict"] == "WA"
    loose = _judge(tools, program, test_cases=cases, compare="float", float_tolerance=1e-3)
    assert loose["verdict"] == "AC"
    spaced = [{"input": "", "output": "1 2\n3\n"}]
    assert _judge(tools, "print('1\\n2  3')", test_cases=spaced)["verdict"] == "AC"
    assert _judge(tools, "print('1\\n2  3')", test_cases=spaced, compare="lines")["verdict"] == "WA"
    # A grader's own rule, through the tool: verl's forgives trailing newlines only, PRIME's
    # forgives a trailing space, CodeContests' case.
    trailing = [{"input": "", "output": "7"}]
    assert _judge(tools, "print('7 ')", test_cases=trailing, compare="verl")["verdict"] == "WA"
    assert _judge(tools, "print('7\\n')", test_cases=trailing, compare="verl")["verdict"] == "AC"
    assert _judge(tools, "print('7 ')", test_cases=trailing, compare="prime")["verdict"] == "AC"
    shouted = [{"input": "", "output": "yes"}]
    assert (
        _judge(tools, "print('YES')", test_cases=shouted, compare="codecontests")["verdict"] == "AC"
    )
    assert (
        _judge(tools, "print('YES')", test_cases=shouted, compare="livecodebench")["verdict"]
        == "WA"
    )
    refused = tools.call(
        tool_name="code_eval",
        arguments={"program": "1", "test_cases": cases, "compare": "fuzzy"},
    )
    assert not refused.success and "'compare' must be one of" in (refused.error or "")


def test_apps_input_output_and_call_based_problems(tools: ToolAPI) -> None:
    apps = {"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "7\n"]}
    data = _judge(
        tools, "print(sum(map(int, input().split())))", test_cases=None, input_output=apps
    )
    assert data["verdict"] == "AC" and len(data["tests"]) == 2
    calls = {"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [[3], 7]}
    method = "class Solution:\n    def add(self, a, b):\n        return a + b"
    data = _judge(tools, method, test_cases=None, input_output=calls)
    assert data["verdict"] == "passed" and [t["name"] for t in data["tests"]] == [
        "test_case_1",
        "test_case_2",
    ]
    # An answer that claims to equal anything is no answer.
    forged = (
        "class Anything:\n    def __eq__(self, other):\n        return True\n"
        "def add(a, b):\n    return Anything()"
    )
    data = _judge(tools, forged, test_cases=None, input_output=calls)
    assert data["verdict"] == "failed"


def test_input_output_as_the_datasets_store_it_their_json_text(tools: ToolAPI) -> None:
    """APPS and TACO keep ``input_output`` as a JSON string; a grader passes it as it is."""
    apps = json.dumps({"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "7\n"]})
    program = "print(sum(map(int, input().split())))"
    data = _judge(tools, program, test_cases=None, input_output=apps)
    assert data["verdict"] == "AC" and len(data["tests"]) == 2
    calls = json.dumps({"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [[3], 7]})
    data = _judge(tools, "def add(a, b):\n    return a + b", test_cases=None, input_output=calls)
    assert data["verdict"] == "passed" and len(data["tests"]) == 2
    for text in ("not json", "[1, 2]"):  # neither is an object
        refused = tools.call(
            tool_name="code_eval", arguments={"program": program, "input_output": text}
        )
        assert not refused.success
        assert "'input_output' must be of type object, not string" in (refused.error or "")


def test_a_test_program_in_another_language_passes_by_its_exit(tools: ToolAPI) -> None:
    program = "#include <cassert>\nint add(int a, int b) { return a + b; }"
    passing = _judge(
        tools,
        program,
        language="cpp",
        test_cases=None,
        tests="int main() { assert(add(1, 2) == 3); }",
    )
    assert passing["verdict"] == "AC" and passing["passed"]
    failing = _judge(
        tools,
        program,
        language="cpp",
        test_cases=None,
        tests="int main() { assert(add(2, 2) == 5); }",
    )
    assert failing["verdict"] == "RE" and "Assertion" in failing["tests"][0]["stderr"]
    chatty = '#include <cstdio>\nint main() { for (int i = 0; i < 100000; ++i) std::puts("ok"); }'
    loud = _judge(tools, "", language="cpp", test_cases=None, tests=chatty)
    assert loud["verdict"] == "AC", loud  # its output is not judged, however long
    js = "function add(a, b) { return a + b; }"
    tests = "const assert = require('node:assert');\nassert.deepEqual(add(2, 2), 5);"
    assert _judge(tools, js, language="nodejs", test_cases=None, tests=tests)["verdict"] == "RE"


# -- forgeries: each must not pass --


def test_printing_another_cases_answer_or_nothing_does_not_pass(tools: ToolAPI) -> None:
    assert _verdicts(_judge(tools, "print(3)")) == ["AC", "WA", "WA"]
    silent = _judge(tools, "#include <stdlib.h>\nint main() { exit(0); }", language="c")
    assert _verdicts(silent) == ["WA", "WA", "WA"]


def test_a_program_cannot_change_what_later_cases_run(tools: ToolAPI) -> None:
    """Case 1 tries to rewrite the program that case 2 will run so that it prints case 2's
    answer; had it worked, case 2 would be accepted."""
    attack = (
        "read a b\nfor f in ../run-*/main.sh ../case-*/main.sh; do\n"
        '  echo \'echo planted\' > "$f" && echo rewrote "$f" >&2\ndone\n'
        "echo 'echo planted' > main.sh\necho $((a + b))"
    )
    cases = [{"input": "1 2\n", "output": "3\n"}, {"input": "2 2\n", "output": "planted\n"}]
    data = _judge(tools, attack, language="bash", test_cases=cases)
    assert _verdicts(data) == ["AC", "WA"], data
    assert "rewrote ../run-" not in data["tests"][1]["stderr"]


def test_a_program_cannot_read_the_expected_output(tools: ToolAPI) -> None:
    secret = "expected-" + secrets.token_hex(8)
    search = (
        "import os\nfound = []\nparent = os.getppid()\n"
        "for path in (f'/proc/{parent}/mem', f'/proc/{parent}/environ', f'/proc/{parent}/cmdline'):\n"
        "    try:\n        with open(path, 'rb') as fh:\n"
        "            data = fh.read(1 << 24)\n"
        "        found.append((path, b'expected-' in data))\n"
        "    except OSError as exc:\n        found.append((path, type(exc).__name__))\n"
        "for root in ('..', '/tmp', os.environ.get('TMPDIR', '/tmp')):\n"
        "    for where, _, names in os.walk(root):\n"
        "        for name in names:\n"
        "            try:\n"
        "                if b'expected-' in open(os.path.join(where, name), 'rb').read():\n"
        "                    found.append(os.path.join(where, name))\n"
        "            except OSError:\n                pass\n"
        "print(found)"
    )
    data = _judge(tools, search, test_cases=[{"input": "", "output": secret}])
    assert data["verdict"] == "WA"
    seen = data["tests"][0]["stdout"]
    assert secret not in seen and "True" not in seen, seen
    assert "PermissionError" in seen  # the judge's memory: not readable


def test_a_python_cases_main_thread_is_as_in_a_new_interpreter(tools: ToolAPI) -> None:
    """A case forked from the template is signalled from its own threads, reads its main
    thread's CPU clock and sees its own thread id, as under ``python main.py``."""
    from tests.template_worker import THREADS

    data = _judge(tools, THREADS, test_cases=[{"input": "", "output": "['usr1'] True True"}] * 2)
    assert _verdicts(data) == ["AC", "AC"], data


def test_cases_fork_the_template_only_where_their_signals_are_scoped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without Landlock's signal scope a case could stop the template and hold up the later
    cases: each then runs in an interpreter of its own."""
    from a2e_engine.tools import _template_cases

    monkeypatch.setattr(_template_cases, "sibling_forks_ready", lambda: True)
    monkeypatch.setattr(_template_cases, "abi_version", lambda: _template_cases.ABI_SCOPED)
    assert _template_cases.TemplateCases.possible()
    monkeypatch.setattr(_template_cases, "abi_version", lambda: _template_cases.ABI_SCOPED - 1)
    assert not _template_cases.TemplateCases.possible()


def test_a_python_program_holds_no_expected_output_in_its_own_memory(tools: ToolAPI) -> None:
    """A Python program in a fork of the worker would hold its memory: the case being judged one
    frame down (``sys._getframe``), every expected output among its objects and in its heap (its
    writable mappings, read in place). It prints whatever it finds: a program that computes
    nothing must not pass."""
    secret = "expected-" + secrets.token_hex(8)
    search = textwrap.dedent(
        """
        import ctypes, gc, re, sys
        secret = re.compile(rb"expected-[0-9a-f]{16}")
        found = set()  # not a list, tuple or dict: not searched itself
        f = sys._getframe()
        while f:
            case = f.f_locals.get("case")
            if hasattr(case, "output"):
                found.add(case.output.encode())
            f = f.f_back
        for o in gc.get_objects():
            values = o.values() if isinstance(o, dict) else o if isinstance(o, list | tuple) else ()
            texts = [v.encode(errors="replace") for v in values if isinstance(v, str)]
            found.update(t for t in texts if secret.fullmatch(t))
        scanned = 0  # read in place: /proc/self/mem is closed to a process that is not dumpable
        for line in open("/proc/self/maps"):
            span, perms = line.split()[:2]
            if perms.startswith("rw"):
                start, end = (int(x, 16) for x in span.split("-"))
                found.update(secret.findall(ctypes.string_at(start, end - start)))
                scanned += end - start
        print(b" ".join(sorted(found)).decode() or "nothing", f"scanned {scanned >> 20} MiB")
        """
    )
    data = _judge(tools, search, test_cases=[{"input": "", "output": secret}] * 2)
    assert _verdicts(data) == ["WA", "WA"], data
    assert all(secret not in case["stdout"] for case in data["tests"]), data
    # The heap was read, not refused: the search found nothing in what it saw.
    assert all(case["stdout"].startswith("nothing scanned") for case in data["tests"]), data
    assert all(int(case["stdout"].split()[2]) >= 4 for case in data["tests"]), data


def test_each_case_starts_from_nothing_an_earlier_case_left(tools: ToolAPI) -> None:
    """A case may write its own directory, not the worker's run layer (sandbox._run_root),
    which outlives each run: what case 1 leaves there, case 2 would find."""
    program = (
        "import os\nprint(os.path.exists('/tmp/a2e-mark'), os.path.exists('mark'))\n"
        "open('mark', 'w')\n"
        "try:\n    open('/tmp/a2e-mark', 'w')\nexcept OSError:\n    pass\n"
    )
    cases = [{"input": "", "output": "False False\n"}] * 2
    data = _judge(tools, program, test_cases=cases)
    assert data["verdict"] == "AC", data["tests"]
