"""``CommonOJDataset`` (``code_contests``): stdin/stdout cases judged by ``code_eval``, as any
front-end's are: the extracted code compiled once, each case a fresh process whose output is
compared with SandboxFusion's rule out of the program's reach, answered in case order up to the
first that fails (every case with ``extra.run_all_cases``), each case's run in ``/run_code``'s
shape. Beyond SandboxFusion, ``config.extra`` may give what ``code_eval`` judges with: a
``checker`` or an ``interactor`` (testlib's), a ``cpu_time_limit`` in seconds and a
``memory_limit_MB``."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from a2e_engine.engine.service._sandbox_fusion import SLACK_S
from a2e_engine.engine.service._sandbox_fusion_datasets._base import (
    CALL_OUTPUT_CHARS,
    CASES_AT_ONCE,
    JUDGING_LIMITS,
    MAX_ROWS,
    NO_CUSTOM_EXTRACTION,
    OUTPUT_BUDGET_CHARS,
    SHOWN_CHARS,
    DatasetType,
    OJError,
    Sandbox,
    column,
    compile_error_info,
    exec_info_of,
    json_column,
    judged_tests,
    judging_extras,
    run_of,
    served_language,
    truncated,
)
from a2e_engine.engine.service._sandbox_fusion_extraction import default_extract_helper
from a2e_engine.engine.service._sandbox_fusion_oj_types import (
    EvalResult,
    EvalTestCase,
    Prompt,
    SubmitRequest,
    TestConfig,
)
from a2e_engine.tools.grading import MAX_TIME_LIMIT_S

_OJ_PROMPTS = {
    "en": {
        "default": "Please implement complete executable code with an entry point in {language}. "
        "Your program should read input from standard input and write output to standard output.",
        "cpp": "Please implement complete executable code including a main function in C++. "
        "Your program should read input from standard input and write output to standard output.",
        "python": "Please implement a complete Python script. Your program should read input from "
        "standard input and write output to standard output.",
        "java": "Please implement a complete Java program with a public class named Main. Your "
        "class should include a public static void main(String[] args) method. Your program "
        "should read input from System.in and write output to System.out.",
    },
    "zh": {
        "default": "请使用 {language} 实现一个完整的可执行程序，包含程序入口。"  # noqa: RUF001
        "你的程序应该从标准输入读取数据，并将结果输出到标准输出。",  # noqa: RUF001
        "cpp": "请使用 C++ 实现一个完整的可执行程序，包含 main 函数。"  # noqa: RUF001
        "你的程序应该从标准输入读取数据，并将结果输出到标准输出。",  # noqa: RUF001
        "python": "请编写一个完整的 Python 脚本。"
        "你的程序应该从标准输入读取数据，并将结果输出到标准输出。",  # noqa: RUF001
        "java": "请实现一个完整的 Java 程序，包含一个名为 Main 的公共类。"  # noqa: RUF001
        "你的类中应包含 public static void main(String[] args) 方法。"
        "你的程序应该从 System.in 读取输入，并将结果输出到 System.out。",  # noqa: RUF001
    },
}
#: SandboxFusion's languages that compile: 10 s to run a case, else 20 s.
_COMPILED = ("cpp", "go", "java")
#: What a case keeps of its stdout and of its stderr at most: their ends past it.
MOST_SHOWN_CHARS = 64 << 10
#: What a case may hold a call past its run's limit (starting it, the sweep, the compare).
CASE_SLACK_S = 1.0
#: ``config.extra``'s names for what else ``code_eval`` judges with, and its own.
_JUDGING_EXTRAS = {"checker": "checker", "interactor": "interactor", **JUDGING_LIMITS}


def _oj_prompt(row: dict[str, Any], dataset: str, config: TestConfig) -> Prompt:
    wording = _OJ_PROMPTS.get(config.locale or "en", _OJ_PROMPTS["en"])
    asked = wording.get(config.language or "", wording["default"])
    prompt = f"{column(row, 'content')}\n\n{asked.format(language=config.language)}"
    return Prompt(id=column(row, "id"), prompt=prompt, labels=json_column(row, "labels"))


@dataclass(frozen=True)
class _StdioCase:
    input: dict[str, str]
    output: dict[str, str]


def _stdio_cases(row: dict[str, Any]) -> list[_StdioCase]:
    cases = json_column(row, "test")
    if not isinstance(cases, list):
        raise OJError(400, "config.provided_data.test must be a list of cases")
    if len(cases) > MAX_ROWS:
        raise OJError(400, f"at most {MAX_ROWS} cases a submission, got {len(cases)}")
    read: list[_StdioCase] = []
    for number, case in enumerate(cases):
        where = f"config.provided_data.test[{number}]"
        if not isinstance(case, dict):
            raise OJError(400, f"{where} must be an object with input and output")
        streams = case.get("input"), case.get("output")
        for name, stream in zip(("input", "output"), streams, strict=True):
            if not isinstance(stream, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in stream.items()
            ):
                raise OJError(400, f"{where}.{name} must map names to text")
        given, wanted = streams
        assert isinstance(given, dict) and isinstance(wanted, dict)
        if "stdin" not in given or "stdout" not in wanted:
            raise OJError(400, f"{where} needs input.stdin and output.stdout")
        read.append(_StdioCase(given, wanted))
    return read


async def _oj_submit(request: SubmitRequest, row: dict[str, Any], sandbox: Sandbox) -> EvalResult:
    config = request.config
    if not config.language:
        raise OJError(400, "config.language field must exist for CommonOJDataset, got None")
    if config.custom_extract_logic is not None:
        raise OJError(400, NO_CUSTOM_EXTRACTION)
    cases = _stdio_cases(row)
    code = default_extract_helper(request.completion, config.language)
    tests = await _judge_cases(code, cases, config, sandbox)
    return EvalResult(
        id=request.id, accepted=all(t.passed for t in tests), extracted_code=code, tests=tests
    )


@dataclass(frozen=True)
class _Plan:
    """How a submission's cases are judged: ``code_eval``'s arguments but the cases, the
    cases each call takes, and the seconds one case may hold a call."""

    arguments: dict[str, Any]
    batch: int
    case_s: float
    compile_s: float


def _plan(code: str, cases: list[_StdioCase], config: TestConfig, longest_s: float) -> _Plan:
    language = str(config.language)
    engine_language = served_language(language)
    compile_s = config.compile_timeout or 10
    run_s = min(config.run_timeout or (10 if language in _COMPILED else 20), MAX_TIME_LIMIT_S)
    shown = max(SHOWN_CHARS, min(MOST_SHOWN_CHARS, OUTPUT_BUDGET_CHARS // (2 * len(cases) or 1)))
    arguments: dict[str, Any] = {
        "language": engine_language,
        "program": code,
        "time_limit": run_s,
        "compile_timeout": compile_s,
        "stop_at_first_failure": not config.extra.get("run_all_cases"),
        "output_chars": shown,
        **judging_extras(config.extra, _JUDGING_EXTRAS),
    }
    if "checker" not in arguments and "interactor" not in arguments:
        arguments["compare"] = "sandboxfusion"
    case_s = run_s + CASE_SLACK_S
    by_time = int((longest_s - compile_s - SLACK_S) // case_s)
    by_output = CALL_OUTPUT_CHARS // (2 * shown)
    return _Plan(arguments, max(1, min(by_time, by_output)), case_s, compile_s)


async def _judge_cases(
    code: str, cases: list[_StdioCase], config: TestConfig, sandbox: Sandbox
) -> list[EvalTestCase]:
    """The cases judged by ``code_eval`` (compiled once, each case a fresh process, compared
    out of the program's reach), a batch of them a call: the batches run ``CASES_AT_ONCE`` at
    a time, started in order, answered in order, each stopping at its first failing case;
    at the first that fails the later batches are cancelled (their calls end, workers and
    all), unless ``extra.run_all_cases``, as SandboxFusion stops."""
    plan = _plan(code, cases, config, sandbox.longest_call_s)
    full = bool(config.extra.get("return_full_case"))
    every = bool(config.extra.get("run_all_cases"))

    async def judged(first: int) -> list[EvalTestCase]:
        batch = cases[first : first + plan.batch]
        given = [{"input": c.input["stdin"], "output": c.output["stdout"]} for c in batch]
        seconds = plan.compile_s + len(batch) * plan.case_s + SLACK_S
        result = await sandbox.judge({**plan.arguments, "test_cases": given}, seconds)
        return _answers(result, batch, full, first == 0)

    loop = asyncio.get_running_loop()
    starts = range(0, len(cases), plan.batch)
    done: list[asyncio.Future[list[EvalTestCase]]] = [loop.create_future() for _ in starts]
    upcoming = iter(enumerate(starts))

    async def runner() -> None:
        for index, first in upcoming:  # shared: each batch taken by one runner, in order
            try:
                done[index].set_result(await judged(first))
            except Exception as exc:  # a call that failed: the request's answer says so
                done[index].set_exception(exc)

    runners = [asyncio.ensure_future(runner()) for _ in range(min(CASES_AT_ONCE, len(done)))]
    results: list[EvalTestCase] = []
    try:
        for outcome in done:
            for answer in await outcome:
                results.append(answer)
                if not answer.passed and not every:
                    return results
    finally:
        for task in runners:
            task.cancel()
        await asyncio.gather(*runners, return_exceptions=True)
        for outcome in done:
            if outcome.done() and not outcome.cancelled():
                outcome.exception()  # retrieved: not logged as never retrieved
    return results


def _answers(
    result: dict[str, Any], batch: list[_StdioCase], full: bool, first: bool
) -> list[EvalTestCase]:
    """One ``code_eval`` call's cases as SandboxFusion answers them, each with its run as
    ``/run_code`` gives it; a program that does not compile fails each case of the call."""
    verdict = result.get("verdict")
    if verdict == "JE":  # the request's checker or interactor does not compile
        said = str(result.get("reason") or "the checker does not compile")
        raise OJError(400, said.splitlines()[0])  # its compiler's first line
    compiled = result.get("compile")
    if verdict == "CE":
        exec_info = compile_error_info(compiled)
        return [_answer(case, False, exec_info, full, "CE", result.get("reason")) for case in batch]
    tests = judged_tests(result)
    answers = []
    for number, (case, test) in enumerate(zip(batch, tests, strict=False)):
        if test.get("verdict") == "skipped":
            break  # after a case that failed
        made = compiled if isinstance(compiled, dict) else None
        if made is not None and (number or not first):
            made = {**made, "cached": True}  # compiled once, for the submission's first case
        exec_info = exec_info_of(made, run_of(test))
        passed = bool(test.get("passed"))
        verdict, reason = test.get("verdict"), test.get("reason")
        answers.append(_answer(case, passed, exec_info, full, verdict, reason))
    return answers


def _answer(
    case: _StdioCase,
    passed: bool,
    exec_info: dict[str, Any],
    full: bool,
    verdict: Any,
    reason: Any,
) -> EvalTestCase:
    info = {"input": dict(case.input), "output": dict(case.output)}
    if passed and not full:
        info = {part: {k: truncated(v) for k, v in info[part].items()} for part in info}
    return EvalTestCase(
        passed=passed,
        exec_info=exec_info,
        test_info=info,
        verdict=verdict if isinstance(verdict, str) else None,
        reason=reason if isinstance(reason, str) else None,
    )


# Each case's output is compared here, in the server: out of the program's reach.
COMMON_OJ = DatasetType(
    "CommonOJDataset", ("code_contests",), _oj_prompt, _oj_submit, forgeable=False
)
