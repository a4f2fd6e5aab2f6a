"""``LiveCodeBenchDataset`` (``live_code_bench_v1``): the Python code extracted from the
completion, judged by LiveCodeBench's own harness in one run (grading's asset ``lcb_judge.py``,
which runs in the sandbox): each case in turn with ``int(run_timeout or 6)`` seconds, the run
``min((seconds + 1) * cases + 5, 160)``. Accepted when the judge's own verdict, signed with this
request's nonce, says every case passed (SandboxFusion reads the exit status alone).

A row's ``test`` is ``{"input_output": "<JSON>"}``, as JSON or as LiveCodeBench packs it (base64
of zlib of a pickle), which is read as plain data and never unpickled (``_literal_pickle``)."""

from __future__ import annotations

import base64
import json
import secrets
from typing import Any

from a2e_engine.engine.service._sandbox_fusion import RunCodeResponse
from a2e_engine.engine.service._sandbox_fusion_datasets._base import (
    MAX_BUILT_CHARS,
    MAX_ROWS,
    NO_CUSTOM_EXTRACTION,
    DatasetType,
    OJError,
    Sandbox,
    bounded,
    column,
    json_column,
    program_run,
    refuse_sandbox_error,
)
from a2e_engine.engine.service._sandbox_fusion_datasets._literal_pickle import (
    PickleRefused,
    unpacked,
)
from a2e_engine.engine.service._sandbox_fusion_extraction import default_extract_helper
from a2e_engine.engine.service._sandbox_fusion_oj_types import (
    EvalResult,
    EvalTestCase,
    Prompt,
    SubmitRequest,
    TestConfig,
)
from a2e_engine.tools.grading import asset

#: The longest a submission's run may take, whatever its cases (SandboxFusion's).
MAX_RUN_S = 160
#: The judge, a file beside the candidate's code, and the program that runs it (SandboxFusion's
#: ``testing_util.py`` and ``TEST_CODE``).
_JUDGE_FILE = "lcb_judge.py"
_RUN_JUDGE = "from lcb_judge import main\n\nmain({seconds}, {files!r})\n"
#: The files beside the judge, as its ``main`` is told of them; the verdict's name holds the
#: request's nonce, which only the judge reads (from the nonce's file, deleted before the
#: candidate's code runs).
_FILES = {
    "nonce": "lcb-nonce",
    "tests": "test_cases.txt",
    "code": "code.py",
    "verdict": "lcb-verdict-{nonce}.json",
}

_FEWSHOT_PREFIX = """### Instruction
You are an expert Python programmer. You will be given a question (problem specification) and will generate a correct Python program that matches the specification and passes all tests. You will NOT return anything except for the program.

### Question:
Calculate a+b

Input

Two integer a,b (0<=a,b<=10)

Output

Output a+b

Sample Input

1 2

Sample Output

3

### Format: Read the inputs from stdin solve the problem and write the answer to stdout (do not directly test on the sample inputs). Enclose your code within delimiters as follows.
```python
```

### Answer: (use the provided format with backticks)
```python
a,b = map(int, input().split())
print(a+b)
```

### Question:
Given an array of integers nums and an integer target, return indices of the two numbers such that they add up to target.

You may assume that each input would have exactly one solution, and you may not use the same element twice.

You can return the answer in any order.



Example 1:

Input: nums = [2,7,11,15], target = 9
Output: [0,1]
Explanation: Because nums[0] + nums[1] == 9, we return [0, 1].
Example 2:

Input: nums = [3,2,4], target = 6
Output: [1,2]
Example 3:

Input: nums = [3,3], target = 6
Output: [0,1]

Constraints:

2 <= nums.length <= 10^4
-10^9 <= nums[i] <= 10^9
-10^9 <= target <= 10^9
Only one valid answer exists.

### Format: You will use the following starter code to write the solution to the problem and enclose your code within delimiters.
```python
class Solution:
    def twoSum(self, nums: List[int], target: int) -> List[int]:

```

### Answer: (use the provided format with backticks)
```python
class Solution:
    def twoSum(self, nums: List[int], target: int) -> List[int]:
        for i in range(len(nums)):
            for j in range(i + 1, len(nums)):
                if nums[i] + nums[j] == target:
                    return [i, j]
```

### Question:
Larry graduated this year and finally has a job. He's making a lot of money, but somehow never seems to have enough. Larry has decided that he needs to grab hold of his financial portfolio and solve his financing problems. The first step is to figure out what's been going on with his money. Larry has his bank account statements and wants to see how much money he has. Help Larry by writing a program to take his closing balance from each of the past twelve months and calculate his average account balance.
Input

The input will be twelve lines. Each line will contain the closing balance of his bank account for a particular month. Each number will be positive and displayed to the penny. No dollar sign will be included.
Output

The output will be a single number, the average (mean) of the closing balances for the twelve months. It will be rounded to the nearest penny, preceded immediately by a dollar sign, and followed by the end-of-line. There will be no other spaces or characters in the output.
Sample Input

100.00
489.12
12454.12
1234.10
823.05
109.20
5.27
1542.25
839.18
83.99
1295.01
1.75
Sample Output

$1581.42

### Format: Read the inputs from stdin solve the problem and write the answer to stdout (do not directly test on the sample inputs). Enclose your code within delimiters as follows.
```python
```

### Answer: (use the provided format with backticks)
```python
sum = 0
for i in range(12):
    sum += float(input())
print("$%.2f" % (sum / 12))
```

### Question:
"""  # noqa: E501
_STDIN_FORMAT = (
    "### Format: Read the inputs from stdin solve the problem and write the answer to stdout "
    "(do not directly test on the sample inputs). Enclose your code within delimiters as "
    "follows.\n```python\n```"
)
_STARTER_FORMAT = (
    "### Format: You will use the following starter code to write the solution to the problem "
    "and enclose your code within delimiters.\n```python\n{starter}\n```"
)


