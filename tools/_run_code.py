"""``run_code``: one program in a language (``tools._languages``), with its stdin, its arguments,
its files, its time and memory limits, and the files it made fetched back: what graders and
SandboxFusion clients send.

The result has SandboxFusion's shape, so that ``/run_code`` (``engine.service._sandbox_fusion``)
is a mapping onto this tool: ``status`` (``Success``, ``Failed`` when the program did not
finish with 0, ``SandboxError`` when it could not be run), ``compile_result`` (``null`` for a
language without a compile step) and ``run_result`` (``null`` when the compile failed), each
with ``status`` (``Finished``, ``Error`` when it could not be started, ``TimeLimitExceeded``,
``MemoryLimitExceeded``), ``execution_time`` and ``cpu_time`` (s), ``peak_memory_kb``,
``return_code`` (``null`` past a limit), ``stdout`` and ``stderr``, and past a time limit which
one (``exceeded``: ``wall_time`` for ``run_timeout``, SandboxFusion's, or ``cpu_time`` for the
optional ``cpu_time_limit``); and ``files``, path to base64. The call succeeds whenever the
program ran, whatever it did: the verdict is in the data.

Runs under the ``process`` profile (it may fork and exec, it has no network), in a directory of
its own in the session's workspace. Paths in ``files`` and ``fetch_files`` stay inside it. The
compiler and the program may change files only in their own directory (``confine_writes``;
their ``TMPDIR`` is inside it too), which is what lets the compile cache shared by every
session of the engine (``tools._compile_cache``; its directories are ``plugin_dirs``, given to
this plugin's workers alone) be trusted. ``memory_mb`` is
on the program's resident memory (``sandbox._tree_usage``): past it, it is killed and the run is
``MemoryLimitExceeded``, as it is when its runtime says it ran out (``Language.out_of_memory``).
Everything the call holds, the compiler included, is capped by the call's memory cgroup.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from a2e.caps.tools._plugin import SandboxProfile, ToolPlugin
from a2e_engine.tools._confined import exchange_parameters, fetch_base64_files
from a2e_engine.tools._languages import LANGUAGES
from a2e_engine.tools._output import EventStream, Flusher
from a2e_engine.tools._python_main import remember_fresh_interpreter
from a2e_engine.tools._steps import (
    DEFAULT_MEMORY_MB,
    DEFAULT_TIMEOUT_S,
    Program,
    Role,
    RunLimits,
    cpu_seconds_of,
    memory_mb_of,
    seconds_of,
)
from a2e_engine.tools._submission import Submission

if TYPE_CHECKING:
    from a2e.caps.tools._models import ToolDefinition

__all__ = ["RunCode"]

#: What the fetched files may add up to (they travel in the result).
MAX_FETCH_BYTES = 8 * 1024 * 1024


class RunCode(ToolPlugin):
    name = "run_code"
    sandbox_profile = SandboxProfile.PROCESS
    #: The engine's shared compile cache and precompiled headers (``tools._compile_cache
    #: .shared_compile_cache``), set by the zygote where Landlock keeps every other tool's
    #: workers out of them; empty: the session's own cache.
    plugin_dirs: tuple[str, ...] = ()

    def _list_tools(self) -> list[ToolDefinition]:
        from a2e.caps.tools._models import ToolDefinition, ToolParameter

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
                    *exchange_parameters(),
                    ToolParameter(
                        name="compile_timeout",
                        type="number",
                        description=f"seconds for the compile step ({DEFAULT_TIMEOUT_S:g})",
                    ),
                    ToolParameter(
                        name="run_timeout",
                        type="number",
                        description=f"wall-clock seconds for the run ({DEFAULT_TIMEOUT_S:g})",
                    ),
                    ToolParameter(
                        name="cpu_time_limit",
                        type="number",
                        description="CPU seconds the run may spend, all its processes and "
                        "threads together (none by default); past it the run is "
                        "TimeLimitExceeded, with exceeded: cpu_time",
                    ),
                    ToolParameter(
                        name="fresh_interpreter",
                        type="boolean",
                        description="python only: run the program in an interpreter of its own "
                        "rather than a fork of a warm one that looks the same to it (slower)",
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
        files = arguments.get("files") or {}
        if not isinstance(files, dict):
            raise ValueError("files must be an object of path to base64 content")
        fetch = arguments.get("fetch_files") or []
        if not isinstance(fetch, list):
            raise ValueError("fetch_files must be an array of paths")
        run_args = _strings(arguments.get("args") or [], "args")
        limits = RunLimits(
            seconds_of(arguments.get("run_timeout"), "run_timeout"),
            memory_mb_of(arguments.get("memory_mb")),
            cpu_seconds_of(arguments.get("cpu_time_limit")),
        )
        compile_seconds = seconds_of(arguments.get("compile_timeout"), "compile_timeout")
        workspace = self.context.workspace if self.context else os.getcwd()
        read_roots = self.context.read_roots if self.context else ()
        fresh = arguments.get("fresh_interpreter", False) is True
        code = str(arguments["code"])
        program = Program(language, code, files, Role.ONCE)
        submission = Submission(
            program, workspace, self.plugin_dirs, read_roots, fresh_interpreter=fresh
        )
        try:
            result: dict[str, Any] = {"status": "Success", "message": "", "compile_result": None}
            if language.compile is not None:
                with self._streams("compile_") as (out, err):
                    compiled = submission.compile(compile_seconds, out, err)
                result["compile_result"] = compiled
                if compiled is not None and compiled["return_code"] != 0:
                    return {**result, "status": "Failed", "run_result": None, "files": {}}
            stdin = arguments.get("stdin")
            # The run's output is flushed by the loop that watches it, not a thread: a warm
            # Python run forks this process, cheaply only while it has one thread.
            with self._streams("", threaded=False) as (out, err):
                given = stdin if isinstance(stdin, str) else None
                ran = submission.run(
                    submission.home, given, run_args, limits, out, err, tick=self._flusher.tick
                )
            result["run_result"] = ran
            if ran["status"] != "Finished" or ran["return_code"] != 0:
                result["status"] = "Failed"
            result["files"] = fetch_base64_files(submission.home, fetch, MAX_FETCH_BYTES)
            return result
        finally:
            submission.close()

    def preload(self) -> None:
        """What a fresh interpreter is like, read once here in the zygote: python programs run
        as a fork of the worker made to look like one (``tools._python_main``)."""
        remember_fresh_interpreter()

    _flusher: Flusher

    @contextmanager
    def _streams(
        self, prefix: str, threaded: bool = True
    ) -> Iterator[tuple[EventStream, EventStream]]:
        """The step's stdout and stderr, streamed as events (``compile_stdout``, ``stdout``)
        while it runs; what a non-streaming call holds pending goes out every 0.1 s, from a
        thread of its own or (``threaded=False``) whenever ``self._flusher.tick`` is called."""
        line_by_line = bool(self.context and self.context.streaming)
        out = EventStream(self, f"{prefix}stdout", line_by_line)
        err = EventStream(self, f"{prefix}stderr", line_by_line)
        self._flusher = Flusher(out, err)
        if threaded:
            self._flusher.start()
        try:
            yield out, err
        finally:
            self._flusher.stop()


def _strings(values: Any, name: str) -> list[str]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ValueError(f"{name} must be an array of strings")
    if any("\0" in v for v in values):
        raise ValueError(f"{name} must not contain NUL characters")
    return list(values)


def _sandbox_error(why: str) -> dict[str, Any]:
    return {
        "status": "SandboxError",
        "message": why,
        "compile_result": None,
        "run_result": None,
        "files": {},
    }
