"""SandboxFusion's ``LiveCodeBenchDataset`` on a real ``a2e serve --http``: 48 submissions
(stdin and call-based programs with trailing spaces, blank lines, ``\\r\\n``, floats, ``exit()``,
the names LiveCodeBench's judge takes away, programs that end the judge, that forge its verdict
or read its test cases) judged as SandboxFusion's server judged the same requests
(``tests/live_code_bench_corpus.json``, recorded from SandboxFusion 469de08 on this machine),
but for the programs its harness passes without judging them. Its few-shot prompts, and its
packed test cases read without unpickling them, attacked with pickles that name code."""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2e_engine.engine.service._sandbox_fusion_datasets._literal_pickle import (
    PickleRefused,
    literal_pickle,
    unpacked,
)
from tests.service_process import served_client

CORPUS = json.loads((Path(__file__).parent / "live_code_bench_corpus.json").read_text())
#: Submissions SandboxFusion accepts without judging them: its harness reads the exit status,
#: so a program that ends the judge with status 0, or reads the expected answers from the
#: test file beside it, passes there. Here each is refused.
NOT_JUDGED_THERE = {
    "os_exit_first": "os._exit(0) before printing anything",
    "forge_verdict": "a verdict file written by the program, then os._exit(0)",
    "call_exit_in_method": "sys.exit(0) inside the function judged",
    "call_exit_at_load": "sys.exit(0) as the module loads",
    "call_reads_tests": "the expected outputs read from test_cases.txt",
}


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with served_client("--max-workers", "4") as client:
        yield client


def _submission(row: dict[str, Any], completion: str, **config: Any) -> dict[str, Any]:
    return {
        "dataset": "live_code_bench_v1",
        "id": row["id"],
        "completion": completion,
        "config": {"dataset_type": "LiveCodeBenchDataset", "provided_data": row, **config},
    }


def _packed(value: Any) -> str:
    return base64.b64encode(zlib.compress(pickle.dumps(value))).decode()


def test_verdicts_are_sandbox_fusions_but_where_it_did_not_judge(http: httpx.Client) -> None:
    submissions = CORPUS["submissions"]
    assert set(NOT_JUDGED_THERE) <= {s["name"] for s in submissions}
    with ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda s: http.post("/submit", json=s["request"]), submissions))
    differ = []
    for submission, answer in zip(submissions, answers, strict=True):
        assert answer.status_code == 200, (submission["name"], answer.text)
        wanted = submission["sandboxfusion_accepted"] and submission["name"] not in NOT_JUDGED_THERE
        if answer.json()["accepted"] != wanted:
            differ.append((submission["name"], answer.json()["tests"][0]["exec_info"]))
    assert differ == []
    # SandboxFusion accepts every one of those; the corpus must show it
    assert all(s["sandboxfusion_accepted"] for s in submissions if s["name"] in NOT_JUDGED_THERE)


def test_a_failure_says_which_case_and_why(http: httpx.Client) -> None:
    row = next(s for s in CORPUS["submissions"] if s["name"] == "wrong_second_case")
    answer = http.post("/submit", json=row["request"]).json()
    assert answer["accepted"] is False and answer["extracted_code"].startswith("a, b")
    printed = answer["tests"][0]["exec_info"]["run_result"]["stdout"]
    assert "'expected': '-10\\n'" in printed and "'error_message': 'Wrong Answer'" in printed
    assert answer["tests"][0]["exec_info"]["files"] == {}  # the verdict file is the engine's


def test_a_case_past_its_seconds_is_time_limit_exceeded(http: httpx.Client) -> None:
    row = json.loads(json.dumps(CORPUS["submissions"][0]["request"]["config"]["provided_data"]))
    answer = http.post(
        "/submit", json=_submission(row, "```python\nwhile True:\n    pass\n```", run_timeout=1)
    ).json()
    assert answer["accepted"] is False
    assert "Time Limit Exceeded" in answer["tests"][0]["exec_info"]["run_result"]["stdout"]


