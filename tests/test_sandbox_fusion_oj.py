"""SandboxFusion's online-judge API (``/submit``, ``/get_prompts``, ``/get_prompt_by_id``,
``/list_ids``, ``/list_datasets``) on a real ``a2e serve --http``, driven by SandboxFusion's own
client (``sandbox-fusion`` 0.3.7) and by httpx.

The answers it must give are SandboxFusion's: those written out here were its server's
(bytedance/SandboxFusion 469de08, run on this machine with the same requests), its rules read
from its ``sandbox/datasets`` and ``sandbox/utils``. SandboxFusion's own dataset tests that give
their rows in the request (``test_provided_data.py``, ``test_humaneval_python.py``,
``test_autoeval.py``, ``test_multiple.py``) also pass against this server; docs/service.md says
how they were run.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.service_process import ServiceProcess
from tests.waiting import wait_for

TOKEN = "oj-tests-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
READ = "a, b = map(int, input().split())\n"
ADD_CASES = [
    {"input": {"stdin": "1 2\n"}, "output": {"stdout": "3\n"}},
    {"input": {"stdin": "10 20\n"}, "output": {"stdout": "30\n"}},
]


@pytest.fixture(scope="module")
def service() -> Iterator[ServiceProcess]:
    server = ServiceProcess("--token", TOKEN, "--max-workers", "6")
    yield server
    assert server.stop() == 0


@pytest.fixture()
def http(service: ServiceProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url, headers=AUTH, timeout=120) as client:
        yield client


def _oj(completion: str, cases: Any, language: str = "python", **config: Any) -> dict[str, Any]:
    """A CommonOJ submission of an unnamed dataset, as SandboxFusion's docs give one."""
    return {
        "dataset": "my_oj",
        "id": "ab1",
        "completion": completion,
        "config": {
            "dataset_type": "CommonOJDataset",
            "language": language,
            "provided_data": {"id": "ab1", "content": "Compute a+b.", "labels": {}, "test": cases},
            **config,
        },
    }


def _passed(answer: dict[str, Any]) -> list[bool]:
    return [test["passed"] for test in answer["tests"]]


def test_sandbox_fusions_client_submits_a_problem_with_its_cases(service: ServiceProcess) -> None:
    """``sandbox_fusion.submit``, as a harness calls it: SandboxFusion's own answers to these
    requests were ``accepted`` true with both cases passed, then false with the second failed."""
    import sandbox_fusion

    endpoint = f"{service.url}/t/{TOKEN}"
    right = "Here is my solution:\n```python\n" + READ + "print(a + b)\n```\n"
    request = sandbox_fusion.SubmitRequest(**_oj(right, ADD_CASES))
    answer = sandbox_fusion.submit(request, endpoint=endpoint, max_attempts=1)
    assert answer.accepted and [t.passed for t in answer.tests] == [True, True]
    assert answer.extracted_code == READ + "print(a + b)"
    assert answer.id == "ab1" and answer.full_code is None and answer.extracted_type is None
    run = answer.tests[1].exec_info
    assert run.status == sandbox_fusion.RunStatus.Success and run.run_result is not None
    assert run.run_result.stdout == "30\n"
    assert answer.tests[0].test_info == ADD_CASES[0]
    # A registered dataset id picks its class; its rows' JSON columns may come as text.
    wrong = "```python\n" + READ + "print(a * b + 1)\n```"
    row = {"id": 7, "content": "Compute a+b.", "labels": "{}", "test": json.dumps(ADD_CASES)}
    request = sandbox_fusion.SubmitRequest(
        dataset="code_contests",
        id=7,
        completion=wrong,
        config=sandbox_fusion.TestConfig(language="python", provided_data=row),
    )
    answer = sandbox_fusion.submit(request, endpoint=endpoint, max_attempts=1)
    assert not answer.accepted and [t.passed for t in answer.tests] == [True, False]
    assert answer.tests[1].exec_info.run_result.stdout == "201\n"
    refused = sandbox_fusion.SubmitRequest(dataset="nowhere", id=1, completion="", config={})
    with pytest.raises(Exception, match="no eval class found for dataset nowhere"):
        sandbox_fusion.submit(refused, endpoint=endpoint, max_attempts=1)


def test_each_case_is_judged_by_sandbox_fusions_rule(http: httpx.Client) -> None:
    """Lines compared without case and surrounding blanks, floats to 1e-5 relative, line counts
    equal (SandboxFusion's own answers: passed, passed, failed); every case with
    ``run_all_cases``; a passed case's long input cut to 1000 characters, a failed one's kept."""
    program = (
        "```python\nt = input()\n"
        "print({'a': 'YES  ', 'b': '0.3333333', 'c': '1\\n\\n2'}.get(t, t[:5]))\n```"
    )
    long_input = "x" * 3000
    cases = [
        {"input": {"stdin": "a"}, "output": {"stdout": "yes\n"}},
        {"input": {"stdin": "b"}, "output": {"stdout": "0.333333333"}},
        {"input": {"stdin": "c"}, "output": {"stdout": "1\n2\n"}},
        {"input": {"stdin": long_input}, "output": {"stdout": "xxxxx"}},
        {"input": {"stdin": long_input}, "output": {"stdout": "y" * 1200}},
    ]
    answer = http.post("/submit", json=_oj(program, cases, extra={"run_all_cases": True})).json()
    assert _passed(answer) == [True, True, False, True, False] and not answer["accepted"]
    shown = answer["tests"][3]["test_info"]["input"]["stdin"]
    assert shown == "x" * 498 + "..." + "x" * 498
    assert answer["tests"][4]["test_info"]["output"]["stdout"] == "y" * 1200
    whole = http.post(
        "/submit", json=_oj(program, cases[3:4], extra={"return_full_case": True})
    ).json()
    assert whole["tests"][0]["test_info"]["input"]["stdin"] == long_input


