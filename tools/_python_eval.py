"""``python_eval``: run a snippet of Python in the worker and return what it printed; and
``python_cells`` and ``python_session`` (``tools._python_cells``), notebook cells run in one
interpreter, in one call or one per call of a session, which share this plugin's zygote and
profile.

Output is captured at the Python level (``sys.stdout``/``sys.stderr``) and always travels as
``artifact`` events named ``stdout`` and ``stderr``: live, line by line, when the call streams;
coalesced otherwise. Because it left the worker as it was produced, a call that times out or
crashes still returns its output so far. The value of a final expression is returned too, the way
a REPL shows it. The tool runs under the ``compute`` profile: no subprocesses, no sockets.
"""

from __future__ import annotations

import io
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from a2e.caps.tools._plugin import SandboxProfile, ToolExecutionError, ToolPlugin
from a2e.caps.tools._reasons import FailureReason
from a2e_engine.tools._interactive import split_final_expression, user_traceback
from a2e_engine.tools._output import EventStream, Flusher, results_of
from a2e_engine.tools._python_cells import (
    NotebookSession,
    cells_tool,
    execute_cells,
    session_tool,
)

if TYPE_CHECKING:
    from a2e.caps.tools._models import ToolDefinition

__all__ = ["PythonEval"]

_VALUE_REPR_CHARS = 10_000
_FILENAME = "<python_eval>"


def _jsonable(value: Any) -> bool:
    try:
        return len(json.dumps(value, allow_nan=False)) <= _VALUE_REPR_CHARS
    except (TypeError, ValueError, RecursionError):
        return False


class PythonEval(ToolPlugin):
    name = "python_eval"
    sandbox_profile = SandboxProfile.COMPUTE
    resident_tools = frozenset({"python_session"})
    _notebook: NotebookSession | None = None

    def profile_for(self, tool_name: str) -> str:
        """``python_session``'s interpreter is kept, and may be forked (``sandbox._forks``);
        the others run once and may not."""
        return SandboxProfile.SESSION if tool_name == "python_session" else self.sandbox_profile

    def _list_tools(self) -> list[ToolDefinition]:
        from a2e.caps.tools._models import ToolDefinition, ToolParameter

        return [
            ToolDefinition(
                name="python_eval",
                description="Run Python code in a sandboxed process and return its stdout, stderr "
                "and the value of a final expression.",
                input_parameters=[
                    ToolParameter(
                        name="code",
                        type="string",
                        description="Python source to run",
                        required=True,
                    ),
                    ToolParameter(
                        name="stdin",
                        type="string",
                        description="Text the code reads from sys.stdin",
                    ),
                ],
                output_parameters=[
                    ToolParameter(
                        name="stdout", type="string", description="What the code printed"
                    ),
                    ToolParameter(
                        name="stderr", type="string", description="What it wrote to stderr"
                    ),
                    ToolParameter(
                        name="value",
                        type="string",
                        description="The final expression's value (JSON when possible)",
                    ),
                ],
                streaming=True,
                tags=["code", "python"],
                toolkit="code",
            ),
            cells_tool(),
            session_tool(),
        ]

    def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if tool_name == "python_session":
            if self._notebook is None:
                workspace = self.context.workspace if self.context else os.getcwd()
                self._notebook = NotebookSession(workspace)
            return self._notebook.run(
                str(arguments["code"]),
                str(arguments.get("context") or ""),
                arguments.get("env"),
                arguments.get("cwd"),
                bool(arguments.get("reset")),
            )
        if tool_name == "python_cells":
            return execute_cells(arguments, self.context.workspace if self.context else os.getcwd())
        line_by_line = bool(self.context and self.context.streaming)
        out = EventStream(self, "stdout", line_by_line)
        err = EventStream(self, "stderr", line_by_line)
        flusher = Flusher(out, err)
        flusher.start()
        saved = sys.stdout, sys.stderr, sys.stdin
        sys.stdout, sys.stderr = out, err
        sys.stdin = io.StringIO(arguments.get("stdin") or "")
        namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
        value: Any = None
        has_value = False
        failure: BaseException | None = None
        try:
            body, final = split_final_expression(arguments["code"], _FILENAME)
            exec(compile(body, _FILENAME, "exec"), namespace)
            if final is not None:
                value = eval(compile(final, _FILENAME, "eval"), namespace)
                has_value = value is not None
        except BaseException as exc:  # SystemExit and KeyboardInterrupt are failures of the code
            failure = exc
            err.write("".join(user_traceback(exc, _FILENAME)))
        finally:
            flusher.stop()
            sys.stdout, sys.stderr, sys.stdin = saved
        result = results_of(out, err)
        if failure is not None:
            result["exception"] = {
                "type": type(failure).__name__,
                "message": str(failure),
                "traceback": "".join(user_traceback(failure, _FILENAME)),
            }
            if isinstance(failure, MemoryError):
                raise ToolExecutionError(
                    "out of memory (MemoryError)", result, reason=FailureReason.OUT_OF_MEMORY
                )
            raise ToolExecutionError(f"{type(failure).__name__}: {failure}", result)
        if has_value:
            result["value"] = value if _jsonable(value) else None
            result["value_repr"] = repr(value)[:_VALUE_REPR_CHARS]
        return result