def test_few_shot_prompts_are_sandbox_fusions(http: httpx.Client) -> None:
    for recorded in CORPUS["fewshot_prompts"]:
        row = {"id": 7, "content": recorded["content"], "labels": "{}"}
        request = {
            "dataset": "live_code_bench_v1",
            "id": 7,
            "config": {"is_fewshot": True, "provided_data": row},
        }
        answer = http.post("/get_prompt_by_id", json=request)
        assert answer.status_code == 200, answer.text
        assert answer.json()["prompt"] == recorded["prompt"]
    row = {"id": 7, "content": "no question here", "labels": "{}"}
    request = {"dataset": "live_code_bench_v1", "id": 7, "config": {"is_fewshot": True}}
    refused = http.post("/get_prompt_by_id", json={**request, "config": {
        "is_fewshot": True, "provided_data": row}})  # fmt: skip
    assert refused.status_code == 400 and "### Format:" in refused.json()["detail"]


def test_packed_test_cases_that_name_code_are_refused_and_never_run(
    http: httpx.Client, tmp_path: Path
) -> None:
    """A pickle that would run a command in the server (SandboxFusion ``pickle.loads`` it) is
    a 400, and the command never runs."""
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self) -> tuple[Any, tuple[str]]:
            import os

            return os.system, (f"touch {marker}",)

    for hostile in (Payload(), {"input_output": Payload()}):
        row = {"id": 1, "content": "q", "labels": "{}", "test": _packed(hostile)}
        answer = http.post("/submit", json=_submission(row, "print(1)"))
        assert answer.status_code == 400, answer.text
        assert "not plain data" in answer.json()["detail"]
    assert not marker.exists()


def test_literal_pickles_read_as_pickle_reads_them() -> None:
    values = [
        {"input_output": json.dumps({"inputs": ["1 2\n"], "outputs": ["3\n"]})},
        {"a": [1, -(10**30), 2.5, None, True, False, "é" * 300, (1, 2), (1,), (), (1, 2, 3, 4)]},
        list(range(3000)),
        {str(n): "v" for n in range(3000)},
    ]
    for value in values:
        for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
            assert literal_pickle(pickle.dumps(value, protocol=protocol), 1 << 20) == value
    with pytest.raises(PickleRefused, match="SHORT_BINBYTES"):  # JSON cannot write it
        literal_pickle(pickle.dumps(b"bytes", protocol=3), 1 << 20)
    assert unpacked(_packed(values[0]), 1 << 20) == values[0]


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (pickle.dumps({1, 2}), "not plain data (it uses EMPTY_SET)"),
        (pickle.dumps(Path("/")), "not plain data"),
        (b"not a pickle", "not a pickle"),
        (pickle.dumps(["x" * 100] * 1000), "more than 10000 bytes"),
    ],
)
def test_literal_pickles_refuse_what_is_not_plain_data(data: bytes, why: str) -> None:
    with pytest.raises(PickleRefused, match=why.replace("(", r"\(").replace(")", r"\)")):
        literal_pickle(data, 10_000)


def test_a_pickle_that_shares_a_list_is_refused_before_it_grows() -> None:
    """A list of the same list, 60 deep: 400 bytes of pickle, 2**60 items once written out."""
    nested: list[Any] = [1]
    for _ in range(60):
        nested = [nested, nested]
    with pytest.raises(PickleRefused, match="names a list, tuple or dict twice"):
        literal_pickle(pickle.dumps(nested), 1 << 20)


def test_a_zip_bomb_is_refused_at_its_cap() -> None:
    bomb = base64.b64encode(zlib.compress(b"\0" * (64 << 20))).decode()
    with pytest.raises(PickleRefused, match="more than 1048576 bytes once inflated"):
        unpacked(bomb, 1 << 20)