def test_a_submission_stops_at_its_first_failing_case(
    http: httpx.Client, service: ServiceProcess
) -> None:
    """The cases after the first that fails are not waited for: their runs (a program that
    loops forever here) are ended, workers and all, and the answer lists the cases up to it."""
    program = (
        "```python\nif input() == 'stop':\n    print('wrong')\nelse:\n    while True: pass\n```"
    )
    cases = [{"input": {"stdin": "stop"}, "output": {"stdout": "right"}}] + [
        {"input": {"stdin": "loop"}, "output": {"stdout": "right"}}
    ] * 5
    started = time.monotonic()
    answer = http.post("/submit", json=_oj(program, cases, run_timeout=30)).json()
    assert time.monotonic() - started < 20, "the answer waited for the looping cases"
    assert _passed(answer) == [False] and not answer["accepted"]
    assert answer["tests"][0]["exec_info"]["run_result"]["stdout"] == "wrong\n"
    ready = lambda: http.get("/readyz").json()["calls_running"] == 0  # noqa: E731
    assert wait_for(ready, 10), "a looping case's call still runs"
    everything = http.post(
        "/submit", json=_oj(program, cases[:3], run_timeout=1, extra={"run_all_cases": True})
    ).json()
    statuses = [t["exec_info"]["run_result"]["status"] for t in everything["tests"]]
    assert statuses == ["Finished", "TimeLimitExceeded", "TimeLimitExceeded"]


def test_a_compiled_submission_compiles_once_for_all_its_cases(http: httpx.Client) -> None:
    """Its cases run side by side, and identical compiles in flight wait for the first: one
    case's compile is made, the others' come from the cache."""
    unique = time.time_ns()  # a program no earlier test compiled
    program = (
        f"```cpp\n#include <bits/stdc++.h>\n// {unique}\n"
        "int main() { long a, b; std::cin >> a >> b; std::cout << a + b << std::endl; }\n```"
    )
    cases = [
        {"input": {"stdin": f"{i} {i}\n"}, "output": {"stdout": f"{2 * i}\n"}} for i in range(6)
    ]
    answer = http.post("/submit", json=_oj(program, cases, language="cpp")).json()
    assert answer["accepted"], answer
    cached = [t["exec_info"]["compile_result"]["cached"] for t in answer["tests"]]
    assert cached.count(False) == 1, cached


DERANGEMENT = (Path(__file__).parent / "testlib_checkers" / "derangement.cpp").read_text()


def test_a_submission_is_judged_by_its_checker_and_its_cpu_time(http: httpx.Client) -> None:
    """What ``code_eval`` judges with, ``/submit`` takes in ``config.extra``: a testlib checker
    for a problem with many right answers (any derangement is right; the jury's differs), and
    a CPU-time limit, which a program that computes runs past and one that sleeps does not."""
    rotate = "```python\nn = int(input())\nprint(*[i % n + 1 for i in range(1, n + 1)])\n```"
    cases = [
        {"input": {"stdin": "3\n"}, "output": {"stdout": "3 1 2\n"}},
        {"input": {"stdin": "4\n"}, "output": {"stdout": "2 1 4 3\n"}},
    ]
    checker = {"source": DERANGEMENT, "language": "cpp"}
    compared = http.post("/submit", json=_oj(rotate, cases)).json()
    assert _passed(compared) == [False] and compared["tests"][0]["verdict"] == "WA"
    checked = http.post("/submit", json=_oj(rotate, cases, extra={"checker": checker})).json()
    assert checked["accepted"] and _passed(checked) == [True, True], checked
    assert checked["tests"][1]["exec_info"]["run_result"]["stdout"] == "2 3 4 1\n"
    identity = "```python\nn = int(input())\nprint(*range(1, n + 1))\n```"
    wrong = http.post("/submit", json=_oj(identity, cases, extra={"checker": checker})).json()
    assert not wrong["accepted"] and "stays at its place" in wrong["tests"][0]["reason"], wrong
    spin = "```python\nimport time\nwhile True: pass\n```"
    sleep = "```python\nimport time\ntime.sleep(1.5)\nprint(6)\n```"
    six = [{"input": {"stdin": ""}, "output": {"stdout": "6"}}]
    limited = {"cpu_time_limit": 0.5}
    spun = http.post("/submit", json=_oj(spin, six, run_timeout=5, extra=limited)).json()
    run = spun["tests"][0]["exec_info"]["run_result"]
    assert spun["tests"][0]["verdict"] == "TLE" and run["status"] == "TimeLimitExceeded"
    assert run["exceeded"] == "cpu_time" and run["return_code"] is None, run
    assert run["execution_time"] < 3, run
    slept = http.post("/submit", json=_oj(sleep, six, run_timeout=5, extra=limited)).json()
    assert slept["accepted"], slept


