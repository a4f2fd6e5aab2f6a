"""``run_code``: one program in a language (``tools.languages``), with its stdin, its arguments,
its files, its time and memory limits, and the files it made fetched back: what graders and
SandboxFusion clients send.

The result has SandboxFusion's shape, so that ``/run_code`` (``engine.service.sandbox_fusion``)
is a mapping onto this tool: ``status`` (``Success``, ``Failed`` when the program did not
finish with 0, ``SandboxError`` when it could not be run), ``compile_result`` (``null`` for a
language without a compile step) and ``run_result`` (``null`` when the compile failed), each
with ``status`` (``Finished``, ``Error`` when it could not be started, ``TimeLimitExceeded``,
``MemoryLimitExceeded``), ``execution_time`` and ``cpu_time`` (s), ``peak_memory_kb``,
``return_code`` (``null`` past a limit), ``stdout`` and ``stderr``; and ``files``, path to
base64. The call succeeds whenever the program ran, whatever it did: the verdict is in the data.

Runs under the ``process`` profile (it may fork and exec, it has no network), in a directory of
its own in the session's workspace. Paths in ``files`` and ``fetch_files`` stay inside it. The
compiler and the program may change files only in that directory (``confine_writes``; their
``TMPDIR`` is inside it too), which is what lets a session's compile cache
(``tools.compile_cache``) be trusted. ``memory_mb`` is
on the program's resident memory (``tools.resident``): past it, it is killed and the run is
``MemoryLimitExceeded``, as it is when its runtime says it ran out (``Language.out_of_memory``).
Everything the call holds, the compiler included, is capped by the call's memory cgroup.
"""

from __future__ import annotations

import base64
import binascii
import os
import tempfile
from typing import Any

from a2e.caps.tools.models import ToolDefinition, ToolParameter
from a2e.caps.tools.plugin import SandboxProfile, ToolPlugin
from a2e_engine.sandbox.landlock import WriteConfinement, confine_writes
from a2e_engine.tools.compile_cache import CompileCache
from a2e_engine.tools.files import resolve_confined
from a2e_engine.tools.languages import LANGUAGES, Language
from a2e_engine.tools.output import EventStream, Flusher
from a2e_engine.tools.processes import Finished, run_captured

__all__ = ["RunCode"]

#: What the fetched files may add up to (they travel in the result).
MAX_FETCH_BYTES = 8 * 1024 * 1024
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MEMORY_MB = 1024
MAX_MEMORY_MB = 65536


