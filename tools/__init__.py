"""Built-in tool plugins. They import ``a2e`` only and run inside sandboxed workers."""

from tools.code_eval import CodeEval
from tools.files import FileTools
from tools.http import HttpTools
from tools.python_eval import PythonEval
from tools.shell import Shell

__all__ = ["BUILTIN_PLUGINS", "CodeEval", "FileTools", "HttpTools", "PythonEval", "Shell"]

BUILTIN_PLUGINS = (PythonEval, CodeEval, Shell, FileTools, HttpTools)