def test_a_program_that_does_not_compile_fails_its_first_case(http: httpx.Client) -> None:
    """As SandboxFusion answers it: a compiled language's compile step, no run; Python's
    parse error as its run's, exit 1 with the error; every case with ``run_all_cases``."""
    broken = "```cpp\nint main() { return x; }\n```"
    answer = http.post("/submit", json=_oj(broken, ADD_CASES, language="cpp")).json()
    (test,) = answer["tests"]
    info = test["exec_info"]
    assert not test["passed"] and test["verdict"] == "CE" and info["status"] == "Failed"
    assert info["run_result"] is None and info["compile_result"]["return_code"] != 0
    assert "x" in info["compile_result"]["stderr"], info
    unparsed = "```python\nprint(1\n```"
    every = http.post("/submit", json=_oj(unparsed, ADD_CASES, extra={"run_all_cases": True}))
    tests = every.json()["tests"]
    assert [t["passed"] for t in tests] == [False, False]
    run = tests[1]["exec_info"]["run_result"]
    assert tests[1]["exec_info"]["compile_result"] is None
    assert run["return_code"] == 1 and "SyntaxError" in run["stderr"], run


@pytest.mark.parametrize(
    ("extra", "detail"),
    [
        ({"checker": "not an object"}, "checker"),
        ({"checker": {"source": "int main( {", "language": "cpp"}}, "checker does not compile"),
        ({"cpu_time_limit": -1}, "cpu_time_limit"),
        ({"memory_limit_MB": "lots"}, "memory_mb"),
    ],
)
def test_what_a_submission_cannot_be_judged_with_is_refused_in_one_line(
    http: httpx.Client, extra: dict[str, Any], detail: str
) -> None:
    response = http.post("/submit", json=_oj("```python\nprint(3)\n```", ADD_CASES, extra=extra))
    assert response.status_code == 400, response.text
    said = response.json()["detail"]
    assert detail in said and "\n" not in said and not said.startswith("ValueError"), said


def test_prompts_ids_and_the_datasets_served(service: ServiceProcess, http: httpx.Client) -> None:
    """SandboxFusion's prompts for CommonOJ rows, word for word as its server gave them, through
    its client where it has a function for the endpoint."""
    import sandbox_fusion

    endpoint = f"{service.url}/t/{TOKEN}"
    rows = [
        {"id": "ab1", "content": "Compute a+b.", "labels": {"difficulty": "easy"}, "test": []},
        {"id": 2, "content": "Second", "labels": "{}"},
    ]
    config = {"dataset_type": "CommonOJDataset", "language": "python", "provided_data": rows}
    prompts = sandbox_fusion.get_prompts(
        sandbox_fusion.GetPromptsRequest(dataset="my_oj", config=config), endpoint=endpoint
    )
    script = (
        "\n\nPlease implement a complete Python script. Your program should read input from "
        "standard input and write output to standard output."
    )
    assert [(p.id, p.prompt, p.labels) for p in prompts] == [
        ("ab1", "Compute a+b." + script, {"difficulty": "easy"}),
        (2, "Second" + script, {}),
    ]
    chinese = {**config, "language": "cpp", "locale": "zh"}
    first = http.post("/get_prompts", json={"dataset": "x", "config": chinese}).json()[0]
    assert first["prompt"] == (
        "Compute a+b.\n\n请使用 C++ 实现一个完整的可执行程序，包含 main 函数。"  # noqa: RUF001
        "你的程序应该从标准输入读取数据，并将结果输出到标准输出。"  # noqa: RUF001
    )
    one = sandbox_fusion.get_prompt_by_id(
        sandbox_fusion.GetPromptByIdRequest(
            dataset="my_oj", id="ab1", config={**config, "language": "go", "provided_data": rows[0]}
        ),
        endpoint=endpoint,
    )
    assert one.prompt == (
        "Compute a+b.\n\nPlease implement complete executable code with an entry point in go. "
        "Your program should read input from standard input and write output to standard output."
    )
    assert http.post("/list_ids", json={"dataset": "x", "config": config}).json() == ["ab1", 2]
    served = http.get("/list_datasets").json()
    assert {"code_contests", "humaneval_python", "mbpp", "multiple_lua"} <= set(served)


HUMANEVAL_ROW = {
    "task_id": "HumanEval/x",
    "prompt": 'def add(a: int, b: int) -> int:\n    """The sum."""\n',
    "canonical_solution": "    return a + b\n",
    "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(0, 0) == 0\n",
    "entry_point": "add",
}


def test_humaneval_rows_are_put_together_as_sandbox_fusion_does(http: httpx.Client) -> None:
    """The completion cut at its first line at the margin, after SandboxFusion's imports and the
    prompt, then the tests and, for humaneval_python, ``check(entry_point)``; or, free-form, the
    code of the answer's fence."""

    def submit(completion: str, dataset: str = "humaneval_python", **extra: Any) -> Any:
        config: dict[str, Any] = {"provided_data": HUMANEVAL_ROW, "extra": extra}
        if dataset != "humaneval_python":
            config["dataset_type"] = "HumanEvalDataset"
        body = {"dataset": dataset, "id": "HumanEval/x", "completion": completion, "config": config}
        return http.post("/submit", json=body).json()

    answer = submit("    return a + b\n\ndef random():\n    pass")
    assert answer["accepted"] and answer["extracted_code"] == "    return a + b\n"
    assert answer["full_code"].endswith(
        HUMANEVAL_ROW["prompt"] + "\n    return a + b\n\n" + HUMANEVAL_ROW["test"] + "\ncheck(add)"
    )
    assert answer["full_code"].startswith("import math\nimport re\nimport sys\n")
    assert answer["tests"][0]["test_info"] is None
    assert not submit("    return a - b\n")["accepted"]
    fenced = "Sure:\n```python\n" + HUMANEVAL_ROW["prompt"] + "    return a + b\n```"
    assert submit(fenced, is_freeform=True)["accepted"]
    # Another dataset name: SandboxFusion appends no check() call, so nothing is tested.
    unnamed = submit("    return a - b\n", dataset="my_humaneval")
    assert "check(add)" not in unnamed["full_code"]


