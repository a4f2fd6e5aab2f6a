"""Files grading sends into the sandbox as they are (``assets/``): testlib's header for
checkers, interactors and generators, and LiveCodeBench's judge for ``/submit``. Shipped as
package data and read as bytes, never imported: each runs beside the program it judges, so the
engine's own code must not depend on it, nor it on the engine."""

from __future__ import annotations

import functools
from importlib import resources

__all__ = ["asset"]


@functools.cache
def asset(name: str) -> bytes:
    """The content of ``assets/<name>``, read once."""
    return resources.files(__package__).joinpath("assets", name).read_bytes()
