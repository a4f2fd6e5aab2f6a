"""``python_cells``: notebook cells run in order in one interpreter, as a Jupyter kernel runs
them, and what each one printed, showed and raised.

A cell sees what the cells before it defined. Like a notebook, an exception stops its own cell
and not the next ones. Each cell's result has SandboxFusion's ``CellRunResult`` shape (what
``/run_jupyter`` answers): ``stdout``, ``stderr``, ``display`` (the final expression's value, and
whatever ``display(obj)`` was given, each a MIME bundle: ``text/plain`` from ``repr``, and
``text/html``, ``image/png``, ... from the object's ``_repr_*_`` methods, as IPython builds it),
``error`` (a list of ``{ename, evalue, traceback}``, as a kernel reports it), and its
``execution_time``. A final expression followed by ``;`` is not shown.

Time: past ``cell_timeout`` a cell is interrupted with ``CellTimeoutError`` (a
``BaseException``, raised again every 0.1 s while the cell holds on) and the next cell runs;
past ``total_timeout`` the run stops there, and its status is ``TimeLimitExceeded``. Code that
outlasts both (a long call into C) is killed with the worker at the call's deadline, which
the caller sets beyond ``total_timeout``.

The cells run in the worker itself, under the ``compute`` profile of ``python_eval``: no
subprocesses, no sockets. ``stdin`` is empty. What the result can carry is capped: the text of
all cells, their displays, and the files fetched.
"""

from __future__ import annotations

import base64
import contextlib
import io
import linecache
import math
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any

from a2e_engine.tools._confined import (
    exchange_parameters,
    fetch_base64_files,
    write_base64_files,
)
from a2e_engine.tools._interactive import split_final_expression, user_traceback

if TYPE_CHECKING:
    from a2e.caps.tools._models import ToolDefinition

__all__ = [
    "MAX_CELLS",
    "CellTimeoutError",
    "NotebookSession",
    "cells_tool",
    "execute_cells",
    "mime_bundle",
    "run_cells",
    "session_tool",
]

#: Cells in one call.
MAX_CELLS = 1_000
#: Code contexts one ``python_session`` interpreter holds at most.
MAX_CONTEXTS = 64
#: What the text (stdout and stderr) of all cells may add up to, in characters.
MAX_TEXT_CHARS = 1_000_000
#: What the displays of all cells may add up to, in characters.
MAX_DISPLAY_CHARS = 2_000_000
#: What the fetched files may add up to, in bytes.
MAX_FETCH_BYTES = 2 * 1024 * 1024
#: The longest timeout taken, in seconds (a day is already past any call's deadline).
MAX_SECONDS = 10**9
#: How often an interrupted cell that holds on is interrupted again.
_REPEAT_S = 0.1
_CELL_PREFIX = "<cell "
#: IPython's order: the MIME type and the method that gives it.
_RICH_REPRS = (
    ("text/html", "_repr_html_"),
    ("text/markdown", "_repr_markdown_"),
    ("text/latex", "_repr_latex_"),
    ("image/svg+xml", "_repr_svg_"),
    ("image/png", "_repr_png_"),
    ("image/jpeg", "_repr_jpeg_"),
    ("application/json", "_repr_json_"),
)


class CellTimeoutError(BaseException):
    """A cell ran past its time. Not an ``Exception``: ``except Exception`` in the cell must
    not swallow it."""


class _Budget:
    """Characters left for one kind of output across all cells."""

    def __init__(self, chars: int) -> None:
        self.left = chars


class _CellText(io.TextIOBase):
    """One cell's stdout or stderr, within the shared budget."""

    def __init__(self, name: str, budget: _Budget) -> None:
        self.name = name
        self.budget = budget
        self.parts: list[str] = []
        self.omitted = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if self.budget.left >= len(text):
            self.budget.left -= len(text)
            self.parts.append(text)
        else:
            self.parts.append(text[: self.budget.left])
            self.omitted += len(text) - self.budget.left
            self.budget.left = 0
        return len(text)

    def getvalue(self) -> str:
        text = "".join(self.parts)
        if self.omitted:
            text += f"[... {self.omitted} characters of {self.name} omitted ...]"
        return text


