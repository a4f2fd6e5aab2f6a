"""``python_eval``: run a snippet of Python in the worker and return what it printed.

Output is captured at the Python level (``sys.stdout``/``sys.stderr``) and always travels as
``artifact`` events named ``stdout`` and ``stderr``: live, line by line, when the call streams;
coalesced otherwise. Because it left the worker as it was produced, a call that times out or
crashes still returns its output so far. The value of a final expression is returned too, the way
a REPL shows it. The tool runs under the ``compute`` profile: no subprocesses, no sockets.
"""

from __future__ import annotations

import ast
import io
import json
import sys
import traceback
from typing import TYPE_CHECKING, Any

from a2e.caps.tools.plugin import SandboxProfile, ToolExecutionError, ToolPlugin
from a2e.caps.tools.reasons import FailureReason
from a2e_engine.tools.output import EventStream, Flusher, results_of

if TYPE_CHECKING:
    from a2e.caps.tools.models import ToolDefinition

__all__ = ["PythonEval"]

_VALUE_REPR_CHARS = 10_000
_FILENAME = "<python_eval>"


def _split_final_expression(code: str) -> tuple[ast.Module, ast.Expression | None]:
    tree = ast.parse(code, _FILENAME, "exec")
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body.pop()
        return tree, ast.Expression(last.value)  # type: ignore[attr-defined]
    return tree, None


def _user_traceback(exc: BaseException) -> str:
    """The traceback from the first frame of the user's code on; our wrapper is noise to them."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != _FILENAME:
        tb = tb.tb_next
    if tb is None:
        return "".join(traceback.format_exception_only(exc))
    return "".join(traceback.format_exception(type(exc), exc, tb))


def _jsonable(value: Any) -> bool:
    try:
        return len(json.dumps(value, allow_nan=False)) <= _VALUE_REPR_CHARS
    except (TypeError, ValueError, RecursionError):
        return False


class PythonEval(ToolPlugin):
    name = "python_eval"
    sandbox_profile = SandboxProfile.COMPUTE

    def _list_tools(self) -> list[ToolDefinition]:
        from a2e.caps.tools.models import ToolDefinition, ToolParameter

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
            )
        ]

    def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
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
            body, final = _split_final_expression(arguments["code"])
            exec(compile(body, _FILENAME, "exec"), namespace)
            if final is not None:
                value = eval(compile(final, _FILENAME, "eval"), namespace)
                has_value = value is not None
        except BaseException as exc:  # SystemExit and KeyboardInterrupt are failures of the code
            failure = exc
            err.write(_user_traceback(exc))
        finally:
            flusher.stop()
            sys.stdout, sys.stderr, sys.stdin = saved
        result = results_of(out, err)
        if failure is not None:
            result["exception"] = {
                "type": type(failure).__name__,
                "message": str(failure),
                "traceback": _user_traceback(failure),
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
