"""SandboxFusion's dataset types, each judged as its class judges a completion (bytedance/
SandboxFusion 469de08, ``sandbox/datasets``), written anew: the prompt a row gives, the program a
completion becomes, how it runs and what the answer says.

- ``CommonOJDataset`` (``code_contests``): stdin/stdout cases, the extracted code run once per
  case (``check_stdio_test_cases_parallel``): ``CASES_AT_ONCE`` at a time, answered in case
  order up to the first that fails (every case with ``extra.run_all_cases``), each judged by
  SandboxFusion's rule (``tools._comparisons``' ``sandboxfusion``). A compiled language compiles
  once for all of them: identical compiles in flight wait for the first (the engine's compile
  cache).
- ``HumanEvalDataset`` and ``MultiPLEDataset``: the prompt, the completion cut at its stop tokens
  (or the code extracted from a free-form answer, ``extra.is_freeform``) and the tests, one run.
- ``MBPPDataset``: the setup code, the code of the completion and its asserts, one run.
- ``AutoEvalDataset``: the code where the row's test marks ``#<INSERT>`` (or before it), one
  run; Jest's report read into ``extra.jest_cases``.
- ``CruxEvalDataset``: the answer between ``[ANSWER]`` and its end put into the assertion
  (``extra.mode``: ``input`` or ``output``), one run; CRUXEval-X's in the language its id
  names.

A dataset reads its rows from ``config.provided_data`` only: the engine keeps no tables. A row
without a column its class reads is a 400 that names it (SandboxFusion's server answers a 500
with the ``KeyError``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from string import Template
from typing import Any

from a2e_engine.engine.service._sandbox_fusion import RunCodeRequest, RunCodeResponse
from a2e_engine.engine.service._sandbox_fusion_extraction import (
    default_extract_helper,
    freeform_code,
    remove_entry_points,
)
from a2e_engine.engine.service._sandbox_fusion_oj_types import (
    EvalResult,
    EvalTestCase,
    Prompt,
    SubmitRequest,
    TestConfig,
)
from a2e_engine.tools._comparisons import compare_outputs
from a2e_engine.tools._judging import MAX_CASES

__all__ = ["CASES_AT_ONCE", "DATASET_TYPES", "DatasetType", "OJError", "Runner", "dataset_type_of"]

#: A submission's cases that run at once (SandboxFusion's ``max_runner_concurrency``).
CASES_AT_ONCE = 3
#: What a passed case's ``test_info`` keeps of each input and output (``truncate_str``).
SHOWN_CHARS = 1000
#: A submission's cases and a listing's rows at most (``code_eval``'s bound on cases).
MAX_ROWS = MAX_CASES
#: What the cases of a submission keep of their programs' output, in all: each case's stdout
#: and stderr keep an equal share of it, their ends (SandboxFusion keeps them whole, and 10,000
#: cases of a program that prints a megabyte would be 20 GB); 8 cases keep all of a run's.
OUTPUT_BUDGET_CHARS = 16 << 20
#: What a program or prompt put together from a row and a completion may hold: one built from
#: small parts can be huge (a template that names the question a thousand times).
MAX_BUILT_CHARS = 8 << 20
#: Stop tokens a row may give.
MAX_STOP_TOKENS = 64

#: Runs one program as ``/run_code`` does; its answer, never an exception.
Runner = Callable[[RunCodeRequest], Awaitable[RunCodeResponse]]


class OJError(Exception):
    """A request the dataset cannot judge: its HTTP status and SandboxFusion's ``detail``."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def program_run(
    code: str,
    language: str,
    compile_s: float,
    run_s: float,
    files: dict[str, str] | None = None,
    fetch_files: list[str] | None = None,
) -> RunCodeRequest:
    """One run as ``/run_code`` takes it, with SandboxFusion's memory limit (none)."""
    return RunCodeRequest.model_validate(
        {
            "code": code,
            "language": language,
            "compile_timeout": compile_s,
            "run_timeout": run_s,
            "files": files or {},
            "fetch_files": fetch_files or [],
        }
    )


def column(row: dict[str, Any], name: str) -> Any:
    try:
        return row[name]
    except KeyError:
        raise OJError(400, f"config.provided_data has no {name!r}") from None


def _require(row: dict[str, Any], *names: str) -> None:
    """The columns SandboxFusion's class reads, present, though this one does not read them."""
    for name in names:
        column(row, name)


def json_column(row: dict[str, Any], name: str) -> Any:
    """A column that may be given as JSON text (SandboxFusion's ``ensure_json``)."""
    value = column(row, name)
    if isinstance(value, str):
        try:
            return json.loads(value, strict=False)
        except (ValueError, RecursionError) as exc:
            raise OJError(400, f"config.provided_data.{name} is not JSON: {exc}") from None
    return value