def test_mbpp_multiple_and_autoeval_rows(http: httpx.Client) -> None:
    mbpp = {
        "dataset": "mbpp",
        "id": 2,
        "completion": "[BEGIN]\ndef add(a, b):\n    return a + b\n[DONE]",
        "config": {
            "provided_data": {
                "id": 2,
                "content": "Write a function to add two numbers.",
                "labels": {"test_setup_code": ""},
                "test_list": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"],
            }
        },
    }
    answer = http.post("/submit", json=mbpp).json()
    assert answer["accepted"]  # SandboxFusion's answer had this full_code, byte for byte
    assert answer["full_code"] == (
        "\ndef add(a, b):\n    return a + b\n\nassert add(1, 2) == 3\n\nassert add(-1, 1) == 0\n"
    )
    lua_row = {
        "name": "HumanEval_x_add",
        "language": "lua",
        "prompt": "local function add(a, b)\n",
        "tests": "lu = require('luaunit')\nfunction test_add()\n"
        "  lu.assertEquals(add(1, 2), 3)\nend\nos.exit(lu.LuaUnit.run())",
        "stop_tokens": ["\nlocal", "\nfunction", "\n--", "\n\n"],
    }
    for body, accepted in (("  return a + b\nend", True), ("  return a - b\nend", False)):
        completion = f"```lua\nlocal function add(a, b)\n{body}\n```"
        config = {"provided_data": lua_row, "extra": {"is_freeform": True}}
        multiple = {"dataset": "multiple_lua", "id": 0, "completion": completion, "config": config}
        assert http.post("/submit", json=multiple).json()["accepted"] is accepted
    auto_row = {
        "id": 0,
        "content": "",
        "labels": {"programming_language": "python"},
        "test": {"code": "#<INSERT>\n\nassert f() == 3\n"},
    }
    config = {"dataset_type": "AutoEvalDataset", "provided_data": auto_row}
    for completion, flag, accepted in (
        ("```python\ndef f():\n    return 3\n```", False, True),
        ("```python\nimport sys\nsys.exit(0)\n```", False, True),  # as SandboxFusion judges it
        ("```python\nimport sys\nsys.exit(0)\n```", True, False),  # its append_flag catches it
        ("```python\ndef f():\n    return 3\n```", True, True),
    ):
        auto = {
            "dataset": "",
            "id": 0,
            "completion": completion,
            "config": {**config, "extra": {"append_flag": flag}},
        }
        assert http.post("/submit", json=auto).json()["accepted"] is accepted, (completion, flag)


CRUX_ROW = {
    "id": "sample_1",
    "code": "def f(a, b, c):\n    result = {}\n    for d in a, b, c:\n"
    "        result.update(dict.fromkeys(d))\n    return result",
    "input": "(1, ), (1, ), (1, 2)",
    "output": "{1: None, 2: None}",
}


def test_cruxeval_answers_are_put_in_the_assertion(http: httpx.Client) -> None:
    """The answer between ``[ANSWER]`` and its end, in ``extra.mode``'s assertion; a listing
    without a mode has every row's input prompt, then every row's output prompt."""

    def submit(completion: str, mode: str) -> Any:
        config = {"provided_data": CRUX_ROW, "extra": {"mode": mode}}
        body = {"dataset": "cruxeval", "id": 1, "completion": completion, "config": config}
        return http.post("/submit", json=body).json()

    told = submit(
        "[ANSWER]\nassert f((1, ), (1, ), (1, 2)) == {1: None, 2: None}\n[/ANSWER]", "output"
    )
    assert told["accepted"] and told["extracted_code"] == "{1: None, 2: None}"
    assert (
        told["full_code"]
        == CRUX_ROW["code"] + "\nassert {1: None, 2: None} == f((1, ), (1, ), (1, 2))"
    )
    assert not submit("[ANSWER]{1: None}[/ANSWER]", "output")["accepted"]
    guessed = submit("[ANSWER]f((2, 1), (), ())[/ANSWER] # done", "input")
    assert guessed["accepted"] and guessed["full_code"].endswith(
        "\nassert f((2, 1), (), ()) == {1: None, 2: None}"
    )
    listed = http.post(
        "/get_prompts", json={"dataset": "cruxeval", "config": {"provided_data": [CRUX_ROW] * 2}}
    ).json()
    assert [p["labels"]["mode"] for p in listed] == ["input", "input", "output", "output"]
    assert listed[0]["prompt"].endswith(
        f"[PYTHON]\n{CRUX_ROW['code']}\nassert f(??) == {CRUX_ROW['output']}\n[/PYTHON]\n[ANSWER]\n"
    )
    one = http.post(
        "/get_prompt_by_id",
        json={"dataset": "cruxeval", "id": 1, "config": {"provided_data": CRUX_ROW}},
    ).json()
    assert one["labels"] == {"mode": "output"} and one["prompt"] == listed[2]["prompt"]
    no_mode = {
        "dataset": "cruxeval",
        "id": 1,
        "completion": "",
        "config": {"provided_data": CRUX_ROW},
    }
    refused = http.post("/submit", json=no_mode)
    assert refused.status_code == 400 and "extra.mode" in refused.json()["detail"]