class _Alarm:
    """Interrupts the running cell with ``CellTimeoutError`` when its time is up, and again
    every ``_REPEAT_S`` until it gives in. Only while armed: a signal that lands after the cell
    finished does nothing."""

    def __init__(self) -> None:
        self.armed = False
        self.fired = False
        self.why = ""
        self._saved: Any = None

    def __enter__(self) -> _Alarm:
        self._saved = signal.signal(signal.SIGALRM, self._fire)
        return self

    def __exit__(self, *exc: object) -> None:
        self.disarm()
        signal.signal(signal.SIGALRM, self._saved)

    def arm(self, seconds: float | None, why: str) -> None:
        """From now until ``disarm``; ``None``: no limit."""
        self.why, self.fired = why, False
        if seconds is not None:
            self.armed = True
            signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001), _REPEAT_S)

    def disarm(self) -> None:
        self.armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)

    def _fire(self, signum: int, frame: FrameType | None) -> None:
        if self.armed:
            self.fired = True
            raise CellTimeoutError(self.why)


def mime_bundle(value: Any) -> dict[str, Any]:
    """``value`` as a notebook shows it: ``text/plain`` always, each rich form it offers."""
    bundle: dict[str, Any] = {"text/plain": repr(value)}
    for mime, method in _RICH_REPRS:
        render = getattr(type(value), method, None)
        if render is None:
            continue
        try:
            shown = render(value)
        except Exception:  # a broken _repr_ is left out, as IPython leaves it out
            continue
        if isinstance(shown, bytes):
            shown = base64.b64encode(shown).decode()
        if shown is not None:
            bundle[mime] = shown
    return bundle


class _Runner:
    """The cells' shared namespace and budgets, and the run of one cell."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
        self.namespace["display"] = self._display
        self.text = _Budget(MAX_TEXT_CHARS)
        self.displays = _Budget(MAX_DISPLAY_CHARS)
        self._shown: list[dict[str, Any]] = []
        #: Which of the last cell's displays is its final expression's value (None: none).
        self.main_display: int | None = None

    def _display(self, *values: Any) -> None:
        """IPython's ``display(obj, ...)``, given to the cells."""
        for value in values:
            self._show(value)

    def _show(self, value: Any) -> None:
        bundle = mime_bundle(value)
        size = sum(len(str(v)) for v in bundle.values())
        if size > self.displays.left:
            left_out = f"[display of {size} characters omitted: the displays' budget is spent]"
            bundle = {"text/plain": left_out}
            size = 0
        self.displays.left -= size
        self._shown.append(bundle)

    def run(
        self, number: int, source: str, alarm: _Alarm, seconds: float | None, why: str
    ) -> dict[str, Any]:
        filename = f"{_CELL_PREFIX}{number}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        out, err = _CellText("stdout", self.text), _CellText("stderr", self.text)
        self._shown = []
        self.main_display = None
        errors: list[dict[str, Any]] = []
        saved = sys.stdout, sys.stderr, sys.stdin
        sys.stdout, sys.stderr, sys.stdin = out, err, io.StringIO("")
        started = self.clock()
        try:
            try:
                alarm.arm(seconds, why)
                body, final = split_final_expression(source, filename)
                exec(compile(body, filename, "exec"), self.namespace)
                if final is not None:
                    value = eval(compile(final, filename, "eval"), self.namespace)
                    if value is not None and not source.rstrip().endswith(";"):
                        self.namespace["_"] = value
                        self._show(value)
                        self.main_display = len(self._shown) - 1
            finally:
                alarm.disarm()
        except BaseException as exc:  # the cell's own failure, whatever it is, is its result
            alarm.disarm()
            errors.append(
                {
                    "ename": type(exc).__name__,
                    "evalue": str(exc),
                    "traceback": user_traceback(exc, _CELL_PREFIX, __file__),
                }
            )
        finally:
            sys.stdout, sys.stderr, sys.stdin = saved
        return {
            "stdout": out.getvalue(),
            "stderr": err.getvalue(),
            "display": self._shown,
            "error": errors,
            "execution_time": self.clock() - started,
        }


