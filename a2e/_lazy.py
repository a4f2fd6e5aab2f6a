"""A package's public names imported when first used (PEP 562), not with the package.

Every sandbox worker imports the packages its plugin lives in, and pays on fork and on exit
for whatever they import: a package whose ``__init__`` re-exports its models, its clients or
its plugins would bring pydantic, a TLS stack or every other plugin into each worker.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: each name in ``homes`` from the module named
    there, imported on first use."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)  # found there from now on
        return value

    return __getattr__