def _truncated(text: str, length: int = SHOWN_CHARS) -> str:
    """SandboxFusion's ``truncate_str``: past ``length``, its ends around ``...``."""
    if not text or len(text) <= length:
        return text
    keep = (length - 3) // 2
    return text[:keep] + "..." + text[-keep:]


@dataclass(frozen=True)
class DatasetType:
    """One of SandboxFusion's dataset classes: its name (``config.dataset_type``), the dataset
    ids it is registered under, its prompt and its judging."""

    name: str
    dataset_ids: tuple[str, ...]
    prompt: Callable[[dict[str, Any], str, TestConfig], Prompt]
    submit: Callable[[SubmitRequest, dict[str, Any], Runner], Awaitable[EvalResult]]
    #: Other names ``config.dataset_type`` may give it (SandboxFusion declares AutoEval's and
    #: its own tests use them, though its registry never reads them).
    aliases: tuple[str, ...] = ()
    #: The prompts of a list of rows, where they are not each row's ``prompt`` in turn.
    listing: Callable[[list[dict[str, Any]], str, TestConfig], list[Prompt]] | None = None

    def prompts(self, rows: list[dict[str, Any]], dataset: str, config: TestConfig) -> list[Prompt]:
        if self.listing is not None:
            return self.listing(rows, dataset, config)
        return [self.prompt(row, dataset, config) for row in rows]


# -- CommonOJ ---------------------------------------------------------------------------------

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
        raise OJError(400, _NO_CUSTOM_EXTRACTION)
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
        _refuse_sandbox_error(answer)  # raised when the answers reach this case
        info = {"input": dict(case.input), "output": dict(case.output)}
        exec_info = _within_share(answer.wire(), share)
        failed = EvalTestCase(passed=False, exec_info=exec_info, test_info=info)
        if answer.status != "Success" or answer.run_result is None:
            return failed
        got = answer.run_result.stdout or ""
        if not compare_outputs(got, case.output["stdout"], "sandboxfusion", 0):
            return failed
        if not full:
            info = {part: {k: _truncated(v) for k, v in info[part].items()} for part in info}
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
                result[stream] = _truncated(text, share)
    return exec_info


def _bounded(size: int, what: str) -> None:
    """Refuse to put together a text past ``MAX_BUILT_CHARS``, before it is built."""
    if size > MAX_BUILT_CHARS:
        raise OJError(400, f"{what} would hold {size} characters, past {MAX_BUILT_CHARS}")


_NO_CUSTOM_EXTRACTION = (
    "config.custom_extract_logic is not served: it is Python that SandboxFusion runs in its "
    "server, and nothing a client sends runs outside a sandbox here"
)


# -- HumanEval and MultiPL-E ------------------------------------------------------------------

#: ``IMPORT_HELPER``: what SandboxFusion puts before a HumanEval-style program, per language.
_IMPORTS: dict[str, tuple[str, ...]] = {
    "python": (
        "import math", "import re", "import sys", "import copy", "import datetime",
        "import itertools", "import collections", "import heapq", "import statistics",
        "import functools", "import hashlib", "import numpy", "import numpy as np",
        "import string", "from typing import *", "from collections import *",
    ),
    "cpp": (
        "using namespace std;", "#include<optional>", "#include<cassert>", "#include<stdlib.h>",
        "#include<algorithm>", "#include<cmath>", "#include<math.h>", "#include<numeric>",
        "#include<stdio.h>", "#include<vector>", "#include<set>", "#include<map>",
        "#include<queue>", "#include<stack>", "#include<list>", "#include<deque>",
        "#include<boost/any.hpp>", "#include<string>", "#include<climits>", "#include<cstring>",
        "#include<iostream>", "#include<sstream>", "#include<fstream>",
    ),
    "java": (
        "import java.util.*;", "import java.lang.reflect.*;", "import org.javatuples.*;",
        "import java.security.*;", "import java.math.*;", "import java.io.*;",
        "import java.util.stream.*;",
    ),
    "csharp": (
        "using System;", "using System.Numerics;", "using System.Diagnostics;",
        "using System.Collections.Generic;", "using System.Linq;", "using System.Text;",
        "using System.Security.Cryptography;", "using System.Collections.Generic;",
    ),
    "go": ('import ("fmt")',),
    "d": ("import std.array;", "import std.algorithm;"),
}  # fmt: skip
#: ``END_TOKENS``: a pretrain completion ends after the first of these.
_END_TOKENS: dict[str, str] = {
    "julia": "\nend", "lua": "\nend", "ruby": "\nend", "cpp": "\n}", "csharp": "\n}",
    "typescript": "\n}", "perl": "\n}", "r": "\n}", "d": "\n}", "go": "\n}", "js": "\n}",
    "php": "\n}",
}  # fmt: skip
#: HumanEval's Python rows stop at the first line that starts at the margin.
_PYTHON_STOP = r"re:\n(?!\s|\n)(?=.|\n)"
_PYTHON_STOP_RE = re.compile(_PYTHON_STOP[3:].strip())


