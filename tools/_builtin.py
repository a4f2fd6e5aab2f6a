"""``BUILTIN_PLUGINS``: every built-in plugin class, in the engine's order. Importing this
imports them all; the package's other names import only their own plugin's module."""

from __future__ import annotations

from a2e.caps.tools._plugin import ToolPlugin
from a2e_engine.tools._a2a_peers import A2APeers
from a2e_engine.tools._files import FileTools
from a2e_engine.tools._http import HttpTools
from a2e_engine.tools._python_eval import PythonEval
from a2e_engine.tools._run_code import RunCode
from a2e_engine.tools._shell import Shell
from a2e_engine.tools.grading import CodeEval

__all__ = ["BUILTIN_PLUGINS"]

BUILTIN_PLUGINS: tuple[type[ToolPlugin], ...] = (
    PythonEval,
    CodeEval,
    RunCode,
    Shell,
    FileTools,
    HttpTools,
    A2APeers,
)
