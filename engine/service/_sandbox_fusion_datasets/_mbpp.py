"""``MBPPDataset``: the setup code, the code of the completion and its asserts, one run."""

from __future__ import annotations

from typing import Any

from a2e_engine.engine.service._sandbox_fusion_datasets._base import (
    DatasetType,
    OJError,
    Sandbox,
    column,
    json_column,
    one_run,
    program_run,
    require,
    run_once,
)
from a2e_engine.engine.service._sandbox_fusion_extraction import freeform_code
from a2e_engine.engine.service._sandbox_fusion_oj_types import (
    EvalResult,
    Prompt,
    SubmitRequest,
    TestConfig,
)

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


async def _mbpp_submit(request: SubmitRequest, row: dict[str, Any], sandbox: Sandbox) -> EvalResult:
    labels, tests = _mbpp_row(row)
    require(row, "id", "content")
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
    run = program_run(program, "python", 10, request.config.run_timeout or 20)
    answer = await run_once(sandbox, run, request.config.extra)
    return one_run(request, code, program, answer)


MBPP = DatasetType("MBPPDataset", ("mbpp",), _mbpp_prompt, _mbpp_submit)