@dataclass(frozen=True)
class _FunctionSet:
    """What sets HumanEval's class apart from MultiPL-E's: how each registered dataset runs and
    is read, which free-form datasets extract a whole function, and the default language."""

    run_language: dict[str, str]
    extract_language: dict[str, str]
    whole_functions: frozenset[str]
    default_language: str
    python_rows: bool  # rows with ``test`` (HumanEval's own) get Python's stop token
    java_rows: bool  # rows whose language is Java have class Problem renamed Main
    calls_check: frozenset[str]  # datasets whose program ends with check(entry_point)
    java_main: frozenset[str]  # datasets whose class Problem is renamed Main


def _suffixed(prefix: str, pairs: str) -> dict[str, str]:
    return {f"{prefix}{key}": value for key, value in (p.split("=") for p in pairs.split())}


_HUMANEVAL = _FunctionSet(
    run_language={
        **_suffixed(
            "humaneval_",
            "python=python cpp=cpp typescript=typescript bash=bash csharp=csharp go=go_test "
            "java=java lua=lua javascript=nodejs php=php perl=perl racket=racket r=R rust=rust "
            "scala=scala swift=swift ruby=ruby d=D_ut julia=julia",
        ),
        "shadow_humaneval_python": "python",
        "evoeval": "python",
    },
    extract_language={
        **_suffixed(
            "humaneval_",
            "python=python cpp=cpp typescript=typescript bash=bash csharp=csharp go=go "
            "java=java lua=lua js=js php=php perl=perl racket=racket r=r rust=rust "
            "scala=scala swift=swift ruby=ruby d=d julia=julia",
        ),
        "shadow_humaneval_python": "python",
        "evoeval": "python",
    },
    whole_functions=frozenset(
        ["humaneval_form_go", "evoeval"]
        + [
            f"humaneval_{name}"
            for name in [
                "python",
                "typescript",
                "go",
                "perl",
                "racket",
                "lua",
                "julia",
                "d",
                "javascript",
                "php",
                "r",
                "ruby",
            ]
        ]
    ),
    default_language="python",
    python_rows=True,
    java_rows=True,
    calls_check=frozenset({"humaneval_python", "shadow_humaneval_python", "evoeval"}),
    java_main=frozenset({"humaneval_java", "humaneval_form_java"}),
)
_MULTIPLE = _FunctionSet(
    run_language=_suffixed(
        "multiple_",
        "cpp=cpp ts=typescript sh=bash cs=csharp go=go_test java=java lua=lua js=nodejs php=php "
        "pl=perl rkt=racket r=R rs=rust scala=scala swift=swift rb=ruby d=D_ut jl=julia",
    ),
    extract_language=_suffixed(
        "multiple_",
        "cpp=cpp ts=typescript sh=bash cs=csharp go=go java=java lua=lua js=js php=php "
        "pl=perl rkt=racket r=r rs=rust scala=scala swift=swift rb=ruby d=d jl=julia",
    ),
    whole_functions=frozenset(
        f"multiple_{name}"
        for name in ["ts", "go", "pl", "rkt", "lua", "jl", "d", "js", "php", "r", "rb"]
    ),
    default_language="cpp",
    python_rows=False,
    java_rows=False,
    calls_check=frozenset(),
    java_main=frozenset({"multiple_java"}),
)


def _function_prompt(kind: _FunctionSet) -> Callable[[dict[str, Any], str, TestConfig], Prompt]:
    def prompt(row: dict[str, Any], dataset: str, config: TestConfig) -> Prompt:
        text = column(row, "prompt")
        if config.extra.get("is_freeform"):
            language = _extract_language(kind, row, dataset)
            if config.locale == "zh":
                asked = (
                    "请按照docstring的要求补全如上代码，写出完整的代码，代码要用markdown语法包裹。"  # noqa: RUF001
                    "代码不要包含`Main`函数"
                )
            else:
                asked = (
                    "Please complete the above code according to the requirements in the "
                    "docstring. Write the complete code and wrap it in markdown syntax. The code "
                    "should not contain `Main` function."
                )
            text = f"```{language}\n{text}\n```\n\n{asked}"
        labels = {k: v for k, v in row.items() if k != "prompt"}
        task = row.get("task_id", row.get("name"))
        if not isinstance(task, int | str):
            raise OJError(400, "config.provided_data needs a task_id or a name, text or a number")
        return Prompt(id=task, prompt=text, labels=labels)

    return prompt


def _extract_language(kind: _FunctionSet, row: dict[str, Any], dataset: str) -> str:
    language = kind.extract_language.get(dataset, row.get("language") or kind.default_language)
    return str(language).split(".")[0]


