"""What every dataset class shares: the bounds of a submission, how a row's columns are read
and refused, a run of ``code_eval``'s answered as ``/run_code`` answers it, the one-run
datasets' run and answer, and Go's imports gathered as SandboxFusion gathers them."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from a2e._codec import describe_validation_error
from a2e_engine.engine.service._sandbox_fusion import (
    LANGUAGES,
    SLACK_S,
    RunCodeRequest,
    RunCodeResponse,
    as_sandbox_fusion_says,
    not_served,
)
from a2e_engine.engine.service._sandbox_fusion_oj_types import (
    EvalResult,
    EvalTestCase,
    Prompt,
    SubmitRequest,
    TestConfig,
)
from a2e_engine.tools.grading import MAX_CASES, MAX_TIME_LIMIT_S

#: A submission's ``code_eval`` calls that run at once, each a batch of its cases
#: (SandboxFusion's ``max_runner_concurrency``, which counts cases).
CASES_AT_ONCE = 3
#: What the cases of one ``code_eval`` call keep of their output in all: its result must
#: travel in one frame of the worker's even where every character is escaped (12 bytes).
CALL_OUTPUT_CHARS = 512 << 10
#: ``config.extra``'s names for the limits ``code_eval`` judges with, and its own.
JUDGING_LIMITS = {"cpu_time_limit": "cpu_time_limit", "memory_limit_MB": "memory_mb"}
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
#: What the prompts of one listing may hold in all (a few-shot text repeated in each).
MAX_LISTED_CHARS = 4 * MAX_BUILT_CHARS
#: A completion at most: reading code out of one is Python on the server's loop (about 0.6 s
#: a megabyte where it has no fences), and a model's answer is a small part of this.
MAX_COMPLETION_CHARS = 1 << 20
#: Stop tokens a row may give.
MAX_STOP_TOKENS = 64

#: Why ``config.custom_extract_logic`` is refused.
NO_CUSTOM_EXTRACTION = (
    "config.custom_extract_logic is not served: it is Python that SandboxFusion runs in its "
    "server, and nothing a client sends runs outside a sandbox here"
)


@dataclass(frozen=True)
class Sandbox:
    """What a dataset asks of the engine, each a call of its own: ``run`` one program as
    ``/run_code`` does (its answer, never an exception), or ``judge`` one as ``code_eval``
    does (given its arguments and the call's seconds: its result; a call it could not make
    raises ``OJError``, a refusal of the engine's the request's answer)."""

    run: Callable[[RunCodeRequest], Awaitable[RunCodeResponse]]
    judge: Callable[[dict[str, Any], float], Awaitable[dict[str, Any]]]
    #: The longest call the engine makes (its ``max_timeout``), in seconds.
    longest_call_s: float


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


def require(row: dict[str, Any], *names: str) -> None:
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


def object_column(row: dict[str, Any], name: str) -> dict[str, Any]:
    """A column that must be an object (or JSON text of one)."""
    value = json_column(row, name)
    if not isinstance(value, dict):
        raise OJError(400, f"config.provided_data.{name} must be an object")
    return value


def asset_files(test: dict[str, Any], drop_nulls: bool = False) -> dict[str, str]:
    """A test's ``asset`` (an object, or JSON text of one, of file names to base64) as the
    run's files; with ``drop_nulls``, the files given as null left out (MBXP's)."""
    asset = test.get("asset")
    if isinstance(asset, str):
        asset = json_column(test, "asset")
    files = dict(asset) if isinstance(asset, dict) else {}
    if drop_nulls:
        files = {name: content for name, content in files.items() if content is not None}
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise OJError(400, "config.provided_data.test.asset must map file names to base64")
    return files


def truncated(text: str, length: int = SHOWN_CHARS) -> str:
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
    submit: Callable[[SubmitRequest, dict[str, Any], Sandbox], Awaitable[EvalResult]]
    #: Other names ``config.dataset_type`` may give it (SandboxFusion declares AutoEval's and
    #: its own tests use them, though its registry never reads them).
    aliases: tuple[str, ...] = ()
    #: The prompts of a list of rows, where they are not each row's ``prompt`` in turn.
    listing: Callable[[list[dict[str, Any]], str, TestConfig], list[Prompt]] | None = None
    #: Whether the verdict is reached in the program's own process, as SandboxFusion reaches
    #: it (tests appended to the program, a harness beside it), so that a program can forge
    #: it: ``/submit`` says so in the result's ``extra`` and names ``code_eval``, which judges
    #: where the program cannot reach (docs/grading.md).
    forgeable: bool = True

    def prompts(self, rows: list[dict[str, Any]], dataset: str, config: TestConfig) -> list[Prompt]:
        """Each row's prompt, refused once they come to more than ``MAX_LISTED_CHARS``: what a
        request gives once (a few-shot text in ``config.extra``) each prompt may repeat."""
        if self.listing is not None:
            listed = self.listing(rows, dataset, config)
            bounded(sum(len(prompt.prompt) for prompt in listed), "the prompts", MAX_LISTED_CHARS)
            return listed
        listed, size = [], 0
        for row in rows:
            listed.append(self.prompt(row, dataset, config))
            size += len(listed[-1].prompt)
            bounded(size, "the prompts", MAX_LISTED_CHARS)
        return listed


def bounded(size: int, what: str, most: int = MAX_BUILT_CHARS) -> None:
    """Refuse to put together a text past ``most`` characters, before it is built."""
    if size > most:
        raise OJError(400, f"{what} would hold {size} characters, past {most}")


async def run_once(sandbox: Sandbox, run: RunCodeRequest, extra: dict[str, Any]) -> RunCodeResponse:
    """SandboxFusion's one run of a program that its exit judges, answered as ``/run_code``
    answers it. Made by ``code_eval`` (``by_exit``: compiled through the shared cache, run in
    a fresh directory, accounted as all that runs in its worker, with ``extra``'s CPU-time and
    memory limits), but for a run that brings files or fetches them, which only ``/run_code``
    takes."""
    if run.files or run.fetch_files:
        return await sandbox.run(run)
    arguments: dict[str, Any] = {
        "language": served_language(run.language),
        "program": run.code,
        "by_exit": True,
        "time_limit": min(run.run_timeout, MAX_TIME_LIMIT_S),
        "compile_timeout": run.compile_timeout,
        "output_chars": CALL_OUTPUT_CHARS // 2,
        **judging_extras(extra, JUDGING_LIMITS),
    }
    seconds = run.compile_timeout + run.run_timeout + SLACK_S
    result = await sandbox.judge(arguments, seconds)
    compiled = result.get("compile")
    if result.get("verdict") == "CE":
        answer = compile_error_info(compiled)
    else:
        (test, *_) = judged_tests(result) or [{}]
        answer = exec_info_of(compiled if isinstance(compiled, dict) else None, run_of(test))
    try:
        return RunCodeResponse.model_validate(answer)
    except ValidationError as exc:
        why = describe_validation_error(exc)
        raise OJError(
            500, f"failed to request sandbox: the judge's run is not a run: {why}"
        ) from None


def served_language(language: str) -> str:
    """The engine's name of SandboxFusion's ``language``; one not served here is the 500
    SandboxFusion answers a run it could not make, saying why."""
    why = not_served(language)
    if why is not None:
        raise OJError(500, f"failed to request sandbox: {why}")
    return LANGUAGES[language]


def judging_extras(extra: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """``code_eval``'s arguments from ``config.extra``: each of ``names`` it gives, under
    ``code_eval``'s name."""
    return {
        argument: extra[name] for name, argument in names.items() if extra.get(name) is not None
    }


