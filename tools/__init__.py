"""Built-in tool plugins. They import ``a2e`` only and run inside sandboxed workers."""

from tools.files import FileTools
from tools.python_eval import PythonEval

__all__ = ["BUILTIN_PLUGINS", "FileTools", "PythonEval"]

BUILTIN_PLUGINS = (PythonEval, FileTools)
