"""The installed engine's version, for what a server says it is (OpenAPI, MCP)."""

from __future__ import annotations

from importlib import metadata

__all__ = ["engine_version"]


def engine_version() -> str:
    """``"0"`` when running from a tree that is not installed."""
    try:
        return metadata.version("a2e-engine")
    except metadata.PackageNotFoundError:
        return "0"