def _stop_token_trim(text: str, stop_tokens: Any) -> str:
    """The text cut at each stop token (but a blank line). A token given as a regular
    expression (``re:``) is refused but for the one SandboxFusion gives HumanEval's Python rows
    itself: a client's expression would run in the server, where one can take hours."""
    if not isinstance(stop_tokens, list | None):
        raise OJError(400, "config.provided_data.stop_tokens must be a list of text")
    tokens = list(dict.fromkeys(t for t in stop_tokens or () if isinstance(t, str)))
    if len(tokens) > MAX_STOP_TOKENS:
        raise OJError(400, f"at most {MAX_STOP_TOKENS} stop tokens, got {len(tokens)}")
    for token in tokens:
        if token == "\n\n":
            continue
        if token == _PYTHON_STOP:
            found = _PYTHON_STOP_RE.search(text)
            if found:
                text = text[: found.start()]
        elif token.startswith("re:"):
            raise OJError(400, f"stop token {token!r}: regular expressions are not served")
        elif (index := text.find(token)) != -1:
            text = text[:index]
    return text


def _remove_main(code: str, language: str) -> str:
    token = {"d": "void main", "csharp": "public static void Main"}.get(language)
    if token and (index := code.find(token)) != -1:
        code = code[:index]
    return code


def _go_imports_together(code: str) -> str:
    """SandboxFusion's ``postprocess_full_code`` for Go: one package line each and every import
    gathered at the top."""
    packages = set(re.findall(r"package\s+(\w+)", code))
    code = re.sub(r"package\s+(\w+)", "", code)
    single = re.findall(r'import\s+("\w+")', code)
    grouped = [line.strip() for block in _grouped_imports(code)[0] for line in block.split("\n")]
    imports = set(single + grouped) - {""}
    # SandboxFusion takes the groups out once the single imports are gone, which may join a
    # new group: read them again, as it does.
    code = _grouped_imports(re.sub(r'import\s+("\w+")', "", code))[1]
    header = "\n".join(f"package {p}" for p in packages)
    return header + "\n\n" + "\n".join(f"import {i}" for i in imports) + "\n\n" + code


_IMPORT_GROUP = re.compile(r"import\s+\(")


def _grouped_imports(code: str) -> tuple[list[str], str]:
    """What SandboxFusion's expression for Go's grouped imports finds in ``code`` (``import``,
    whitespace, the shortest text in parentheses), and ``code`` without them, in one pass: the
    expression takes time quadratic in groups that never close."""
    blocks: list[str] = []
    kept: list[str] = []
    at = 0
    for opening in _IMPORT_GROUP.finditer(code):
        if opening.start() < at:
            continue  # inside the group before it
        close = code.find(")", opening.end())
        if close == -1:
            break  # no later group closes either
        blocks.append(code[opening.end() : close])
        kept.append(code[at : opening.start()])
        at = close + 1
    kept.append(code[at:])
    return blocks, "".join(kept)


def _function_submit(
    kind: _FunctionSet,
) -> Callable[[SubmitRequest, dict[str, Any], Runner], Awaitable[EvalResult]]:
    prompt_of = _function_prompt(kind)

    async def submit(request: SubmitRequest, row: dict[str, Any], run: Runner) -> EvalResult:
        dataset, config = request.dataset, request.config
        row = dict(row)
        if kind.python_rows and "tests" not in row:
            row.update(tests=column(row, "test"), language="python", stop_tokens=[_PYTHON_STOP])
        tests = str(column(row, "tests"))
        language = _extract_language(kind, row, dataset)
        completion = request.completion
        if config.extra.get("is_freeform"):
            row_language = row.get("language")
            if dataset in kind.whole_functions or row_language in ("go", "go_test"):
                completion = _remove_main(default_extract_helper(completion, language), language)
            else:
                completion = freeform_code(completion, language, first_block_only=True)[0]
                completion = _stop_token_trim(completion, row.get("stop_tokens"))
                completion = _remove_main(completion, language)
            program = f"{completion}\n{tests}"
        else:
            completion = _stop_token_trim(completion, row.get("stop_tokens"))
            end = _END_TOKENS.get(language)
            if end and (index := completion.find(end)) != -1:
                completion = completion[:index] + end
            program = f"{prompt_of(row, dataset, config).prompt}\n{completion}\n{tests}"
        program = "\n".join(_IMPORTS.get(language, ())) + "\n" + program
        if dataset in kind.calls_check:
            program += f"\ncheck({column(row, 'entry_point')})"
        if dataset in kind.java_main or (kind.java_rows and row.get("language") == "java"):
            program = program.replace("class Problem", "class Main")
        if language == "go":
            program = _go_imports_together(program)
        run_timeout = config.run_timeout
        if run_timeout is None and dataset == "bigcodebench":
            run_timeout = 60  # its tests are long
        answer = await run(
            program_run(
                program,
                kind.run_language.get(dataset, language),
                config.compile_timeout or 20,
                run_timeout or 20,
            )
        )
        return _one_run(request, completion, program, answer)

    return submit


