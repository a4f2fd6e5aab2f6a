"""Built-in tool plugins. They run inside sandboxed workers; ``use_a2a_agent``
(``A2APeers``) needs the ``a2a`` extra once peers are configured.

Each plugin is imported when first named here, not with the package: a plugin's zygote
imports its own module, and with it nothing of the others (``http``'s TLS stack, ``a2a``'s
client) that its workers could read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from a2e.lazy import lazy_exports

if TYPE_CHECKING:
    from a2e.caps.tools.plugin import ToolPlugin
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

#: Each built-in plugin class by the module that defines it, in the engine's order.
_HOMES = {
    "PythonEval": f"{__name__}.python_eval",
    "CodeEval": f"{__name__}.code_eval",
    "RunCode": f"{__name__}.run_code",
    "Shell": f"{__name__}.shell",
    "FileTools": f"{__name__}.files",
    "HttpTools": f"{__name__}.http",
    "A2APeers": f"{__name__}.a2a_peers",
}
_plugin_class = lazy_exports(__name__, _HOMES)


def __getattr__(name: str) -> Any:
    if name == "BUILTIN_PLUGINS":
        plugins: tuple[type[ToolPlugin], ...] = tuple(_plugin_class(n) for n in _HOMES)
        return plugins
    return _plugin_class(name)