#: SandboxFusion's own row ``sample_0`` of its CRUXEval samples.
CRUX_SAMPLE = {
    "id": "sample_0",
    "code": "def f(nums):\n    output = []\n    for n in nums:\n"
    "        output.append((nums.count(n), n))\n    output.sort(reverse=True)\n    return output",
    "input": "[1, 1, 3, 1, 3, 1]",
    "output": "[(4, 1), (4, 1), (4, 1), (4, 1), (2, 3), (2, 3)]",
}


@pytest.mark.parametrize(
    ("extra", "digest"),
    [
        ({"use_cot": True, "mode": "input"}, "82e17f0e12b6a75433b4e168b295a4e310b8448d3084b4a3392c34158319bb2a"),
        ({"use_cot": True, "mode": "output"}, "940bc7e904960cf60bc25a670c04c3c6857b242c2d3e6b7c8c5597b613517e2f"),
        ({"phind_output": True, "mode": "output"}, "10d1e8de57aefa901b738d911d2b406aa0ff96d3fa5113d7f8b30215cd5e1f0e"),
        ({"use_cot": True, "coding_wrap_prompt": True}, "424ee5a434912bf93035c93b9a3f71c1b7cc2df0a392b060e314572624311166"),
    ],
)  # fmt: skip
def test_cruxevals_reasoning_and_phind_prompts_are_sandbox_fusions(
    http: httpx.Client, extra: dict[str, Any], digest: str
) -> None:
    """Each digest is of the prompt SandboxFusion's server gave for its own row."""
    config = {"provided_data": CRUX_SAMPLE, "extra": extra}
    body = {"dataset": "cruxeval", "id": "sample_0", "config": config}
    prompt = http.post("/get_prompt_by_id", json=body).json()["prompt"]
    assert hashlib.sha256(prompt.encode()).hexdigest() == digest, prompt


@pytest.mark.parametrize(
    ("path", "body", "status", "detail"),
    [
        ("/submit", {"dataset": "my_oj", "id": 1, "completion": "", "config": {}}, 400,
         "no eval class found for dataset my_oj"),
        ("/submit", {"dataset": "x", "id": 1, "completion": "",
                     "config": {"dataset_type": "PalMathDataset"}}, 400,
         "eval class PalMathDataset not found"),
        ("/submit", {"dataset": "code_contests", "id": 1, "completion": "",
                     "config": {"provided_data": {"test": []}}}, 400,
         "config.language field must exist for CommonOJDataset, got None"),
        ("/submit", {"dataset": "code_contests", "id": 1, "completion": "",
                     "config": {"language": "python", "provided_data": [{"test": []}]}}, 400,
         "provided_data should be a dict"),
        ("/get_prompts", {"dataset": "code_contests", "config": {"provided_data": {"id": 1}}},
         400, "provided_data should be a list"),
        ("/submit", {"dataset": "code_contests", "id": 1, "completion": "",
                     "config": {"language": "python", "provided_data": {"id": 1}}}, 400,
         "config.provided_data has no 'test'"),
        ("/submit", {"dataset": "code_contests", "id": 1, "completion": "",
                     "config": {"language": "python"}}, 400, "keeps no dataset tables"),
        ("/submit", {"dataset": "code_contests", "id": 1, "completion": "",
                     "config": {"language": "python", "provided_data": {"test": [{"input": 1}]}}},
         400, "config.provided_data.test[0].input must map names to text"),
        ("/submit", {"dataset": "code_contests", "id": 1, "completion": "",
                     "config": {"language": "python", "custom_extract_logic": "open('/x', 'w')",
                                "provided_data": {"test": []}}},
         400, "custom_extract_logic is not served"),
        ("/submit", {"dataset": "code_contests", "id": 1, "completion": "```julia\n1\n```",
                     "config": {"language": "julia", "provided_data": {"test": ADD_CASES}}},
         500, "failed to request sandbox: language 'julia' is not served here"),
        ("/submit", {"dataset": "x", "id": 1, "completion": "", "config": {"language": "py3"}},
         422, "config.language"),
        ("/submit", {"dataset": "x", "id": 1.5, "completion": "", "config": {}}, 422, "id"),
        ("/submit", {"dataset": "multiple_lua", "id": 1, "completion": "x",
                     "config": {"provided_data": {"prompt": "", "tests": "",
                                                  "stop_tokens": ["re:(a+)+$"]}}},
         400, "regular expressions are not served"),
        ("/submit", {"dataset": "multiple_lua", "id": 1, "completion": "x",
                     "config": {"provided_data": {"prompt": "", "tests": "",
                                                  "stop_tokens": [str(n) for n in range(65)]}}},
         400, "at most 64 stop tokens"),
        ("/submit", {"dataset": "multiple_lua", "id": 1, "completion": "x",
                     "config": {"provided_data": {"prompt": "", "tests": "",
                                                  "stop_tokens": "\n"}}},
         400, "stop_tokens must be a list"),
        ("/get_prompts", {"dataset": "x", "config": {
            "dataset_type": "AutoEvalDataset", "extra": {"prompt_template": "$question" * 1000},
            "provided_data": [{"id": 0, "labels": {}, "content": "q" * 10_000}]}},
         400, "the prompt would hold"),
        ("/submit", {"dataset": "cruxeval_x", "id": 1, "completion": "[ANSWER]" + "1" * 100_000,
                     "config": {"extra": {"mode": "output"}, "provided_data": {
                         "id": "python_1", "code": "", "input": "", "output": "????" * 100}}},
         400, "the test would hold"),
        ("/submit", {"dataset": "code_contests", "id": 1, "completion": "",
                     "config": {"language": "python",
                                "provided_data": {"test": "[" * 100_000 + "]" * 100_000}}},
         400, "config.provided_data.test is not JSON"),
        ("/get_prompt_by_id", {"dataset": "code_contests", "id": 1, "config": {
            "provided_data": {"id": [1], "content": "", "labels": {}}}},
         400, "id"),
        ("/get_prompts", {"dataset": "code_contests", "config": {
            "provided_data": [{"id": 1, "content": "", "labels": {}}] * 10_001}},
         400, "at most 10000 rows"),
        ("/submit", {"dataset": "code_contests", "id": 1, "completion": "",
                     "config": {"language": "python", "provided_data": {"test": ADD_CASES * 5001}}},
         400, "at most 10000 cases"),
    ],
)  # fmt: skip
def test_what_cannot_be_judged_is_refused_in_one_line(
    http: httpx.Client, path: str, body: dict[str, Any], status: int, detail: str
) -> None:
    response = http.post(path, json=body)
    assert response.status_code == status, response.text
    said = response.json()
    message = said.get("detail") or said.get("message")
    assert isinstance(message, str) and detail in message and "\n" not in message, said


