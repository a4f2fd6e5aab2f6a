"""The ``a2e`` command: ``demo``, ``serve``, ``list``, ``doctor``, ``call``, ``eval``, and those
installed from outside the engine (``bench``). One module per command, each adding its own
parser (``register``); ``main`` puts them together.

Whatever goes wrong is one line on stderr, never a traceback, and the exit status says what
kind of failure it was (``errors.EXIT_STATUS``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2e._lazy import lazy_exports

if TYPE_CHECKING:
    from a2e_engine.engine.cli._app import main
    from a2e_engine.engine.cli._errors import EXIT_STATUS

__all__ = ["EXIT_STATUS", "main"]

__getattr__ = lazy_exports(
    __name__,
    {"EXIT_STATUS": "a2e_engine.engine.cli._errors", "main": "a2e_engine.engine.cli._app"},
)