def _one_run(
    request: SubmitRequest, extracted: str, program: str, answer: RunCodeResponse
) -> EvalResult:
    """A dataset judged by one run: accepted when it exits 0 in time."""
    _refuse_sandbox_error(answer)
    accepted = answer.status == "Success"
    return EvalResult(
        id=request.id,
        accepted=accepted,
        extracted_code=extracted,
        full_code=program,
        tests=[EvalTestCase(passed=accepted, exec_info=answer.wire())],
    )


def _refuse_sandbox_error(answer: RunCodeResponse) -> None:
    """A run the sandbox could not make is no verdict: a 500, as SandboxFusion answers it."""
    if answer.status == "SandboxError":
        raise OJError(500, f"failed to request sandbox: {answer.message}")


# -- MBPP -------------------------------------------------------------------------------------

_MBPP_SHOTS = (
    "You are an expert Python programmer, and here is your task: Write a function to find the "
    "similar elements from the given two tuple lists. Your code should pass these tests:\n\n"
    "assert similar_elements((3, 4, 5, 6),(5, 7, 4, 10)) == (4, 5)\n"
    "assert similar_elements((1, 2, 3, 4),(5, 4, 3, 7)) == (3, 4)\n"
    "assert similar_elements((11, 12, 14, 13),(17, 15, 14, 13)) == (13, 14)\n"
    "[BEGIN]\ndef similar_elements(test_tup1, test_tup2):\r\n"
    "  res = tuple(set(test_tup1) & set(test_tup2))\r\n  return (res)\n[DONE]",
    "You are an expert Python programmer, and here is your task: Write a python function to "
    "identify non-prime numbers. Your code should pass these tests:\n\n"
    "assert is_not_prime(2) == False\nassert is_not_prime(10) == True\n"
    "assert is_not_prime(35) == True\n"
    "[BEGIN]\nimport math\r\ndef is_not_prime(n):\r\n    result = False\r\n"
    "    for i in range(2,int(math.sqrt(n)) + 1):\r\n        if n % i == 0:\r\n"
    "            result = True\r\n    return result\n[DONE]",
    "You are an expert Python programmer, and here is your task: Write a function to find the "
    "largest integers from a given list of numbers using heap queue algorithm. Your code should "
    "pass these tests:\n\n"
    "assert heap_queue_largest( [25, 35, 22, 85, 14, 65, 75, 22, 58],3)==[85, 75, 65] \n"
    "assert heap_queue_largest( [25, 35, 22, 85, 14, 65, 75, 22, 58],2)==[85, 75]\n"
    "assert heap_queue_largest( [25, 35, 22, 85, 14, 65, 75, 22, 58],5)==[85, 75, 65, 58, 35]\n"
    "[BEGIN]\nimport heapq as hq\r\ndef heap_queue_largest(nums,n):\r\n"
    "  largest_nums = hq.nlargest(n, nums)\r\n  return largest_nums\n[DONE]",
)
_MBPP_TASK = "You are an expert Python programmer, and here is your task: {content} Your code should pass these tests:\n\n"  # noqa: E501