def test_what_the_cases_keep_of_their_output_is_bounded(http: httpx.Client) -> None:
    """SandboxFusion keeps each case's whole stdout and stderr; here each stream keeps 64 KiB
    at most and the cases of a submission 16 MiB in all, each stream an equal share: its two
    ends, as ``truncate_str`` cuts (65,535 characters of a megabyte for 8 cases, 41,943 for
    200)."""
    loud = "```python\nprint('a' + 'x' * 999_998 + 'z')\n```"
    for count, each in ((8, 65_535), (200, 41_943)):
        cases = [{"input": {"stdin": ""}, "output": {"stdout": "y"}}] * count
        ask = _oj(loud, cases, extra={"run_all_cases": True})
        answer = http.post("/submit", json=ask).json()
        kept = [t["exec_info"]["run_result"]["stdout"] for t in answer["tests"]]
        assert [len(text) for text in kept] == [each] * count
        half = (each - 3) // 2
        assert kept[-1] == "a" + "x" * (half - 1) + "..." + "x" * (half - 2) + "z\n"
    quiet = "```python\nprint('y' * 70_000)\n```"
    answer = http.post("/submit", json=_oj(quiet, [cases[0]])).json()
    assert len(answer["tests"][0]["exec_info"]["run_result"]["stdout"]) == 65_535


def test_the_expected_output_never_reaches_the_program(http: httpx.Client) -> None:
    """A hostile completion looks for its expected output everywhere it can read (its
    environment, its directory, every process's command line and environment, its standard
    input) and prints what it finds: it finds nothing, and is judged wrong."""
    secret = f"EXPECTED-{time.time_ns()}"
    hunter = """```python
import os, re, sys
found = set()
needle = re.compile("EXPECTED" + "-[0-9]+")  # not its own source's text
def look(text):
    found.update(needle.findall(text))
look(sys.stdin.read())
look(repr(dict(os.environ)))
for root, dirs, files in os.walk("."):
    for name in files:
        try:
            look(open(os.path.join(root, name), errors="replace").read())
        except OSError:
            pass
for pid in os.listdir("/proc"):
    for part in ("cmdline", "environ"):
        try:
            look(open(f"/proc/{pid}/{part}", errors="replace").read())
        except OSError:
            pass
print(sorted(found)[0] if found else "nothing")
```"""
    cases = [{"input": {"stdin": "go\n"}, "output": {"stdout": secret}}]
    answer = http.post("/submit", json=_oj(hunter, cases)).json()
    assert not answer["accepted"]
    assert answer["tests"][0]["exec_info"]["run_result"]["stdout"] == "nothing\n"
    # What it can reach, it finds: given on its input, the answer passes.
    told = [{"input": {"stdin": secret}, "output": {"stdout": secret}}]
    assert http.post("/submit", json=_oj(hunter, told)).json()["accepted"]


#: SandboxFusion's ``default_extract_helper`` (469de08) on these completions, as its own function
#: gave them when run: the block of the asked language first, a fence's tag through its
#: aliases, an unclosed fence, Python's heuristic, and nothing for a language without one.
EXTRACTED = [
    ("```bash\necho hi\n```\n```python\nprint(1)\n```", "python", "print(1)"),
    ("```\nprint(1)\n```", "python", "print(1)"),
    ("```cpp\nint main(){}\n```", "python", "int main(){}"),
    ("```javascript\na\n```\n```js\nb\n```", "nodejs", "b"),
    ("```Python3 \nprint(1)\n```", "python", "print(1)"),
    ("```python\nprint(1)\n   ```", "python", "print(1)"),
    ("```python\nprint(1)```", "python", "print(1)```"),
    ("text\n```python\nprint(1)\n", "python", "print(1)\n"),
    ("```python\r\nprint(1)\r\n```", "python", "print(1)\r"),
    ("Sure.\nimport sys\ndef f():\n    return 1\nprint(f())", "python",
     "import sys\ndef f():\n    return 1\n"),
    ("int main(){}", "cpp", ""),
    ("just words", "python", ""),
]  # fmt: skip