def test_a_program_cannot_read_the_nonce_or_sign_a_verdict(http: httpx.Client) -> None:
    """The nonce's file is gone before the candidate's code runs; a verdict the candidate
    writes with what it guesses, before ending the judge, is not the judge's."""
    row = CORPUS["submissions"][0]["request"]["config"]["provided_data"]
    forge = (
        "import io, json, posix\n"
        "try:\n"
        "    nonce = io.open('lcb-nonce').read()\n"
        "except OSError:\n"
        "    nonce = 'gone'\n"
        "print(nonce)\n"
        "with io.open('lcb-verdict.json', 'w') as f:\n"
        "    f.write(json.dumps({'nonce': nonce, 'passed': True}))\n"
        "posix._exit(0)\n"
    )
    answer = http.post("/submit", json=_submission(row, f"```python\n{forge}\n```")).json()
    assert answer["accepted"] is False
    assert answer["tests"][0]["exec_info"]["run_result"]["return_code"] == 0  # it did end it


def _call_row(name: str, inputs: list[str], outputs: list[str]) -> dict[str, Any]:
    cases = {"inputs": inputs, "outputs": outputs, "fn_name": name}
    return {"id": 3, "content": "q", "labels": "{}", "test": {"input_output": json.dumps(cases)}}


@pytest.mark.parametrize(
    ("name", "code", "accepted"),
    [
        # numpy imported before the judge takes os.putenv away, as theirs imports it
        (
            "numpy",
            "import numpy as np\nprint(int(np.array(input().split(), dtype=int).sum()))",
            True,
        ),
        # the judge's own __future__ flags do not reach the candidate: this fails there
        (
            "annotations",
            "def f(x: Undefined) -> int:\n    return x\nprint(3 if input() else 0)",
            False,
        ),
        # os._exit with a failing status fails, as the judge's own status fails theirs
        ("exit_status", "import os\nprint(3 if input() else 0)\nos._exit(1)", False),
    ],
)
def test_honest_programs_as_sandbox_fusion_judges_them(
    http: httpx.Client, name: str, code: str, accepted: bool
) -> None:
    row = {"id": 2, "content": "q", "labels": "{}", "test": json.dumps(
        {"input_output": json.dumps({"inputs": ["1 2\n"], "outputs": ["3\n"]})})}  # fmt: skip
    answer = http.post("/submit", json=_submission(row, f"```python\n{code}\n```"))
    assert answer.status_code == 200 and answer.json()["accepted"] is accepted, answer.text


def test_a_function_named_code_is_still_a_call(http: httpx.Client) -> None:
    row = _call_row("code", ["1"], ["2"])
    answer = http.post("/submit", json=_submission(row, "def code(x):\n    return x + 1\n"))
    assert answer.json()["accepted"] is True, answer.text


@pytest.mark.parametrize(
    "attack",
    [
        # replaces the builtin the verdict was counted with
        "import builtins\nbuiltins.all = lambda items: True\n",
        # fills the verdict's name it guesses past what a run may fetch, then ends the judge
        "import posix\nwith open('lcb-verdict.json', 'w') as f:\n    f.write('x' * (9 << 20))\n"
        "posix._exit(1)\n",
    ],
)
def test_a_wrong_function_cannot_sign_its_own_pass(http: httpx.Client, attack: str) -> None:
    code = attack + "class Solution:\n    def add(self, a, b):\n        return 999\n"
    answer = http.post("/submit", json=_submission(_call_row("add", ["1\n2"], ["3"]), code))
    assert answer.status_code == 200 and answer.json()["accepted"] is False, answer.text


def test_rows_and_completions_that_cannot_be_written_are_a_400_or_a_verdict(
    http: httpx.Client,
) -> None:
    row = {
        "id": 1,
        "content": "q",
        "labels": "{}",
        "test": _packed({"input_output": "{}", 1.5: b"x"}),
    }
    answer = http.post("/submit", json=_submission(row, "print(1)"))
    assert answer.status_code == 400 and "\n" not in answer.json()["detail"], answer.text
    row = CORPUS["submissions"][0]["request"]["config"]["provided_data"]
    lone = json.dumps(_submission(row, "print('\ud800')"))  # escaped: JSON allows it
    answer = http.post("/submit", content=lone, headers={"content-type": "application/json"})
    assert answer.status_code == 200 and answer.json()["accepted"] is False, answer.text