def _mbpp_row(row: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    labels, tests = json_column(row, "labels"), json_column(row, "test_list")
    if not isinstance(labels, dict):
        raise OJError(400, "config.provided_data.labels must be an object")
    if not isinstance(tests, list) or not all(isinstance(t, str) for t in tests):
        raise OJError(400, "config.provided_data.test_list must be a list of asserts")
    return labels, tests


def _mbpp_prompt(row: dict[str, Any], dataset: str, config: TestConfig) -> Prompt:
    labels, tests = _mbpp_row(row)
    task = _MBPP_TASK.format(content=column(row, "content"))
    if config.is_fewshot:
        if len(tests) < 2:
            raise OJError(400, "a few-shot MBPP prompt shows two tests: test_list has fewer")
        prompt = "\n".join([*_MBPP_SHOTS, f"{task}{tests[0]}\n{tests[1]}\n[BEGIN]\n"])
    else:
        prompt = task + "\n".join(tests)
    return Prompt(id=column(row, "id"), prompt=prompt, labels=labels)


async def _mbpp_submit(request: SubmitRequest, row: dict[str, Any], run: Runner) -> EvalResult:
    labels, tests = _mbpp_row(row)
    _require(row, "id", "content")
    setup = labels.get("test_setup_code")
    if not isinstance(setup, str):
        raise OJError(400, "config.provided_data.labels has no test_setup_code")
    completion = request.completion
    if "[DONE]" in completion:
        completion = completion[: completion.index("[DONE]")]
    completion = freeform_code(completion, "python", first_block_only=True)[0]
    for stop in ("\nassert", '\n"""'):
        if (index := completion.find(stop)) != -1:
            completion = completion[:index]
    code = setup + "\n" + completion
    if "if __name__ ==" in code:
        code = code[: code.index("if __name__ ==")]
    chosen = tests[-1:] if request.config.is_fewshot else tests
    program = code + "".join(f"\n{test}\n" for test in chosen)
    answer = await run(program_run(program, "python", 10, request.config.run_timeout or 20))
    return _one_run(request, code, program, answer)


# -- AutoEval ---------------------------------------------------------------------------------

_INSERT = "#<INSERT>"
_JEST_REPORT = "jest-report.json"


#: The question's and the answer's headings, by locale.
_AUTOEVAL_HINTS = {"zh": ("问题：", "答案："), "en": ("Question:", "Answer:")}  # noqa: RUF001


def _autoeval_prompt(row: dict[str, Any], dataset: str, config: TestConfig) -> Prompt:
    labels = _object_column(row, "labels")
    question, extra = column(row, "content"), config.extra
    context = extra.get("context", labels.get("context"))
    fewshot = extra.get("fewshot", labels.get("fewshot")) if config.is_fewshot else None
    template = extra.get("prompt_template", labels.get("prompt_template"))
    if config.is_fewshot and fewshot is None:
        raise OJError(400, f"Missing fewshot for id {column(row, 'id')}")
    if template:
        values = {
            "question": question, "fewshot": fewshot or "", "context": context or "",
            "locale": config.locale,
        }  # fmt: skip
        prompt = _substituted(str(template), values)
    elif context or fewshot:
        hints = _AUTOEVAL_HINTS.get(config.locale or "")
        if hints is None:
            raise OJError(400, "config.locale must be en or zh for a prompt with a context")
        ask, answer = hints
        if context and fewshot:
            prompt = f"{context}\n\n----------------\n\n{fewshot}\n\n{ask}{question}\n\n{answer}\n"
        else:
            prompt = f"{context or fewshot}\n\n{ask}{question}\n\n{answer}\n"
    else:
        prompt = question
    return Prompt(id=column(row, "id"), prompt=prompt, labels=labels)


def _substituted(template: str, values: dict[str, Any]) -> str:
    """``Template(template).safe_substitute(values)``, refused when the prompt would be huge:
    a template may name a long question many times."""
    texts = {name: str(value) for name, value in values.items()}
    size = len(template)
    for found in Template.pattern.finditer(template):
        named = found.group("named") or found.group("braced")
        size += len(texts.get(named, "")) if named in texts else 0
    _bounded(size, "the prompt")
    return Template(template).safe_substitute(texts)


def _object_column(row: dict[str, Any], name: str) -> dict[str, Any]:
    value = json_column(row, name)
    if not isinstance(value, dict):
        raise OJError(400, f"config.provided_data.{name} must be an object")
    return value


def _with_tests(code: str, tests: str, repr_code: bool) -> str:
    """SandboxFusion's ``append_test``: the code where the tests mark ``#<INSERT>``, else
    before them, cut at its ``if __name__ ==``."""
    if _INSERT in tests:
        before, after = tests.split(_INSERT)[:2]
        return before + (repr(code) if repr_code else code) + after
    if "if __name__ ==" in code:
        code = code[: code.index("if __name__ ==")]
    return (repr(code) if repr_code else code) + "\n" + tests


async def _autoeval_submit(request: SubmitRequest, row: dict[str, Any], run: Runner) -> EvalResult:
    labels, test = _object_column(row, "labels"), _object_column(row, "test")
    asset = test.get("asset")
    if isinstance(asset, str):
        asset = json_column(test, "asset")
    files = dict(asset) if isinstance(asset, dict) else {}
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise OJError(400, "config.provided_data.test.asset must map file names to base64")
    language = str(column(labels, "programming_language"))
    runs_as = str(labels.get("execution_language", language))
    if language == "java":
        raise OJError(
            400,
            "AutoEvalDataset's Java rows (JUnit over NaturalCodeBench's assets) are not served yet",
        )
    extra = request.config.extra
    flag = secrets.token_hex(10) if extra.get("append_flag") and runs_as == "python" else None
    code = remove_entry_points(default_extract_helper(request.completion, language), language)
    tests = str(column(test, "code"))
    if language == "html" and _INSERT not in tests:
        files["index.html"] = base64.b64encode(code.encode()).decode()
        program = tests
    else:
        program = _with_tests(code, tests, bool(extra.get("repr_code")))
    if runs_as in ("go", "go_test"):
        program = _go_imports_together(program)
    if flag:
        program += f'\n\nprint("{flag}")'
    answer = await run(
        program_run(
            program,
            runs_as,
            request.config.compile_timeout or 40,
            request.config.run_timeout or 20,
            files,
            [_JEST_REPORT] if runs_as == "jest" else [],
        )
    )
    result = _one_run(request, code, program, answer)
    if flag and flag not in ((answer.run_result and answer.run_result.stdout) or ""):
        result.accepted = result.tests[0].passed = False
    result.extra = {}
    if runs_as == "jest" and _JEST_REPORT in answer.files:
        result.extra["jest_cases"] = _jest_cases(answer.files[_JEST_REPORT])
    return result


def _jest_cases(report: str) -> list[dict[str, Any]]:
    """Each test of Jest's JSON report, as SandboxFusion's ``parse_jest_cases`` lists it: its
    reporter writes a suite's tests as ``testResults`` under ``testFilePath``, Jest's own
    ``--json`` as ``assertionResults`` under ``name``."""
    try:
        suites = json.loads(base64.b64decode(report))["testResults"]
        return [
            {
                "passed": case["status"] == "passed",
                "full_name": case["fullName"],
                "file": suite.get("testFilePath", suite.get("name")),
                "suite": " > ".join(case["ancestorTitles"]),
                "test": case["title"],
                "failure_messages": case["failureMessages"],
            }
            for suite in suites
            for case in suite.get("testResults", suite.get("assertionResults", []))
        ]
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise OJError(500, f"jest's report could not be read: {type(exc).__name__}") from None


# -- CRUXEval --------------------------------------------------------------------------------

#: CRUXEval-X: how each language's test calls the function, ``????`` its input (by the
#: language of the row's id, ``<language>_<n>``: SandboxFusion's names, as it runs them).
_CRUX_CALLS = {
    "cpp": "candidate(????)", "csharp": "F(????)", "D_ut": "candidate(????)",
    "go_test": "candidate(????)", "java": "f(????)", "julia": "candidate(????)",
    "nodejs": "candidate(????)", "lua": "candidate(????)", "php": "candidate(????)",
    "python": "candidate(????)", "perl": "$candidate->(????)", "R": "candidate(????)",
    "ruby": "candidate.call(????)", "racket": "(candidate ????)", "rust": "candidate(????)",
    "scala": "f(????)", "bash": "$(candidate ????)", "swift": "f(????)",
    "typescript": "candidate(????)",
}  # fmt: skip
_CRUX_OUTPUT = """You are given a Python function and an assertion containing an input to the function. Complete the assertion with a literal (no unsimplified expressions, no function calls) containing the output when executing the provided code on the given input, even if the function is incorrect or incomplete. Do NOT output any extra information. Provide the full assertion with the correct output in [ANSWER] and [/ANSWER] tags, following the examples.

[PYTHON]
def f(n):
    return n
assert f(17) == ??
[/PYTHON]
[ANSWER]
assert f(17) == 17
[/ANSWER]

[PYTHON]
def f(s):
    return s + "a"
assert f("x9j") == ??
[/PYTHON]
[ANSWER]
assert f("x9j") == "x9ja"
[/ANSWER]

[PYTHON]
{code}
assert f({given}) == ??
[/PYTHON]
[ANSWER]
"""  # noqa: E501
_CRUX_INPUT = """You will be given a function f and an output in the form f(??) == output. Find any input such that executing f on the input leads to the given output. There may be multiple answers, but you should only output one. In [ANSWER] and [/ANSWER] tags, complete the assertion with one such input that will produce the output when executing the function.

[PYTHON]
def f(my_list):
    count = 0
    for i in my_list:
        if len(i) % 2 == 0:
            count += 1
    return count
assert f(??) == 3
[/PYTHON]
[ANSWER]
assert f(["mq", "px", "zy"]) == 3
[/ANSWER]

[PYTHON]
def f(s1, s2):
    return s1 + s2
assert f(??) == "banana"
[/PYTHON]
[ANSWER]
assert f("ba", "nana") == "banana"
[/ANSWER]

[PYTHON]
{code}
assert f(??) == {expected}
[/PYTHON]
[ANSWER]
"""  # noqa: E501
_CRUX_WRAP = "Please respond in English and use Markdown format.####Instruction:\n{}\nResponse:\n"


def _crux_row(row: dict[str, Any]) -> dict[str, str]:
    read = {name: column(row, name) for name in ("id", "input", "output", "code")}
    if not all(isinstance(read[name], str) for name in ("input", "output", "code")):
        raise OJError(400, "config.provided_data's input, output and code must be text")
    return read


def _crux_prompt(row: dict[str, Any], dataset: str, config: TestConfig) -> Prompt:
    """A row's prompt in ``extra.mode`` (``output`` unless it says ``input``), as
    SandboxFusion's ``get_prompt_by_id`` gives it for either dataset."""
    read, extra = _crux_row(row), config.extra
    if extra.get("use_cot") or extra.get("phind_output"):
        raise OJError(400, "CRUXEval's use_cot and phind_output prompts are not served")
    mode = extra.get("mode", "output")
    if mode == "input":
        text = _CRUX_INPUT.format(code=read["code"], expected=read["output"])
    else:
        text = _CRUX_OUTPUT.format(code=read["code"], given=read["input"])
    if extra.get("coding_wrap_prompt") is True:
        text = _CRUX_WRAP.format(text)
    return Prompt(id=read["id"], prompt=text, labels={"mode": mode})


def _crux_prompts(rows: list[dict[str, Any]], dataset: str, config: TestConfig) -> list[Prompt]:
    """The rows' prompts in ``extra.mode``; without one, every row's input prompt, then every
    row's output prompt."""
    if dataset == "cruxeval_x":
        raise OJError(400, "CRUXEval-X's prompts (its examples per language) are not served")
    modes = [config.extra["mode"]] if config.extra.get("mode") else ["input", "output"]
    return [
        _crux_prompt(row, dataset, config.model_copy(update={"extra": {**config.extra, "mode": m}}))
        for m in modes
        for row in rows
    ]


async def _crux_submit(request: SubmitRequest, row: dict[str, Any], run: Runner) -> EvalResult:
    read, mode = _crux_row(row), request.config.extra.get("mode")
    if mode not in ("input", "output"):
        raise OJError(400, "CRUXEval needs config.extra.mode: input or output")
    answer = request.completion
    for stop in ("# done", "[/ANSWER]"):
        answer = answer.split(stop)[0]
    if "[ANSWER]" in answer:
        answer = answer.split("[ANSWER]")[1].strip()
    code = read["code"]
    if request.dataset == "cruxeval_x":
        language = "_".join(str(read["id"]).split("_")[:-1])
        call = _CRUX_CALLS.get(language)
        if call is None:
            raise OJError(400, f"CRUXEval-X has no language {language!r} (the id's prefix)")
        if mode == "input":
            if call[: call.index("????")] not in answer:
                answer = call.replace("????", answer)
            _bounded(len(read["input"]) + read["input"].count(call) * len(answer), "the test")
            answer = read["input"].replace(call, answer)
        else:
            _bounded(len(read["output"]) + read["output"].count("????") * len(answer), "the test")
            answer = read["output"].replace("????", answer)
        program = code + answer
    else:
        language = "python"
        if "assert f" in answer:
            answer = "f" + answer.split("assert f")[1].strip()
        if mode == "input":
            if "==" in answer:
                answer = answer.split("==")[0].strip()
            program = f"{code}\nassert {answer} == {read['output']}"
        else:
            if "==" in answer:
                answer = answer.split("==")[1].strip()
            program = f"{code}\nassert {answer} == f({read['input']})"
    return _one_run(request, answer, program, await run(program_run(program, language, 30, 30)))


DATASET_TYPES: dict[str, DatasetType] = {
    kind.name: kind
    for kind in (
        DatasetType("CommonOJDataset", ("code_contests",), _oj_prompt, _oj_submit),
        DatasetType(
            "MultiPLEDataset",
            tuple(_MULTIPLE.run_language),
            _function_prompt(_MULTIPLE),
            _function_submit(_MULTIPLE),
        ),
        DatasetType(
            "HumanEvalDataset",
            (
                *(
                    f"humaneval_{n}"
                    for n in ["python", "cpp", "typescript", "bash", "csharp", "go", "java"]
                ),
                "shadow_humaneval_python",
                "bigcodebench",
            ),
            _function_prompt(_HUMANEVAL),
            _function_submit(_HUMANEVAL),
        ),
        DatasetType("MBPPDataset", ("mbpp",), _mbpp_prompt, _mbpp_submit),
        DatasetType(
            "CruxEvalDataset",
            ("cruxeval", "cruxeval_x"),
            _crux_prompt,
            _crux_submit,
            listing=_crux_prompts,
        ),
        DatasetType(
            "AutoEvalDataset",
            (),
            _autoeval_prompt,
            _autoeval_submit,
            ("AutoEvalV4Dataset", "AutoEvalV5Dataset", "AutoEvalV6Dataset"),
        ),
    )
}


def dataset_type_of(dataset: str, config: TestConfig) -> DatasetType:
    """A registered dataset id's class, else ``config.dataset_type``'s, as SandboxFusion picks."""
    for kind in DATASET_TYPES.values():
        if dataset in kind.dataset_ids:
            return kind
    if config.dataset_type is None:
        raise OJError(400, f"no eval class found for dataset {dataset}")
    named = next(
        (k for k in DATASET_TYPES.values() if config.dataset_type in (k.name, *k.aliases)), None
    )
    if named is None:
        served = ", ".join(DATASET_TYPES)
        raise OJError(400, f"eval class {config.dataset_type} not found (served: {served})")
    return named
