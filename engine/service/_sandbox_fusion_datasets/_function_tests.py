"""``HumanEvalDataset`` and ``MultiPLEDataset``: the prompt, the completion cut at its stop
tokens (or the code extracted from a free-form answer, ``extra.is_freeform``) and the tests,
one run."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from a2e_engine.engine.service._sandbox_fusion_datasets._base import (
    MAX_STOP_TOKENS,
    DatasetType,
    OJError,
    Sandbox,
    column,
    go_imports_together,
    one_run,
    program_run,
    run_once,
)
from a2e_engine.engine.service._sandbox_fusion_extraction import (
    default_extract_helper,
    freeform_code,
)
from a2e_engine.engine.service._sandbox_fusion_oj_types import (
    EvalResult,
    Prompt,
    SubmitRequest,
    TestConfig,
)

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


def _function_submit(
    kind: _FunctionSet,
) -> Callable[[SubmitRequest, dict[str, Any], Sandbox], Awaitable[EvalResult]]:
    prompt_of = _function_prompt(kind)

    async def submit(request: SubmitRequest, row: dict[str, Any], sandbox: Sandbox) -> EvalResult:
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
            program = go_imports_together(program)
        run_timeout = config.run_timeout
        if run_timeout is None and dataset == "bigcodebench":
            run_timeout = 60  # its tests are long
        answer = await run_once(
            sandbox,
            program_run(
                program,
                kind.run_language.get(dataset, language),
                config.compile_timeout or 20,
                run_timeout or 20,
            ),
            config.extra,
        )
        return one_run(request, completion, program, answer)

    return submit


MULTIPLE = DatasetType(
    "MultiPLEDataset",
    tuple(_MULTIPLE.run_language),
    _function_prompt(_MULTIPLE),
    _function_submit(_MULTIPLE),
)
HUMANEVAL = DatasetType(
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
)
