"""The names of the capabilities a session may negotiate.

Apart from ``a2e._messages`` (the wire models) because every plugin names its capability, and a
plugin's module is imported in its sandbox worker, which must not need pydantic.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["A2ECapability"]


class A2ECapability(StrEnum):
    """Capabilities a session may negotiate. Only ``tools`` exists so far."""

    TOOLS = "tools"