class RunCode(ToolPlugin):
    name = "run_code"
    sandbox_profile = SandboxProfile.PROCESS

    def _list_tools(self) -> list[ToolDefinition]:
        return [
            ToolDefinition(
                name="run_code",
                description="Run a program in a language (python, cpp, java, nodejs, go, rust, "
                "...) with its stdin, arguments and files, within time and memory limits, and "
                "return how it ended: status, compile and run results (exit code, stdout, "
                "stderr, time, CPU time, peak memory), and the files asked for.",
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
                    ToolParameter(name="args", type="array", description="the program's arguments"),
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
                    ToolParameter(
                        name="memory_mb",
                        type="integer",
                        description="resident memory the program may hold, in MiB "
                        f"({DEFAULT_MEMORY_MB})",
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
        code = str(arguments["code"])
        files = arguments.get("files") or {}
        if not isinstance(files, dict):
            raise ValueError("files must be an object of path to base64 content")
        run_args = _strings(arguments.get("args") or [], "args")
        memory_mb = _memory_mb(arguments.get("memory_mb"))
        workspace = self.context.workspace if self.context else os.getcwd()
        where = tempfile.mkdtemp(prefix="run-", dir=workspace)
        _write_files(where, files)
        with open(os.path.join(where, language.source_name(code)), "w") as fh:
            fh.write(code)
        # Beneath this the compiler and the program change only their run's directory, which
        # holds their TMPDIR too: the call's /tmp holds the session's workspace beneath it.
        os.mkdir(os.path.join(where, ".tmp"))
        confinement = confine_writes((where,))
        try:
            result: dict[str, Any] = {"status": "Success", "message": "", "compile_result": None}
            if language.compile is not None:
                compiled = self._compile(
                    language, code, files, where, memory_mb, confinement, arguments
                )
                result["compile_result"] = compiled
                if compiled["return_code"] != 0:
                    return {**result, "status": "Failed", "run_result": None, "files": {}}
            argv = [*language.argv(language.run, code, where, memory_mb), *run_args]
            ran = self._step(
                language,
                argv,
                code,
                where,
                arguments.get("stdin"),
                memory_mb,
                confinement,
                arguments,
                "run",
            )
        finally:
            if confinement is not None:
                confinement.close()
        result["run_result"] = ran
        if ran["status"] != "Finished" or ran["return_code"] != 0:
            result["status"] = "Failed"
        result["files"] = _fetch(where, arguments.get("fetch_files") or [])
        return result

    def _compile(
        self,
        language: Language,
        code: str,
        files: dict[str, Any],
        where: str,
        memory_mb: int,
        confinement: WriteConfinement | None,
        arguments: dict[str, Any],
    ) -> dict[str, Any]:
        """The compile step, or its outputs from the session's cache (only where programs
        cannot write the cache: ``confinement``)."""
        assert language.compile is not None
        argv = language.argv(language.compile, code, where, memory_mb)
        cache = CompileCache(os.path.dirname(where)) if confinement is not None else None
        key = (
            cache.key(language, code, files, language.argv(language.compile, code, "", 0))
            if cache
            else ""
        )
        if cache is not None:
            hit = cache.lookup(key)
            if hit is not None:
                entry, compiled = hit
                cache.place(entry, where)
                return {**compiled, "cached": True}
        compiled = self._step(
            language, argv, code, where, None, None, confinement, arguments, "compile"
        )
        if cache is not None and compiled["return_code"] == 0:
            cache.store(key, where, language.outputs, compiled)
        return {**compiled, "cached": False}

    def _step(
        self,
        language: Language,
        argv: list[str],
        code: str,
        where: str,
        stdin: Any,
        memory_mb: int | None,
        confinement: WriteConfinement | None,
        arguments: dict[str, Any],
        name: str,
    ) -> dict[str, Any]:
        line_by_line = bool(self.context and self.context.streaming)
        out = EventStream(self, "stdout" if name == "run" else f"{name}_stdout", line_by_line)
        err = EventStream(self, "stderr" if name == "run" else f"{name}_stderr", line_by_line)
        env = {
            **os.environ,
            "TMPDIR": os.path.join(where, ".tmp"),
            **language.environment(code, where, memory_mb or DEFAULT_MEMORY_MB),
        }
        limit = _seconds(arguments.get(f"{name}_timeout"), f"{name}_timeout")
        flusher = Flusher(out, err)
        flusher.start()
        try:
            finished = run_captured(
                argv,
                where,
                env,
                stdin if isinstance(stdin, str) else None,
                out,
                err,
                time_limit=limit,
                memory_limit_kb=memory_mb * 1024 if memory_mb is not None else None,
                preexec=confinement.enforce if confinement is not None else None,
            )
        except OSError as exc:  # the program could not be started at all
            return _not_started(f"{argv[0]}: {exc.strerror or exc}")
        finally:
            flusher.stop()
        stderr = err.getvalue()
        return {
            "status": _status(finished, stderr, language, memory_mb is not None),
            "execution_time": round(finished.seconds, 4),
            "cpu_time": round(finished.cpu_seconds, 4),
            "peak_memory_kb": finished.peak_kb,
            "return_code": finished.exit_code,
            "stdout": out.getvalue(),
            "stderr": stderr,
        }


def _status(finished: Finished, stderr: str, language: Language, limited: bool) -> str:
    if finished.memory_exceeded:
        return "MemoryLimitExceeded"
    if finished.timed_out:
        return "TimeLimitExceeded"
    ran_out = any(marker in stderr for marker in language.out_of_memory)
    if limited and finished.exit_code != 0 and ran_out:
        return "MemoryLimitExceeded"  # the runtime's own limit (the JVM's heap, V8's) came first
    return "Finished"


def _not_started(why: str) -> dict[str, Any]:
    return {
        "status": "Error",
        "execution_time": 0.0,
        "cpu_time": 0.0,
        "peak_memory_kb": 0,
        "return_code": None,
        "stdout": "",
        "stderr": why,
    }


def _strings(values: Any, name: str) -> list[str]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ValueError(f"{name} must be an array of strings")
    if any("\0" in v for v in values):
        raise ValueError(f"{name} must not contain NUL characters")
    return list(values)


def _memory_mb(value: Any) -> int:
    if value is None:
        return DEFAULT_MEMORY_MB
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_MEMORY_MB:
        raise ValueError(f"memory_mb must be an integer from 1 to {MAX_MEMORY_MB}, got {value!r}")
    return value


def _seconds(value: Any, name: str) -> float:
    if value is None:
        return DEFAULT_TIMEOUT_S
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
    return float(value)


def _sandbox_error(why: str) -> dict[str, Any]:
    return {
        "status": "SandboxError",
        "message": why,
        "compile_result": None,
        "run_result": None,
        "files": {},
    }


def _write_files(where: str, files: dict[str, Any]) -> None:
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
