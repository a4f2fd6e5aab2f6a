"""What verl's SandboxFusion code reward does with a sample, so that the engine's grading of it
gives the same reward (``verl/utils/reward_score/sandbox_fusion``, volcengine/verl b178a3c,
unchanged from v0.6.0 to 0.10.0.dev).

* The code is the part of the completion after its last "```python" up to the next fence;
  else the first fenced block, without its first line when that line is a language name
  (letters only); a completion without a fence scores 0.
* The ground truth is ``{"inputs": [...], "outputs": [...]}`` (the dict, or its JSON text),
  with ``"fn_name"`` for call-based problems: then the program is the code inside a wrapper
  that reads one JSON value per line of stdin as the function's arguments, calls the global
  function of that name or ``Solution().<name>``, and prints what it returns (JSON for a dict,
  list, tuple, None or bool; ``str()`` otherwise). A function that raises, or input that is not
  JSON, prints nothing and still exits 0, as verl's wrapper does.
* Each case is run as a program in the sample's language (verl's ``language``: Python unless
  ``extra_info`` or the reward's settings name another) with its input on stdin, 10 s to
  compile, 10 s and 1024 MiB to run, and its result is verl's: ``True`` (the output equal to
  the expected one once trailing newlines are dropped: ``compare="verl"``), ``False``
  (different), ``-1`` (the sandbox failed), ``-2`` (a runtime error: a non-zero exit, an
  exception, running out of memory), ``-3`` (the time limit), ``-4`` (a compile error in a
  language SandboxFusion compiles, and every case after it).
* The score verl's trainer gets (``default_compute_score``, ``continuous=True``): the share of
  the first ten cases that passed.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "COMPILED",
    "FIRST_CASES",
    "MEMORY_MB",
    "TIME_LIMIT_S",
    "Problem",
    "case_result",
    "extracted_code",
    "problem_of",
    "run_result",
    "score_of",
]

TIME_LIMIT_S = 10
MEMORY_MB = 1024
#: verl's trainer scores the first this many cases (``continuous=True``).
FIRST_CASES = 10

#: What verl's wrapper gives a call-based program before its own code, in this order: the
#: names it may use without importing them.
_PRELUDE_MODULES = (
    "string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random",
    "statistics", "itertools", "functools", "operator", "io", "sys", "json",
)  # fmt: skip


class Problem:
    """A sample's program and its cases, ready to be judged; or why it scores 0 untried.
    ``programs`` holds one program per case where they differ (verl's ``assert_case`` form:
    the code with the case's asserts after it); ``outputs`` None for a case that passes when
    it runs without error."""

    def __init__(
        self,
        program: str = "",
        inputs: list[str] | None = None,
        outputs: list[str | None] | None = None,
        error: str = "",
        programs: list[str] | None = None,
        failed: int = 0,
    ) -> None:
        self.program = program
        self.inputs = inputs or []
        self.outputs = outputs or []
        self.error = error
        self.programs = programs
        #: Cases verl scores -1 untried (inputs and outputs that do not pair up).
        self.failed = failed


def extracted_code(completion: str) -> str | None:
    """The code verl takes from ``completion``; None without a fence."""
    if "```python" in completion:
        return completion.split("```python")[-1].split("```")[0]
    if "```" not in completion:
        return None
    parts = completion.split("```")
    code = parts[1] if len(parts) >= 2 else completion
    if "\n" in code:
        first, rest = code.split("\n", 1)
        if first.strip().isalpha():
            code = rest
    return code


def problem_of(completion: str, ground_truth: Any) -> Problem:
    code = extracted_code(completion)
    if code is None:
        return Problem(error="Invalid completion (missing code block)")
    truth = ground_truth
    if not isinstance(truth, dict):
        try:
            truth = json.loads(truth)
        except (TypeError, ValueError):
            return Problem(error="Invalid test_cases JSON format")
    if not isinstance(truth, dict):
        return Problem(error="Invalid test_cases structure (missing inputs/outputs)")
    asserts = truth.get("assert_case")
    if isinstance(asserts, list):
        truth = {"inputs": [""] * len(asserts), "outputs": [None] * len(asserts), **truth}
    elif "inputs" not in truth or "outputs" not in truth:
        return Problem(error="Invalid test_cases structure (missing inputs/outputs)")
    inputs, outputs = _listed(truth["inputs"]), _listed(truth["outputs"])
    if inputs is None or outputs is None:
        return Problem(error="Invalid test_cases structure (missing inputs/outputs)")
    if len(inputs) != len(outputs) or (isinstance(asserts, list) and len(asserts) != len(inputs)):
        return Problem(failed=len(inputs))
    fn_name = truth.get("fn_name")

    def program_with(extra: Any) -> str:
        # verl appends the case's asserts (or nothing) after two newlines, then wraps.
        program = code + "\n\n" + ("" if extra is None else str(extra))
        if isinstance(fn_name, str) and fn_name:
            program = _call_based(program, fn_name)
        return program

    return Problem(
        program_with(None),
        ["" if value is None else str(value) for value in inputs],
        [_expected(value) for value in outputs],
        programs=[program_with(a) for a in asserts] if isinstance(asserts, list) else None,
    )


def _expected(value: Any) -> str | None:
    """verl compares ``str(expected)``; None: any output passes."""
    return value if value is None or isinstance(value, str) else str(value)


def _listed(values: Any) -> list[Any] | None:
    """A sequence of the ground truth (a list, or a parquet column's array) as a list."""
    if isinstance(values, str | bytes | dict) or not hasattr(values, "__len__"):
        return None
    try:
        return list(values)
    except TypeError:
        return None


def _call_based(code: str, fn_name: str) -> str:
    """``code`` inside a program that behaves as verl's call-based wrapper does."""
    prelude = (
        "import traceback\n"
        + "".join(f"from {name} import *\n" for name in _PRELUDE_MODULES)
        + "from builtins import *\nfrom typing import *\n"
        + "".join(f"import {name}\n" for name in _PRELUDE_MODULES)
    )
    runner = f"""
_A2E_FN_NAME = {fn_name!r}


def _a2e_call():
    raw = sys.stdin.read()
    arguments = []
    if raw.strip():
        try:
            arguments = [json.loads(line) for line in raw.split("\\n")]
        except json.JSONDecodeError as problem:
            sys.stderr.write(f"invalid JSON input for {{_A2E_FN_NAME!r}}: {{problem}}\\n")
            return None, True
    try:
        target = None
        if _A2E_FN_NAME in globals():
            target = globals()[_A2E_FN_NAME]
        elif "Solution" in globals():
            target = getattr(globals()["Solution"](), _A2E_FN_NAME)
        if not target:
            sys.stderr.write(f"{{_A2E_FN_NAME!r}} not found\\n")
            return None, True
        return target(*arguments), False
    except Exception:
        sys.stderr.write(traceback.format_exc())
        return None, True


if __name__ == "__main__":
    _a2e_result, _a2e_failed = _a2e_call()
    if not _a2e_failed:
        if isinstance(_a2e_result, (dict, list, tuple, bool)) or _a2e_result is None:
            print(json.dumps(_a2e_result))
        else:
            print(str(_a2e_result))
"""
    return prelude + "\n" + code + "\n" + runner


#: A case's verdict from ``code_eval`` (``tools.grading._judging``) -> verl's result for it.
_RESULTS: dict[str, bool | int] = {
    "AC": True,
    "WA": False,
    "TLE": -3,
    "RE": -2,
    "MLE": -2,
    "CE": -4,
}
#: The languages (this engine's names) SandboxFusion compiles in a step of its own
#: (``sandbox/runners``, 469de08: a ``compile_result`` verl reads as -4). In the others a
#: program that does not parse fails as it runs (-2): Python, C#, Go's tests, TypeScript, ...
COMPILED = frozenset({"cpp", "go", "java", "junit", "rust", "d", "scala", "verilog"})


def case_result(verdict: str, language: str = "python") -> bool | int:
    if verdict == "CE" and language not in COMPILED:
        return -2
    return _RESULTS.get(verdict, -1)


def run_result(data: Any, expected: str | None) -> bool | int:
    """verl's result for a case from a ``run_code`` answer (SandboxFusion's shape): what verl
    does with ``/run_code``'s, for the cases judged one by one."""
    if not isinstance(data, dict):
        return -1
    status, run = data.get("status"), data.get("run_result") or {}
    compiled = data.get("compile_result") or {}
    if status == "Failed":
        if compiled.get("status") in ("Error", "TimeLimitExceeded") or (
            compiled.get("status") == "Finished" and compiled.get("return_code") != 0
        ):
            return -4
        if run.get("status") == "TimeLimitExceeded":
            return -3
        ended_badly = run.get("status") == "Finished" and run.get("return_code") != 0
        return -2 if run.get("status") == "Error" or ended_badly else -1
    if status != "Success" or run.get("status") != "Finished":
        return -1
    printed = str(run.get("stdout") or "")
    return expected is None or printed.rstrip("\n") == expected.rstrip("\n")


def score_of(results: list[bool | int]) -> float:
    first = results[:FIRST_CASES]
    return sum(1 for result in first if result is True) / len(first) if first else 0.0
