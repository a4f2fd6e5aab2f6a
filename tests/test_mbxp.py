"""SandboxFusion's ``MBXPDataset`` (MBXP, HumanEval-DS and OODTest rows) on a real ``a2e serve
--http``: submissions of SandboxFusion's own sample rows, in the languages that run quickly here,
judged as SandboxFusion's server judged the same requests (``tests/mbxp_corpus.json``, recorded
from SandboxFusion 469de08 on this machine): the same ``accepted``, extracted code, program and
extracted type. Its second extraction procedure against SandboxFusion's own on 460 random texts
(``tests/extraction_v2_cases.json``), and the expressions it replaces, attacked with text that
never closes them."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2e_engine.engine.service._sandbox_fusion_extraction_v2 import freeform_code_v2
from tests.service_process import served_client

HERE = Path(__file__).parent
CORPUS = json.loads((HERE / "mbxp_corpus.json").read_text())
EXTRACTIONS = json.loads((HERE / "extraction_v2_cases.json").read_text())
COMPARED = ("accepted", "extracted_code", "full_code", "extracted_type")


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with served_client("--max-workers", "4") as client:
        yield client


def test_submissions_are_judged_as_sandbox_fusion_judged_them(http: httpx.Client) -> None:
    submissions = CORPUS["submissions"]
    with ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda s: http.post("/submit", json=s["request"]), submissions))
    differ = []
    for submission, answer in zip(submissions, answers, strict=True):
        assert answer.status_code == 200, (submission["name"], answer.text)
        got = {key: answer.json()[key] for key in COMPARED}
        if got != submission["sandboxfusion"]:
            differ.append((submission["name"], got, submission["sandboxfusion"]))
    assert differ == []
    verdicts = [s["sandboxfusion"]["accepted"] for s in submissions]
    assert True in verdicts and False in verdicts


def test_extraction_is_sandbox_fusions() -> None:
    cases: list[dict[str, Any]] = EXTRACTIONS["cases"]
    differ = [
        case
        for case in cases
        if list(freeform_code_v2(case["text"], case["lang"], **case["flags"]))
        != [case["code"], case["kind"]]
    ]
    assert differ == []
    assert len({case["kind"] for case in cases}) == 4  # every way code is found, and none


@pytest.mark.parametrize(
    ("language", "text"),
    [
        ("csharp", "public static (" * 50_000),
        ("java", "public static ((" * 50_000),
        ("go", "func main(" * 100_000),
        ("kotlin", "fun main(" * 100_000),
        ("scala", "object A {" * 100_000),
        ("verilog", "module m (a);" * 100_000),
    ],
    ids=["csharp", "java", "go", "kotlin", "scala", "verilog"],
)
def test_text_that_never_closes_is_read_in_one_pass(language: str, text: str) -> None:
    """SandboxFusion's expressions take minutes on these (their lazy ``.*`` is quadratic, C#'s
    and Java's cubic), on the server's event loop; here each takes milliseconds, and a bound
    of seconds tells the two apart on any machine."""
    started = time.process_time()
    freeform_code_v2(
        f"```\n{text}\n```",
        language,
        first_block_only=True,
        exactly_match=False,
        inner_function_only=True,
        no_removal=True,
    )
    assert time.process_time() - started < 10


def test_a_row_that_cannot_be_judged_is_a_400(http: httpx.Client) -> None:
    row = json.loads(json.dumps(CORPUS["submissions"][0]["request"]))
    data = row["config"]["provided_data"]
    data["test"] = json.dumps({"code": "no insertion mark"})
    answer = http.post("/submit", json=row)
    assert answer.status_code == 400 and "#<INSERT>" in answer.json()["detail"]
    row["config"]["extra"] = {"autoeval_extract_code_mode": "best"}
    answer = http.post("/submit", json=row)
    assert answer.status_code == 400 and "autoeval_extract_code_mode" in answer.json()["detail"]


def test_csharp_rows_get_the_verdicts_sandbox_fusions_tests_give(http: httpx.Client) -> None:
    """HumanEval-DS's C# tests assert with ``Debug.Assert``: a wrong answer fails them only
    where a failed assertion ends the program, as under ``dotnet run``."""
    for submission in CORPUS["verdicts_of_its_tests"]["submissions"]:
        answer = http.post("/submit", json=submission["request"])
        assert answer.status_code == 200, answer.text
        assert answer.json()["accepted"] is submission["accepted"], submission["name"]


def _mbxp_row(**labels: Any) -> dict[str, Any]:
    return {
        "id": 1,
        "content": "Add.",
        "labels": {"task_id": "mbxp/1", "execution_language": "python", **labels},
        "test": {"code": "#<INSERT>\nassert x == 1\n"},
    }


def test_its_flags_and_nulls_read_as_sandbox_fusion_reads_them(http: httpx.Client) -> None:
    """``autoeval_wrap_prompt: 1`` wraps (theirs asks ``== True``); a null language is none,
    so a block tagged with any language is kept."""
    config = {"provided_data": _mbxp_row(), "extra": {"autoeval_wrap_prompt": 1}}
    prompt = http.post(
        "/get_prompt_by_id", json={"dataset": "mbxp_v1_en", "id": 1, "config": config}
    )
    assert prompt.json()["prompt"].startswith("Please answer in English"), prompt.text
    row = _mbxp_row(programming_language=None)
    completion = "text\n```python\nx = 1\n```\nmore"
    body = {
        "dataset": "mbxp_v1_en",
        "id": 1,
        "completion": completion,
        "config": {"provided_data": row},
    }
    answer = http.post("/submit", json=body).json()
    assert answer["extracted_code"] == "x = 1" and answer["accepted"] is True, answer


def test_a_listing_cannot_repeat_a_few_shot_text_past_its_bound(http: httpx.Client) -> None:
    """One few-shot text, given once, goes into every row's prompt: 40 rows of an 8 MB one
    would be 320 MB of prompts built before the answer is written."""
    rows = [_mbxp_row() for _ in range(40)]
    extra = {"autoeval_custom_fewshot": {"default": "x" * (1 << 20)}}
    config = {"provided_data": rows, "is_fewshot": True, "extra": extra}
    answer = http.post("/get_prompts", json={"dataset": "mbxp_v1_en", "config": config})
    assert answer.status_code == 400 and "the prompts would hold" in answer.json()["detail"]
    config["provided_data"] = rows[:2]
    assert (
        http.post("/get_prompts", json={"dataset": "mbxp_v1_en", "config": config}).status_code
        == 200
    )


def test_labels_nested_past_what_json_writes_are_a_400(http: httpx.Client) -> None:
    deep: Any = "x"
    for _ in range(300):
        deep = {"d": deep}
    row = {**_mbxp_row(), "labels": {**_mbxp_row()["labels"], "deep": deep}}
    body = {"dataset": "mbxp_v1_en", "id": 1, "config": {"provided_data": row}}
    answer = http.post(
        "/get_prompt_by_id", content=json.dumps(body), headers={"content-type": "application/json"}
    )
    assert answer.status_code == 400 and "\n" not in answer.json()["detail"], answer.text