@pytest.mark.parametrize(("completion", "language", "code"), EXTRACTED)
def test_the_code_is_extracted_as_sandbox_fusion_extracts_it(
    completion: str, language: str, code: str
) -> None:
    from a2e_engine.engine.service._sandbox_fusion_extraction import default_extract_helper

    assert default_extract_helper(completion, language) == code


#: SandboxFusion's own expressions (``sandbox/utils/extraction.py``, 469de08): the oracle of
#: the one-pass readers that take their place here.
SF_FENCED = re.compile(r"```([^\n]*)\n(.*?)\n\s*```", re.DOTALL | re.MULTILINE)
SF_INCOMPLETE = re.compile(r"```([^\n]*)\n(.*)", re.DOTALL | re.MULTILINE)
SF_PYTHON = re.compile(
    r"(?:^(?:import|from|#)[^\n]+\n)*^(?:def|class) [^\n]+\n(?:\s+[^\n]+\n)+", re.MULTILINE
)
PIECES = (
    "`", "```", "````", "\n", " ", "\t", "\r", "\u00a0", "a", "python", "cpp", "x ```",
    "def f():", "def ", "class A:", "import os", "import", "from x", "#", "#c", "  return 1",
    "\n\n", " \n", "```python\n", "\n```",
)  # fmt: skip


def test_the_one_pass_readers_find_what_sandbox_fusions_expressions_find() -> None:
    """On 20,000 random completions made of the pieces where they could part."""
    from a2e_engine.engine.service import _sandbox_fusion_extraction as extraction

    generator = random.Random(42)
    for _ in range(20_000):
        text = "".join(generator.choice(PIECES) for _ in range(generator.randint(0, 30)))
        fenced = [(b.language, b.code) for b in extraction.fenced_blocks(text)]
        wanted = [
            (extraction._LANGUAGE_OF_TAG.get(t.strip(), ""), c) for t, c in SF_FENCED.findall(text)
        ]
        assert fenced == wanted, repr(text)
        incomplete = [b.code for b in extraction.incomplete_blocks(text)]
        assert incomplete == [code for _, code in SF_INCOMPLETE.findall(text)], repr(text)
        lines = [line for line in text.split("\n") if line.strip() != ""]
        python = [b.code for b in extraction.heuristic_blocks(text, "python")]
        assert python == SF_PYTHON.findall("\n".join(lines) + "\n"), repr(text)


def test_a_completion_made_to_hold_the_server_is_read_in_one_pass(http: httpx.Client) -> None:
    """Backticks that never close and import lines no ``def`` follows, a megabyte of each:
    SandboxFusion's expressions take time quadratic in them (80,000 backticks, 28 s), on the
    server's event loop; here the answer comes, and the server still answers others."""
    for completion in ("`" * (1 << 20), "```\n" * (1 << 18), "import x\n" * 116_000):
        answer = http.post("/submit", json=_oj(completion, ADD_CASES), timeout=60)
        assert answer.status_code == 200 and not answer.json()["accepted"]
    assert http.get("/v1/ping").json() == "pong"
    past = http.post("/submit", json=_oj("x" * ((1 << 20) + 1), ADD_CASES))
    assert past.status_code == 400 and "past 1048576" in past.json()["detail"]


def _sandbox_fusions_go(code: str) -> str:
    """SandboxFusion's ``postprocess_full_code`` for Go, as its code has it."""
    packages = set(re.findall(r"package\s+(\w+)", code))
    code = re.sub(r"package\s+(\w+)", "", code)
    single = re.findall(r'import\s+("\w+")', code)
    blocks = re.findall(r"import\s+\((.*?)\)", code, flags=re.DOTALL)
    grouped = [line for block in blocks for line in block.split("\n")]
    imports = set(single + [x.strip() for x in grouped]) - {""}
    code = re.sub(r'import\s+("\w+")', "", code)
    code = re.sub(r"import\s+\((.*?)\)", "", code, flags=re.DOTALL)
    header = "\n".join(f"package {p}" for p in packages)
    return header + "\n\n" + "\n".join(f"import {i}" for i in imports) + "\n\n" + code


GO_PIECES = (
    "import", " ", "\n", "(", ")", '"fmt"', '"os"', "package main", "package", "x",
    "import (", 'import "fmt"', "\t", "func main() {}",
)  # fmt: skip


def test_go_programs_are_put_together_as_sandbox_fusion_does_in_one_pass() -> None:
    """Its imports gathered at the top, on 20,000 random programs (the imports' order aside:
    SandboxFusion's comes from a set); and a megabyte of groups that never close is read in
    one pass, where its expression takes 22 s for 160 kB."""
    from a2e_engine.engine.service._sandbox_fusion_datasets._base import go_imports_together

    generator = random.Random(7)
    for _ in range(20_000):
        code = "".join(generator.choice(GO_PIECES) for _ in range(generator.randint(0, 25)))
        mine, theirs = go_imports_together(code), _sandbox_fusions_go(code)
        assert sorted(mine.split("\n")) == sorted(theirs.split("\n")), repr(code)
    assert go_imports_together("import (" * (1 << 17)).endswith("import (")


