"""SandboxFusion's online-judge wire types (``sandbox/datasets/types.py`` at 469de08): read as
their JSON schemas say (``STRICT``: what its client sends, an ``id`` of ``17`` an integer and
``"17"`` a string, as its server keeps them), and written with every field, ``null`` included, in
its order, as its client (``sandbox-fusion``, pydantic v1) reads them back by name."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from a2e_engine.engine.service._bodies import STRICT

__all__ = [
    "EvalResult",
    "EvalTestCase",
    "GetPromptByIdRequest",
    "GetPromptsRequest",
    "Message",
    "OJErrorBody",
    "Prompt",
    "SandboxFusionLanguage",
    "SubmitRequest",
    "TestConfig",
]

#: SandboxFusion's ``Language``: any other ``config.language`` is refused (422), as it refuses it.
SandboxFusionLanguage = Literal[
    "python", "cpp", "nodejs", "go", "go_test", "java", "php", "csharp", "bash", "typescript",
    "sql", "rust", "cuda", "lua", "R", "perl", "D_ut", "ruby", "scala", "julia", "pytest",
    "junit", "kotlin_script", "jest", "verilog", "python_gpu", "lean", "swift", "racket",
]  # fmt: skip


class Message(BaseModel):
    role: str
    content: str


class Prompt(BaseModel):
    id: int | str
    prompt: str | list[Message]
    labels: dict[str, Any] = {}


class TestConfig(BaseModel):
    """How a dataset's rows are judged. ``provided_data`` holds the rows themselves (a list for
    ``/get_prompts`` and ``/list_ids``, one row for ``/get_prompt_by_id`` and ``/submit``):
    this engine keeps no dataset tables, so every request carries its rows."""

    __test__ = False
    model_config = ConfigDict(**STRICT)

    dataset_type: str | None = Field(None, description="the dataset class, for unnamed datasets")
    language: SandboxFusionLanguage | None = None
    locale: str | None = None
    is_fewshot: bool | None = None
    compile_timeout: float | None = None
    run_timeout: float | None = None
    custom_extract_logic: str | None = None
    provided_data: list[dict[str, Any]] | dict[str, Any] | None = None
    extra: dict[str, Any] = {}


class GetPromptsRequest(BaseModel):
    model_config = ConfigDict(**STRICT)

    dataset: str
    config: TestConfig
    offset: int = 0
    limit: int = 1000000


class GetPromptByIdRequest(BaseModel):
    model_config = ConfigDict(**STRICT)

    dataset: str
    config: TestConfig
    id: int | str


class SubmitRequest(BaseModel):
    model_config = ConfigDict(**STRICT)

    dataset: str
    id: int | str
    completion: str
    config: TestConfig


class EvalTestCase(BaseModel):
    passed: bool
    exec_info: dict[str, Any] = Field(description="the run's RunCodeResponse, as /run_code's")
    test_info: dict[str, Any] | None = None
    verdict: str | None = Field(
        default=None, description="beyond SandboxFusion: code_eval's verdict (AC, WA, TLE, ...)"
    )
    reason: str | None = Field(
        default=None, description="beyond SandboxFusion: why it did not pass"
    )


class EvalResult(BaseModel):
    id: int | str
    accepted: bool
    extracted_code: str
    full_code: str | None = None
    test_code: str | None = None
    tests: list[EvalTestCase]
    extracted_type: Literal["fenced", "incomplete_fenced", "heuristic", "empty"] | None = None
    extra: dict[str, Any] | None = None


class OJErrorBody(BaseModel):
    """SandboxFusion's answer to a request it cannot judge (400) or a run it could not make
    (500)."""

    detail: str
