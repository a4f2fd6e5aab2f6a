"""``AutoEvalDataset``: the code where the row's test marks ``#<INSERT>`` (or before it), one
run; Jest's report read into ``extra.jest_cases``."""

from __future__ import annotations

import base64
import json
import secrets
from string import Template
from typing import Any

from a2e_engine.engine.service._sandbox_fusion_datasets._base import (
    DatasetType,
    OJError,
    Sandbox,
    asset_files,
    bounded,
    column,
    go_imports_together,
    object_column,
    one_run,
    program_run,
)
from a2e_engine.engine.service._sandbox_fusion_extraction import (
    default_extract_helper,
    remove_entry_points,
)
from a2e_engine.engine.service._sandbox_fusion_oj_types import (
    EvalResult,
    Prompt,
    SubmitRequest,
    TestConfig,
)

_INSERT = "#<INSERT>"
_JEST_REPORT = "jest-report.json"


#: The question's and the answer's headings, by locale.
_AUTOEVAL_HINTS = {"zh": ("问题：", "答案："), "en": ("Question:", "Answer:")}  # noqa: RUF001


def _autoeval_prompt(row: dict[str, Any], dataset: str, config: TestConfig) -> Prompt:
    labels = object_column(row, "labels")
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
    bounded(size, "the prompt")
    return Template(template).safe_substitute(texts)


def _with_tests(code: str, tests: str, repr_code: bool) -> str:
    """SandboxFusion's ``append_test``: the code where the tests mark ``#<INSERT>``, else
    before them, cut at its ``if __name__ ==``."""
    if _INSERT in tests:
        before, after = tests.split(_INSERT)[:2]
        return before + (repr(code) if repr_code else code) + after
    if "if __name__ ==" in code:
        code = code[: code.index("if __name__ ==")]
    return (repr(code) if repr_code else code) + "\n" + tests


async def _autoeval_submit(
    request: SubmitRequest, row: dict[str, Any], sandbox: Sandbox
) -> EvalResult:
    labels, test = object_column(row, "labels"), object_column(row, "test")
    files = asset_files(test)
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
        files["index.html"] = base64.b64encode(code.encode("utf-8", "surrogatepass")).decode()
        program = tests
    else:
        program = _with_tests(code, tests, bool(extra.get("repr_code")))
    if runs_as in ("go", "go_test"):
        program = go_imports_together(program)
    if flag:
        program += f'\n\nprint("{flag}")'
    answer = await sandbox.run(
        program_run(
            program,
            runs_as,
            request.config.compile_timeout or 40,
            request.config.run_timeout or 20,
            files,
            [_JEST_REPORT] if runs_as == "jest" else [],
        )
    )
    result = one_run(request, code, program, answer)
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


AUTOEVAL = DatasetType(
    "AutoEvalDataset",
    (),
    _autoeval_prompt,
    _autoeval_submit,
    ("AutoEvalV4Dataset", "AutoEvalV5Dataset", "AutoEvalV6Dataset"),
)
