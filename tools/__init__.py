"""Built-in tool plugins. They run inside sandboxed workers; ``use_a2a_agent``
(``A2APeers``) needs the ``a2a`` extra once peers are configured."""

from tools.a2a_peers import A2APeers
from tools.code_eval import CodeEval
from tools.files import FileTools
from tools.http import HttpTools
from tools.python_eval import PythonEval
from tools.shell import Shell

__all__ = [
    "BUILTIN_PLUGINS",
    "A2APeers",
    "CodeEval",
    "FileTools",
    "HttpTools",
    "PythonEval",
    "Shell",
]

BUILTIN_PLUGINS = (PythonEval, CodeEval, Shell, FileTools, HttpTools, A2APeers)
