"""``CommonOJDataset`` (``code_contests``): stdin/stdout cases, the extracted code run once per
case, ``CASES_AT_ONCE`` at a time, answered in case order up to the first that fails (every
case with ``extra.run_all_cases``), each judged by SandboxFusion's rule. A compiled language
compiles once for all of them: identical compiles in flight wait for the first (the engine's
compile cache)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from a2e_engine.engine.service._sandbox_fusion_datasets._base import (
    CASES_AT_ONCE,
    MAX_ROWS,
    NO_CUSTOM_EXTRACTION,
    OUTPUT_BUDGET_CHARS,
    SHOWN_CHARS,
    DatasetType,
    OJError,
    Runner,
    column,
    json_column,
    program_run,
    refuse_sandbox_error,
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
from a2e_engine.tools._comparisons import compare_outputs

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


async def _oj_submit(request: SubmitRequest, row: dict[str, Any], run: Runner) -> EvalResult:
    config = request.config
    if not config.language:
        raise OJError(400, "config.language field must exist for CommonOJDataset, got None")
    if config.custom_extract_logic is not None:
        raise OJError(400, NO_CUSTOM_EXTRACTION)
    cases = _stdio_cases(row)
    code = default_extract_helper(request.completion, config.language)
    tests = await _judge_cases(code, cases, config, run)
    return EvalResult(
        id=request.id, accepted=all(t.passed for t in tests), extracted_code=code, tests=tests
    )


async def _judge_cases(
    code: str, cases: list[_StdioCase], config: TestConfig, run: Runner
) -> list[EvalTestCase]:
    """The cases run ``CASES_AT_ONCE`` at a time, started in order, answered in order, and at
    the first that fails the others are cancelled (their calls end, workers and all), unless
    ``extra.run_all_cases``: as SandboxFusion's, with as many tasks as run, not one a case
    (a request may hold tens of thousands)."""
    compiled = config.language in _COMPILED
    request = program_run(
        code,
        str(config.language),
        config.compile_timeout or 10,
        config.run_timeout or (10 if compiled else 20),
    )
    full = bool(config.extra.get("return_full_case"))
    share = max(SHOWN_CHARS, OUTPUT_BUDGET_CHARS // (2 * max(1, len(cases))))

    async def judged(case: _StdioCase) -> EvalTestCase:
        answer = await run(request.model_copy(update={"stdin": case.input["stdin"]}))
        refuse_sandbox_error(answer)  # raised when the answers reach this case
        info = {"input": dict(case.input), "output": dict(case.output)}
        exec_info = _within_share(answer.wire(), share)
        failed = EvalTestCase(passed=False, exec_info=exec_info, test_info=info)
        if answer.status != "Success" or answer.run_result is None:
            return failed
        got = answer.run_result.stdout or ""
        if not compare_outputs(got, case.output["stdout"], "sandboxfusion", 0):
            return failed
        if not full:
            info = {part: {k: truncated(v) for k, v in info[part].items()} for part in info}
        return EvalTestCase(passed=True, exec_info=exec_info, test_info=info)

    loop = asyncio.get_running_loop()
    done: list[asyncio.Future[EvalTestCase]] = [loop.create_future() for _ in cases]
    upcoming = iter(range(len(cases)))

    async def runner() -> None:
        for index in upcoming:  # shared: each case taken by one runner, in order
            try:
                done[index].set_result(await judged(cases[index]))
            except Exception as exc:  # a run that raised: the request's answer says so
                done[index].set_exception(exc)

    runners = [asyncio.ensure_future(runner()) for _ in range(min(CASES_AT_ONCE, len(cases)))]
    results: list[EvalTestCase] = []
    try:
        for outcome in done:
            results.append(await outcome)
            if not results[-1].passed and not config.extra.get("run_all_cases"):
                break
    finally:
        for task in runners:
            task.cancel()
        await asyncio.gather(*runners, return_exceptions=True)
        for outcome in done:
            if outcome.done() and not outcome.cancelled():
                outcome.exception()  # retrieved: not logged as never retrieved
    return results


def _within_share(exec_info: dict[str, Any], share: int) -> dict[str, Any]:
    """A case's answer, each step's stdout and stderr cut to their ends past ``share``."""
    for step in ("compile_result", "run_result"):
        result = exec_info.get(step)
        if not isinstance(result, dict):
            continue
        for stream in ("stdout", "stderr"):
            text = result.get(stream)
            if isinstance(text, str):
                result[stream] = truncated(text, share)
    return exec_info


# Each case's output is compared here, in the server: out of the program's reach.
COMMON_OJ = DatasetType(
    "CommonOJDataset", ("code_contests",), _oj_prompt, _oj_submit, forgeable=False
)
