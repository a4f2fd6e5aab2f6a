"""``CruxEvalDataset``: the answer between ``[ANSWER]`` and its end put into the assertion
(``extra.mode``: ``input`` or ``output``), one run; CRUXEval-X's in the language its id
names."""

from __future__ import annotations

from typing import Any

from a2e_engine.engine.service._sandbox_fusion_datasets._base import (
    DatasetType,
    OJError,
    Sandbox,
    bounded,
    column,
    one_run,
    program_run,
    run_once,
)
from a2e_engine.engine.service._sandbox_fusion_oj_types import (
    EvalResult,
    Prompt,
    SubmitRequest,
    TestConfig,
)

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
#: With ``extra.phind_output`` (output mode): Phind's wording, the answer ended by ``# done``.
_CRUX_PHIND_OUTPUT = """Based on the given Python code, which may contain errors, complete the assert statement with the output when executing the code on the given test case. Do NOT output any extra information, even if the function is incorrect or incomplete. Output "# done" after the assertion.

def f(n):
    return n
assert f(17) == 17 # done

def f(s):
    return s + "a"
assert f("x9j") == "x9ja" # done

{code}
assert f({given}) =="""  # noqa: E501
#: With ``extra.use_cot``: the model reasons in ``[THOUGHT]`` before its answer.
_CRUX_OUTPUT_COT = """You are given a Python function and an assertion containing an input to the function. Complete the assertion with a literal (no unsimplified expressions, no function calls) containing the output when executing the provided code on the given input, even if the function is incorrect or incomplete. Do NOT output any extra information. Execute the program step by step before arriving at an answer, and provide the full assertion with the correct output in [ANSWER] and [/ANSWER] tags, following the examples.

[PYTHON]
def f(s):
    s = s + s
    return "b" + s + "a"
assert f("hi") == ??
[/PYTHON]
[THOUGHT]
Let's execute the code step by step:

1. The function f is defined, which takes a single argument s.
2. The function is called with the argument "hi", so within the function, s is initially "hi".
3. Inside the function, s is concatenated with itself, so s becomes "hihi".
4. The function then returns a new string that starts with "b", followed by the value of s (which is now "hihi"), and ends with "a".
5. The return value of the function is therefore "bhihia".
[/THOUGHT]
[ANSWER]
assert f("hi") == "bhihia"
[/ANSWER]

[PYTHON]
{code}
assert f({given}) == ??
[/PYTHON]
[THOUGHT]
"""  # noqa: E501
#: (Its example's two lines end with a space: ``\x20``.)
_CRUX_INPUT_COT = """You will be given a function f and an output in the form f(??) == output. Your task is to find any input such that executing f on the input leads to the given output. There may be multiple answers, but only output one. First, think step by step. You MUST surround the answer with [ANSWER] and [/ANSWER] tags. Express your answer as a passing assertion containing the input and the given output.

[PYTHON]
def f(x):
    return x + 1
assert f(??) == 17
[/PYTHON]
[THOUGHT]
To find an input such that executing f on the input leads to the given output, we can work backwards from the given assertion. We know that f(??) == 17.\x20

Since the function f(x) returns x + 1, for f(??) to be equal to 17, the value of ?? should be 16.\x20
[/THOUGHT]
[ANSWER]
assert f(16) == 17
[/ANSWER]

[PYTHON]
{code}
assert f(??) == {expected}
[/PYTHON]
[THOUGHT]
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
    mode = extra.get("mode", "output")
    if mode == "input":
        template = _CRUX_INPUT_COT if extra.get("use_cot") else _CRUX_INPUT
    elif extra.get("use_cot"):
        template = _CRUX_OUTPUT_COT
    else:
        template = _CRUX_PHIND_OUTPUT if extra.get("phind_output") else _CRUX_OUTPUT
    text = template.format(code=read["code"], given=read["input"], expected=read["output"])
    if extra.get("coding_wrap_prompt") == True:  # noqa: E712 - theirs: 1 is
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


async def _crux_submit(request: SubmitRequest, row: dict[str, Any], sandbox: Sandbox) -> EvalResult:
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
            bounded(len(read["input"]) + read["input"].count(call) * len(answer), "the test")
            answer = read["input"].replace(call, answer)
        else:
            bounded(len(read["output"]) + read["output"].count("????") * len(answer), "the test")
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
    ran = await run_once(sandbox, program_run(program, language, 30, 30), request.config.extra)
    return one_run(request, answer, program, ran)


CRUXEVAL = DatasetType(
    "CruxEvalDataset", ("cruxeval", "cruxeval_x"), _crux_prompt, _crux_submit, listing=_crux_prompts
)
