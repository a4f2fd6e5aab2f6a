"""Built-in tool plugins. They import ``a2e`` only and run inside sandboxed workers."""

from tools.code_eval import CodeEval
from tools.files import FileTools
from tools.python_eval import PythonEval

__all__ = ["BUILTIN_PLUGINS", "CodeEval", "FileTools", "PythonEval"]

BUILTIN_PLUGINS = (PythonEval, CodeEval, FileTools)
