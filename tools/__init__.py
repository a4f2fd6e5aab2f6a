"""Built-in tool plugins. They run inside sandboxed workers; ``use_a2a_agent``
(``A2APeers``) needs the ``a2a`` extra once peers are configured."""

from a2e_engine.tools.a2a_peers import A2APeers
from a2e_engine.tools.code_eval import CodeEval
from a2e_engine.tools.files import FileTools
from a2e_engine.tools.http import HttpTools
from a2e_engine.tools.python_eval import PythonEval
from a2e_engine.tools.run_code import RunCode
from a2e_engine.tools.shell import Shell

__all__ = [
    "BUILTIN_PLUGINS",
    "A2APeers",
    "CodeEval",
    "FileTools",
    "HttpTools",
    "PythonEval",
    "RunCode",
    "Shell",
]

BUILTIN_PLUGINS = (PythonEval, CodeEval, RunCode, Shell, FileTools, HttpTools, A2APeers)
