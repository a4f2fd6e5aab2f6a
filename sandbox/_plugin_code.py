"""The plugins' own part of the zygote's preparation, a step in ``sandbox._contain.LAYERS``
though no isolation layer: each plugin's ``preload`` (what every worker then inherits
imported, so it runs before the layers that probe by forking and before ``forking`` counts the
zygote's threads, and after the subreaper, which then catches what a preload leaves running),
and the code a worker may need to import lazily (``Preparation.code_paths``), which the uid's
way to the interpreter, the mount template's binds and Landlock's rules all read."""

from __future__ import annotations

import sys
from typing import Any

from a2e_engine.sandbox._landlock import readable_code_paths
from a2e_engine.sandbox._preparation import Layer, Preparation

__all__ = ["LAYER"]


class PluginCode(Layer):
    def prepare(self, prep: Preparation) -> None:
        for plugin in prep.plugins:
            plugin.preload()
        prep.code_paths = tuple(readable_code_paths(_code_modules(prep.plugins)))


LAYER = PluginCode()


def _code_modules(plugins: list[Any]) -> list[Any]:
    """Packages a worker may import from lazily: ours and the plugins'."""
    names = {"a2e", "a2e_engine.sandbox", "a2e_engine.tools"}
    names.update(_outermost_package(type(plugin).__module__) for plugin in plugins)
    return [sys.modules[n] for n in sorted(names) if n in sys.modules and n != "__main__"]


def _outermost_package(module: str) -> str:
    """The outermost package of ``module`` that has files of its own: a namespace package
    (``a2e_engine``) has none, so its subpackage (``a2e_engine.tools``) stands for it."""
    parts = module.split(".")
    for depth in range(1, len(parts) + 1):
        name = ".".join(parts[:depth])
        if getattr(sys.modules.get(name), "__file__", None):
            return name
    return module