@pytest.mark.parametrize(
    "result",
    [
        {"verdict": "AC", "tests": "all passed"},
        {"verdict": "AC", "tests": [1, 2]},
        {"verdict": "AC", "tests": [None]},
    ],
)
def test_a_judges_result_not_code_evals_is_a_500_that_says_so(result: dict[str, Any]) -> None:
    """The worker that judged is hostile too: a result of another shape is no verdict."""
    from a2e_engine.engine.service._sandbox_fusion_datasets._base import OJError
    from a2e_engine.engine.service._sandbox_fusion_datasets._common_oj import (
        _answers,
        _stdio_cases,
    )

    batch = _stdio_cases({"test": ADD_CASES})
    with pytest.raises(OJError, match="the judge's result is not code_eval's") as refused:
        _answers(result, batch, False, True)
    assert refused.value.status == 500


def test_odd_values_in_a_judges_result_stay_data() -> None:
    """Values of the wrong kind in a case (a compile that is text, a verdict that is a number)
    are carried as data or dropped, never a crash of the server's."""
    from a2e_engine.engine.service._sandbox_fusion_datasets._common_oj import (
        _answers,
        _stdio_cases,
    )

    batch = _stdio_cases({"test": ADD_CASES})
    odd = {"compile": "made", "tests": [{"verdict": 7, "passed": 1, "status": ["x"]}]}
    (answer,) = _answers(odd, batch, False, True)
    assert answer.passed and answer.verdict is None
    assert answer.exec_info["compile_result"] is None and answer.exec_info["status"] == "Failed"


def _mbpp_row(code: str, asserts: list[str], **config: Any) -> dict[str, Any]:
    return {
        "dataset": "mbpp",
        "id": 7,
        "completion": f"[BEGIN]\n{code}\n[DONE]",
        "config": {
            "provided_data": {
                "id": 7,
                "content": "Write a function.",
                "labels": {"test_setup_code": ""},
                "test_list": asserts,
            },
            **config,
        },
    }


def test_one_run_datasets_are_judged_by_code_eval_with_its_limits(http: httpx.Client) -> None:
    """A one-run dataset's program (MBPP here) is judged by ``code_eval``'s ``by_exit``: the
    run SandboxFusion makes, with ``code_eval``'s limits from ``config.extra`` (a CPU-time
    limit, which ``/run_code``'s path would also take, and a memory limit), and its answer in
    ``/run_code``'s shape."""
    spin = "def f():\n    while True:\n        pass"
    answer = http.post(
        "/submit",
        json=_mbpp_row(spin, ["assert f() is None"], run_timeout=20, extra={"cpu_time_limit": 0.5}),
    ).json()
    (test,) = answer["tests"]
    run = test["exec_info"]["run_result"]
    assert not answer["accepted"] and run["status"] == "TimeLimitExceeded", answer
    assert run["exceeded"] == "cpu_time" and run["execution_time"] < 10, run
    hog = "def f():\n    return len(bytearray(400 << 20))"
    answer = http.post(
        "/submit", json=_mbpp_row(hog, ["assert f() > 0"], extra={"memory_limit_MB": 128})
    ).json()
    run = answer["tests"][0]["exec_info"]["run_result"]
    assert not answer["accepted"] and run.get("memory_exceeded"), run  # Finished, as SF says
    broken = http.post("/submit", json=_mbpp_row("def f(:\n    pass", ["assert f()"])).json()
    run = broken["tests"][0]["exec_info"]["run_result"]
    assert not broken["accepted"] and run["return_code"] == 1, broken
    assert "SyntaxError" in run["stderr"] and broken["tests"][0]["exec_info"]["status"] == "Failed"


@pytest.mark.parametrize(
    "result",
    [
        {"verdict": "AC", "tests": "all passed"},
        {"verdict": "AC", "tests": [{"status": ["x"], "time": "soon"}]},
        {"verdict": "CE", "compile": {"cached": "no", "status": 5}},
    ],
)
def test_a_one_runs_judge_result_of_another_shape_is_a_500(result: dict[str, Any]) -> None:
    """The worker that judged a one-run dataset's program is hostile too: a result that is not
    ``code_eval``'s, or whose run is not a run, is a 500 that says so, never a crash."""
    import asyncio

    from a2e_engine.engine.service._sandbox_fusion import RunCodeRequest
    from a2e_engine.engine.service._sandbox_fusion_datasets._base import (
        OJError,
        Sandbox,
        program_run,
        run_once,
    )

    async def judge(arguments: dict[str, Any], seconds: float) -> dict[str, Any]:
        assert arguments["by_exit"] is True and "test_cases" not in arguments
        return result

    async def run(request: RunCodeRequest) -> Any:
        raise AssertionError("a run without files is code_eval's")

    sandbox = Sandbox(run, judge, 300)
    with pytest.raises(OJError) as refused:
        asyncio.run(run_once(sandbox, program_run("print(1)", "python", 10, 10), {}))
    assert refused.value.status == 500 and "failed to request sandbox" in refused.value.detail
