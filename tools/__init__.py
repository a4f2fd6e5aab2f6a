"""Built-in tool plugins. They run inside sandboxed workers; ``use_a2a_agent``
(``A2APeers``) needs the ``a2a`` extra once peers are configured.

Each plugin is imported when first named here, not with the package: a plugin's zygote
imports its own module, and with it nothing of the others (``http``'s TLS stack, ``a2a``'s
client) that its workers could read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2e._lazy import lazy_exports

if TYPE_CHECKING:
    from a2e_engine.tools._a2a_peers import A2APeers
    from a2e_engine.tools._builtin import BUILTIN_PLUGINS
    from a2e_engine.tools._files import FileTools
    from a2e_engine.tools._http import HttpTools
    from a2e_engine.tools._python_eval import PythonEval
    from a2e_engine.tools._run_code import RunCode
    from a2e_engine.tools._shell import Shell
    from a2e_engine.tools.grading import CodeEval

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

__getattr__ = lazy_exports(
    __name__,
    {
        "BUILTIN_PLUGINS": f"{__name__}._builtin",
        "A2APeers": f"{__name__}._a2a_peers",
        "CodeEval": f"{__name__}.grading",
        "FileTools": f"{__name__}._files",
        "HttpTools": f"{__name__}._http",
        "PythonEval": f"{__name__}._python_eval",
        "RunCode": f"{__name__}._run_code",
        "Shell": f"{__name__}._shell",
    },
)