def _question(prompt: str) -> tuple[str, str | None]:
    """The question and the starter code of a row's prompt, as SandboxFusion's two expressions
    find them (the text from the first ``### Question:`` to the last ``### Format:`` after it;
    the code in the last ``python`` fence closed by the last fence and a blank line), read in
    one pass each: the expressions take time quadratic in text that never closes them."""
    start = prompt.find("### Question:\n")
    end = prompt.rfind("\n\n### Format:")
    head = prompt.find("### Format: ")
    close = prompt.rfind("\n```\n\n")
    opening = prompt.rfind("\n```python\n", head + len("### Format: "), max(close, 0))
    if start == -1 or end < start + len("### Question:\n") or head == -1 or opening == -1:
        raise OJError(400, "a few-shot prompt needs the row's question and its ### Format: block")
    starter = prompt[opening + len("\n```python\n") : close]
    return prompt[start + len("### Question:\n") : end], (
        None if starter == "# YOUR CODE HERE" else starter
    )


def _prompt(row: dict[str, Any], dataset: str, config: TestConfig) -> Prompt:
    text = column(row, "content")
    if config.is_fewshot:
        question, starter = _question(str(text))
        asked = _STARTER_FORMAT.format(starter=starter) if starter else _STDIN_FORMAT
        answer = "### Answer: (use the provided format with backticks)\n"
        text = f"{_FEWSHOT_PREFIX}{question}\n\n{asked}\n\n{answer}"
    return Prompt(id=column(row, "id"), prompt=text, labels=json_column(row, "labels"))


def _tests(row: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The row's test cases and how many there are."""
    raw = column(row, "test")
    tests: Any = raw
    if isinstance(raw, str):
        try:
            tests = json.loads(raw, strict=False)
        except (ValueError, RecursionError):
            try:
                tests = unpacked(raw, MAX_BUILT_CHARS)
            except PickleRefused as exc:
                raise OJError(400, f"config.provided_data.test: {exc}") from None
    if not isinstance(tests, dict) or not isinstance(tests.get("input_output"), str):
        raise OJError(400, "config.provided_data.test needs input_output, JSON text")
    try:
        cases = json.loads(tests["input_output"])
        count = len(cases["inputs"])
    except (ValueError, RecursionError, KeyError, TypeError) as exc:
        detail = f"{type(exc).__name__}: {exc}"
        raise OJError(400, f"config.provided_data.test.input_output: {detail}") from None
    return tests, count


async def _submit(request: SubmitRequest, row: dict[str, Any], sandbox: Sandbox) -> EvalResult:
    config = request.config
    if config.custom_extract_logic is not None:
        raise OJError(400, NO_CUSTOM_EXTRACTION)
    json_column(row, "labels")
    tests, count = _tests(row)
    if count > MAX_ROWS:
        raise OJError(400, f"at most {MAX_ROWS} cases a submission, got {count}")
    seconds = int(config.run_timeout or 6)
    code = default_extract_helper(request.completion, "python")
    nonce = secrets.token_hex(16)
    try:
        written = json.dumps(tests)
    except (TypeError, ValueError, RecursionError) as exc:
        raise OJError(400, f"config.provided_data.test is not JSON data: {exc}") from None
    bounded(len(written), "the test cases")
    files = {
        _FILES["tests"]: written,
        _FILES["code"]: code,
        _FILES["nonce"]: nonce,
        _JUDGE_FILE: asset(_JUDGE_FILE).decode(),
    }
    driver = _RUN_JUDGE.format(seconds=seconds, files=_FILES)
    verdict_file = _FILES["verdict"].format(nonce=nonce)
    answer = await sandbox.run(
        program_run(
            driver,
            "python",
            10,
            min((seconds + 1) * count + 5, MAX_RUN_S),
            {name: _base64(text) for name, text in files.items()},
            [verdict_file],
        )
    )
    refuse_sandbox_error(answer)
    accepted = answer.status == "Success" and _judged_passed(answer, verdict_file, nonce)
    exec_info = answer.wire()
    exec_info["files"] = {}
    return EvalResult(
        id=request.id,
        accepted=accepted,
        extracted_code=code,
        full_code=code,
        test_code=driver,
        tests=[EvalTestCase(passed=accepted, exec_info=exec_info)],
    )


def _base64(text: str) -> str:
    """``text`` as a file's base64; a lone surrogate (JSON allows one) written as Python
    would read it back: not UTF-8, so the candidate's code fails to load, as a 400 would."""
    return base64.b64encode(text.encode("utf-8", "surrogatepass")).decode()


def _judged_passed(answer: RunCodeResponse, verdict_file: str, nonce: str) -> bool:
    """Whether the judge wrote that every case passed, with this request's nonce."""
    try:
        verdict = json.loads(base64.b64decode(answer.files[verdict_file]))
        return verdict["nonce"] == nonce and verdict["passed"] is True
    except (KeyError, ValueError, TypeError, RecursionError):
        return False


LIVE_CODE_BENCH = DatasetType("LiveCodeBenchDataset", ("live_code_bench_v1",), _prompt, _submit)
