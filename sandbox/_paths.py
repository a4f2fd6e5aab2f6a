"""Whether a path lies beneath another, said once: on the strings as given (callers resolve them
first when links matter), with ``/a/bc`` not beneath ``/a/b``. Opening a file beneath a
directory without following links is ``sandbox._beneath``'s."""

from __future__ import annotations

__all__ = ["strictly_under", "under"]


def under(path: str, root: str) -> bool:
    """``path`` is ``root`` or lies beneath it."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def strictly_under(path: str, root: str) -> bool:
    """``path`` lies beneath ``root`` and is not it."""
    return path != root and under(path, root)
