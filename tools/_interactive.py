"""Python run the way a REPL or a notebook runs it: the statements, then the value of a final
expression, and a traceback that starts at the user's code. ``python_eval`` and
``python_cells`` share it, so that a snippet means the same in both."""

from __future__ import annotations

import ast
import traceback

__all__ = ["split_final_expression", "user_traceback"]


def split_final_expression(code: str, filename: str) -> tuple[ast.Module, ast.Expression | None]:
    """``code`` parsed, with its last statement apart when it is an expression (its value is
    what a REPL shows). Raises ``SyntaxError``."""
    tree = ast.parse(code, filename, "exec")
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body.pop()
        return tree, ast.Expression(last.value)  # type: ignore[attr-defined]
    return tree, None


def user_traceback(exc: BaseException, prefix: str, hidden: str = "") -> list[str]:
    """The traceback's lines from the first frame in a file named ``prefix...`` on, leaving
    out frames of the file ``hidden`` (the handler that raised a timeout into the code): the
    wrapper that ran the code is noise to whoever wrote it."""
    tb = exc.__traceback__
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith(prefix):
        tb = tb.tb_next
    if tb is None:
        return traceback.format_exception_only(exc)
    shown = traceback.TracebackException(type(exc), exc, tb)
    if hidden:
        kept = [frame for frame in shown.stack if frame.filename != hidden]
        shown.stack = traceback.StackSummary.from_list(kept)
    return list(shown.format())
