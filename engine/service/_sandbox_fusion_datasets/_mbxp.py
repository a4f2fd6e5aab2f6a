"""``MBXPDataset`` (``mbxp_v1_en``, ``mbxp_v2_en``, ``humanevalds_v1_en``, ``humanevalds_v2_en``,
``oodtest_v1_zh``): the code read from a free-form answer by SandboxFusion's second procedure
(``_sandbox_fusion_extraction_v2``), put where the row's test marks ``#<INSERT>``, one run of
30 s in the row's execution language. Then SandboxFusion's two checks after the run: a Python
or C++ program whose code calls ``exit(0)`` is not accepted (its ``antihack``), and a Racket
program whose tests print ``FAILURE`` is not (they exit 0 either way)."""

from __future__ import annotations

import re
from typing import Any

from a2e_engine.engine.service._sandbox_fusion_datasets._base import (
    DatasetType,
    OJError,
    Sandbox,
    asset_files,
    bounded,
    column,
    object_column,
    one_run,
    program_run,
    run_once,
)
from a2e_engine.engine.service._sandbox_fusion_extraction_v2 import freeform_code_v2
from a2e_engine.engine.service._sandbox_fusion_oj_types import (
    EvalResult,
    Prompt,
    SubmitRequest,
    TestConfig,
)

_INSERT = "#<INSERT>"
#: Execution languages whose code SandboxFusion refuses when it calls ``exit(0)``.
_ANTIHACK = frozenset({"python", "cpp"})
_EXIT_ZERO = re.compile(r"exit\(\s*0\s*\)")
#: The question's and answer's headings and the wrapping, by the dataset's locale.
_WORDING = {
    "zh": ("问题：", "答案：", "请用中文回答，并用Markdown格式。####Instruction:"),  # noqa: RUF001
    "en": (
        "Question:",
        "Answer:",
        "Please answer in English with Markdown format. ####Instruction:",
    ),
}


def _prompt(row: dict[str, Any], dataset: str, config: TestConfig) -> Prompt:
    labels = object_column(row, "labels")
    question, context = column(row, "content"), labels.get("docs")
    task = str(column(labels, "task_id"))
    fewshot = None
    if config.is_fewshot:
        custom = config.extra.get("autoeval_custom_fewshot", {})
        if not isinstance(custom, dict):
            raise OJError(400, "config.extra.autoeval_custom_fewshot must be an object")
        kind = task.split("/")[0]
        if kind in custom:
            fewshot = custom[kind]
        elif "default" in custom:
            fewshot = custom["default"]
        elif "fewshot" in labels:
            fewshot = labels["fewshot"]
        else:
            raise OJError(400, f"Missing fewshot of {task}")
    ask, answer, wrap = _WORDING["en" if "_en" in dataset else "zh"]
    wrapped = config.extra.get("autoeval_wrap_prompt") == True  # noqa: E712 - theirs: 1 is
    parts = [str(part) for part in (context, fewshot, question) if part]
    bounded(sum(len(part) for part in parts) + 200, "the prompt")
    if context and fewshot:
        prompt = f"{context}\n\n----------------\n\n{fewshot}\n\n{ask}{question}\n\n{answer}\n"
    elif context:
        if wrapped:
            prompt = f"{context}\n\n{wrap}\n{question}\nResponse:\n"
        else:
            prompt = f"{context}\n\n{ask}{question}\n\n{answer}\n"
    elif fewshot:
        prompt = f"{fewshot}\n\n{ask}{question}\n\n{answer}\n"
    else:
        prompt = f"{wrap}\n{question}\nResponse:\n" if wrapped else question
    return Prompt(id=column(row, "id"), prompt=prompt, labels=labels)


async def _submit(request: SubmitRequest, row: dict[str, Any], sandbox: Sandbox) -> EvalResult:
    labels, test = object_column(row, "labels"), object_column(row, "test")
    files = asset_files(test, drop_nulls=True)
    mode = request.config.extra.get("autoeval_extract_code_mode", "first")
    if mode not in ("first", "all"):
        raise OJError(400, f"Invalid autoeval_extract_code_mode: {mode} (first or all)")
    named = column(labels, "programming_language")
    language = "" if named is None else str(named)  # theirs: None is no language
    runs_as = str(column(labels, "execution_language"))
    inner_only = language == "csharp" or (
        language == "java" and request.dataset.startswith("humanevalds")
    )
    code, found = freeform_code_v2(
        request.completion,
        language,
        first_block_only=mode == "first",
        exactly_match=mode == "first",
        inner_function_only=inner_only,
        no_removal=True,
    )
    tests = column(test, "code")
    if not isinstance(tests, str) or _INSERT not in tests:
        raise OJError(400, f"config.provided_data.test.code must be text that marks {_INSERT}")
    before, after = tests.split(_INSERT, 2)[:2]
    bounded(len(before) + len(code) + len(after), "the program")
    program = before + code + after
    answer = await run_once(
        sandbox, program_run(program, runs_as, 30, 30, files), request.config.extra
    )
    result = one_run(request, code, program, answer)
    refused = runs_as in _ANTIHACK and _EXIT_ZERO.search(code) is not None
    stderr = (answer.run_result and answer.run_result.stderr) or ""
    if refused or (language == "racket" and "FAILURE" in stderr):
        result.accepted = result.tests[0].passed = False
    result.test_code = tests
    result.extracted_type = found  # type: ignore[assignment]
    return result


MBXP = DatasetType(
    "MBXPDataset",
    ("mbxp_v1_en", "humanevalds_v1_en", "oodtest_v1_zh", "humanevalds_v2_en", "mbxp_v2_en"),
    _prompt,
    _submit,
)