def judged_tests(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The cases of a ``code_eval`` result; a result without them is the judge's failure."""
    tests = result.get("tests")
    if not isinstance(tests, list) or not all(isinstance(test, dict) for test in tests):
        raise OJError(500, "failed to request sandbox: the judge's result is not code_eval's")
    return tests


def compile_error_info(compiled: Any) -> dict[str, Any]:
    """A program ``code_eval`` found did not compile, as ``/run_code`` answers it: its compile
    step; for a language without one, which was only parsed, that parse as its run (what
    ``/run_code`` would have reported)."""
    step = compiled if isinstance(compiled, dict) else {}
    as_compile = "cached" in step  # a compile step says whether it was cached
    return exec_info_of(step if as_compile else None, None if as_compile else step)


def run_of(test: dict[str, Any]) -> dict[str, Any]:
    """A case of ``code_eval``'s as ``/run_code``'s ``run_result`` (no exit code past a time
    limit, a run past its memory limit ``Finished``)."""
    status = test.get("status")
    run = {
        "status": status,
        "execution_time": test.get("time"),
        "return_code": None if status == "TimeLimitExceeded" else test.get("return_code"),
        "stdout": test.get("stdout"),
        "stderr": test.get("stderr"),
        "cpu_time": test.get("cpu_time"),
        "peak_memory_kb": test.get("peak_memory_kb"),
    }
    if "exceeded" in test:
        run["exceeded"] = test["exceeded"]
    return dict(as_sandbox_fusion_says(run))


def exec_info_of(compiled: dict[str, Any] | None, run: dict[str, Any] | None) -> dict[str, Any]:
    """A run as ``/run_code`` answers it."""
    finished = run is not None and run.get("status") == "Finished" and run.get("return_code") == 0
    return {
        "status": "Success" if finished else "Failed",
        "message": "",
        "compile_result": compiled,
        "run_result": run,
        "executor_pod_name": None,
        "files": {},
    }


def one_run(
    request: SubmitRequest, extracted: str, program: str, answer: RunCodeResponse
) -> EvalResult:
    """A dataset judged by one run: accepted when it exits 0 in time."""
    refuse_sandbox_error(answer)
    accepted = answer.status == "Success"
    return EvalResult(
        id=request.id,
        accepted=accepted,
        extracted_code=extracted,
        full_code=program,
        tests=[EvalTestCase(passed=accepted, exec_info=answer.wire())],
    )


def refuse_sandbox_error(answer: RunCodeResponse) -> None:
    """A run the sandbox could not make is no verdict: a 500, as SandboxFusion answers it."""
    if answer.status == "SandboxError":
        raise OJError(500, f"failed to request sandbox: {answer.message}")


def go_imports_together(code: str) -> str:
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
