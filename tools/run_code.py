"""``run_code``: one program in a language (``tools.languages``), with its stdin, its files, its
time limits, and the files it made fetched back: what graders and SandboxFusion clients send.

The result has SandboxFusion's shape, so that ``/run_code`` (``engine.service.sandbox_fusion``)
is a mapping onto this tool: ``status`` (``Success``, ``Failed`` when the program did not
finish with 0, ``SandboxError`` when it could not be run), ``compile_result`` (``null`` for a
language without a compile step) and ``run_result`` (``null`` when the compile failed), each
with ``status`` (``Finished``, ``TimeLimitExceeded``), ``execution_time`` (s), ``return_code``
(``null`` past the time limit), ``stdout`` and ``stderr``; and ``files``, path to base64. The
call succeeds whenever the program ran, whatever it did: the verdict is in the data.

Runs under the ``process`` profile (it may fork and exec, it has no network), in a directory of
its own in the session's workspace. Paths in ``files`` and ``fetch_files`` stay inside it. Its
memory is the call's (``--memory-mb``, the memory cgroup): a worker cannot lower a limit for
its child, since the sandbox lets it set none.
"""

from __future__ import annotations

import base64
import binascii
import os
import tempfile
from typing import Any

from a2e.caps.tools.models import ToolDefinition, ToolParameter
from a2e.caps.tools.plugin import SandboxProfile, ToolPlugin
from a2e_engine.tools.files import resolve_confined
from a2e_engine.tools.languages import LANGUAGES, Language
from a2e_engine.tools.output import EventStream, Flusher
from a2e_engine.tools.processes import run_captured

__all__ = ["RunCode"]

#: What the fetched files may add up to (they travel in the result).
MAX_FETCH_BYTES = 8 * 1024 * 1024
DEFAULT_TIMEOUT_S = 10.0


class RunCode(ToolPlugin):
    name = "run_code"
    sandbox_profile = SandboxProfile.PROCESS

    def _list_tools(self) -> list[ToolDefinition]:
        return [
            ToolDefinition(
                name="run_code",
                description="Run a program in a language (python, bash, ...) with its stdin and "
                "files, and return how it ended: status, compile and run results (exit code, "
                "stdout, stderr, time), and the files asked for.",
                input_parameters=[
                    ToolParameter(
                        name="language",
                        type="string",
                        description="the program's language",
                        required=True,
                        enum=sorted(LANGUAGES),
                    ),
                    ToolParameter(
                        name="code", type="string", description="the source", required=True
                    ),
                    ToolParameter(name="stdin", type="string", description="the program's input"),
                    ToolParameter(
                        name="files",
                        type="object",
                        description="files written first: path (relative) to base64 content",
                    ),
                    ToolParameter(
                        name="fetch_files",
                        type="array",
                        description="paths whose content comes back, base64",
                    ),
                    ToolParameter(
                        name="compile_timeout",
                        type="number",
                        description=f"seconds for the compile step ({DEFAULT_TIMEOUT_S:g})",
                    ),
                    ToolParameter(
                        name="run_timeout",
                        type="number",
                        description=f"seconds for the run ({DEFAULT_TIMEOUT_S:g})",
                    ),
                ],
                output_parameters=[
                    ToolParameter(
                        name="status", type="string", description="Success, Failed, SandboxError"
                    ),
                    ToolParameter(name="compile_result", type="object", description="or null"),
                    ToolParameter(name="run_result", type="object", description="or null"),
                    ToolParameter(name="files", type="object", description="path to base64"),
                ],
                streaming=True,
                idempotent=True,
                tags=["code", "judge", "process"],
                toolkit="code",
            )
        ]

    def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        language = LANGUAGES[str(arguments["language"])]
        missing = language.missing()
        if missing:
            return _sandbox_error(missing)
        workspace = self.context.workspace if self.context else os.getcwd()
        where = tempfile.mkdtemp(prefix="run-", dir=workspace)
        _write_files(where, arguments.get("files") or {})
        with open(os.path.join(where, language.source), "w") as fh:
            fh.write(str(arguments["code"]))
        result: dict[str, Any] = {"status": "Success", "message": "", "compile_result": None}
        if language.compile is not None:
            compiled = self._step(language, language.compile, where, None, arguments, "compile")
            result["compile_result"] = compiled
            if compiled["return_code"] != 0:
                return {**result, "status": "Failed", "run_result": None, "files": {}}
        ran = self._step(language, language.run, where, arguments.get("stdin"), arguments, "run")
        result["run_result"] = ran
        if ran["return_code"] != 0:
            result["status"] = "Failed"
        result["files"] = _fetch(where, arguments.get("fetch_files") or [])
        return result

    def _step(
        self,
        language: Language,
        step: tuple[str, ...],
        where: str,
        stdin: Any,
        arguments: dict[str, Any],
        name: str,
    ) -> dict[str, Any]:
        line_by_line = bool(self.context and self.context.streaming)
        out = EventStream(self, "stdout" if name == "run" else f"{name}_stdout", line_by_line)
        err = EventStream(self, "stderr" if name == "run" else f"{name}_stderr", line_by_line)
        flusher = Flusher(out, err)
        flusher.start()
        limit = float(arguments.get(f"{name}_timeout") or DEFAULT_TIMEOUT_S)
        try:
            finished = run_captured(
                language.argv(step),
                where,
                dict(os.environ),
                stdin if isinstance(stdin, str) else None,
                out,
                err,
                time_limit=limit,
            )
        finally:
            flusher.stop()
        return {
            "status": "Finished" if finished.exit_code is not None else "TimeLimitExceeded",
            "execution_time": round(finished.seconds, 4),
            "return_code": finished.exit_code,
            "stdout": out.getvalue(),
            "stderr": err.getvalue(),
        }


def _sandbox_error(why: str) -> dict[str, Any]:
    return {
        "status": "SandboxError",
        "message": why,
        "compile_result": None,
        "run_result": None,
        "files": {},
    }


def _write_files(where: str, files: Any) -> None:
    if not isinstance(files, dict):
        raise ValueError("files must be an object of path to base64 content")
    for path, content in files.items():
        if content is None:
            continue
        target = resolve_confined(str(path), where, ())
        try:
            data = base64.b64decode(str(content), validate=True)
        except binascii.Error:
            raise ValueError(f"files[{path!r}] is not base64") from None
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as fh:
            fh.write(data)


def _fetch(where: str, paths: Any) -> dict[str, str]:
    """The files asked for that exist (others are left out), base64, within MAX_FETCH_BYTES."""
    if not isinstance(paths, list):
        raise ValueError("fetch_files must be an array of paths")
    fetched: dict[str, str] = {}
    left = MAX_FETCH_BYTES
    for path in paths:
        try:
            target = resolve_confined(str(path), where, ())
            with open(target, "rb") as fh:
                data = fh.read(left + 1)
        except (OSError, ValueError):
            continue
        if len(data) > left:
            raise ValueError(f"the files to fetch come to more than {MAX_FETCH_BYTES} bytes")
        left -= len(data)
        fetched[str(path)] = base64.b64encode(data).decode()
    return fetched