def run_cells(
    cells: list[str],
    cell_timeout: float = 0.0,
    total_timeout: float = 0.0,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Each cell in turn; 0 for a timeout means none. ``status`` is ``Finished``, or
    ``TimeLimitExceeded`` when ``total_timeout`` ran out (the cells after that one did not
    run)."""
    runner = _Runner(clock)
    results: list[dict[str, Any]] = []
    started = clock()
    status = "Finished"
    with _Alarm() as alarm:
        for number, source in enumerate(cells, 1):
            left = total_timeout - (clock() - started) if total_timeout else math.inf
            if left <= 0:
                status = "TimeLimitExceeded"
                break
            seconds: float | None = None
            why = ""
            if cell_timeout and cell_timeout <= left:
                seconds, why = cell_timeout, f"cell {number} ran past its {cell_timeout:g} s"
            elif total_timeout:
                seconds, why = left, f"the cells ran past their {total_timeout:g} s in all"
            results.append(runner.run(number, source, alarm, seconds, why))
            if alarm.fired and seconds == left:
                status = "TimeLimitExceeded"
                break
    return {"status": status, "cells": results, "execution_time": clock() - started}


def cells_tool() -> ToolDefinition:
    from a2e.caps.tools._models import ToolDefinition, ToolParameter

    return ToolDefinition(
        name="python_cells",
        description="Run notebook cells of Python in order in one sandboxed interpreter, each "
        "seeing what the earlier ones defined, and return each cell's stdout, stderr, "
        "displayed values and error, as a Jupyter kernel reports them.",
        input_parameters=[
            ToolParameter(
                name="cells", type="array", description="the cells' source", required=True
            ),
            ToolParameter(
                name="cell_timeout",
                type="number",
                description="seconds each cell may run (0: no limit of its own)",
            ),
            ToolParameter(
                name="total_timeout",
                type="number",
                description="seconds all cells may run (0: the call's own deadline)",
            ),
            *exchange_parameters(),
        ],
        output_parameters=[
            ToolParameter(
                name="status", type="string", description="Finished or TimeLimitExceeded"
            ),
            ToolParameter(
                name="cells",
                type="array",
                description="per cell: stdout, stderr, display, error, execution_time",
            ),
            ToolParameter(name="files", type="object", description="path to base64"),
        ],
        tags=["code", "python", "notebook"],
        toolkit="code",
    )


def execute_cells(arguments: dict[str, Any], workspace: str) -> dict[str, Any]:
    """The ``python_cells`` call: its files written beneath ``workspace``, the cells run there,
    the files asked for read back. Raises ``ValueError`` for arguments it cannot take."""
    cells = arguments["cells"]
    if not isinstance(cells, list) or not all(isinstance(cell, str) for cell in cells):
        raise ValueError("cells must be an array of strings")
    if len(cells) > MAX_CELLS:
        raise ValueError(f"cells must hold at most {MAX_CELLS} cells, got {len(cells)}")
    cell_timeout = _seconds(arguments.get("cell_timeout"), "cell_timeout")
    total_timeout = _seconds(arguments.get("total_timeout"), "total_timeout")
    fetch = arguments.get("fetch_files") or []
    if not isinstance(fetch, list) or not all(isinstance(path, str) for path in fetch):
        raise ValueError("fetch_files must be an array of paths")
    write_base64_files(workspace, arguments.get("files") or {})
    result = run_cells(cells, cell_timeout, total_timeout)
    result["files"] = fetch_base64_files(workspace, fetch, MAX_FETCH_BYTES)
    return result


def _seconds(value: Any, name: str) -> float:
    if value is None:
        return 0.0
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not 0 <= value <= MAX_SECONDS
    ):
        raise ValueError(
            f"{name} must be a number of seconds from 0 to {MAX_SECONDS}, got {value!r}"
        )
    return float(value)


class NotebookSession:
    """``python_session``'s kernel: the cells of one session, one per call, in a worker the
    session keeps (``ToolPlugin.resident_tools``), so that each cell sees what the earlier
    ones of its context defined. The call's deadline is the cell's: the supervisor
    interrupts it then (SIGINT, which the cell sees as ``KeyboardInterrupt``, as in a
    notebook) and kills the worker if it holds on.

    A context is a namespace and a count of its own in the same interpreter (E2B's code
    contexts; ``""`` is the default one): cells of one do not see another's variables, and
    ``reset`` starts one afresh. A cell may run in a directory of the workspace and with
    variables of its own in ``os.environ``, both put back after it."""

    def __init__(self, workspace: str = ".") -> None:
        self.workspace = workspace
        self.contexts: dict[str, _Context] = {}

    def run(
        self,
        code: str,
        context: str = "",
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        reset: bool = False,
    ) -> dict[str, Any]:
        if reset:
            self.contexts.pop(context, None)
        kept = self.contexts.get(context)
        if kept is None:
            if len(self.contexts) >= MAX_CONTEXTS:
                raise ValueError(f"this interpreter holds {MAX_CONTEXTS} contexts already")
            kept = self.contexts[context] = _Context(_Runner())
        kept.count += 1
        saved = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            with _Alarm() as alarm, _environment(env or {}), _directory(self.workspace, cwd):
                cell = kept.runner.run(kept.count, code, alarm, None, "")
        finally:
            signal.signal(signal.SIGINT, saved)
        return {**cell, "execution_count": kept.count, "main_display": kept.runner.main_display}


@dataclass
class _Context:
    runner: _Runner
    count: int = 0


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    """``env`` in ``os.environ`` for the cell, what was there before put back after."""
    for name, value in env.items():
        if not isinstance(name, str) or not isinstance(value, str) or not name or "=" in name:
            raise ValueError(f"env: {name!r} is not a variable name with a string value")
    before = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, was in before.items():
            if was is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = was


@contextlib.contextmanager
def _directory(workspace: str, cwd: str | None) -> Iterator[None]:
    """The cell runs in ``cwd`` (beneath ``workspace`` when relative), if given."""
    if cwd is None:
        yield
        return
    before = os.getcwd()
    os.chdir(os.path.join(workspace, cwd))
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.chdir(before)


def session_tool() -> ToolDefinition:
    from a2e.caps.tools._models import ToolDefinition, ToolParameter

    return ToolDefinition(
        name="python_session",
        description="Run a cell of Python in this session's own sandboxed interpreter, which "
        "keeps what earlier cells defined (a notebook), and return its stdout, stderr, "
        "displayed values and error.",
        input_parameters=[
            ToolParameter(name="code", type="string", description="the cell", required=True),
            ToolParameter(
                name="context",
                type="string",
                description="the code context, a namespace of its own (default: the session's)",
            ),
            ToolParameter(
                name="env", type="object", description="variables in os.environ for this cell"
            ),
            ToolParameter(
                name="cwd", type="string", description="the cell's directory, in the workspace"
            ),
            ToolParameter(
                name="reset", type="boolean", description="start the context afresh first"
            ),
        ],
        output_parameters=[
            ToolParameter(name="stdout", type="string", description="what the cell printed"),
            ToolParameter(name="stderr", type="string", description="what it wrote to stderr"),
            ToolParameter(name="display", type="array", description="MIME bundles it showed"),
            ToolParameter(name="error", type="array", description="ename, evalue, traceback"),
            ToolParameter(
                name="execution_count",
                type="integer",
                description="the cell's number in this interpreter (1: a new one)",
            ),
            ToolParameter(
                name="main_display",
                type="integer",
                description="which display is the final expression's value (null: none)",
            ),
        ],
        tags=["code", "python", "notebook", "stateful"],
        toolkit="code",
    )
