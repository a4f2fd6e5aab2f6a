"""Servers the engine systems start, started once per bench run rather than once per workload.

Starting ``a2e serve`` (or an in-process engine) takes seconds, and no figure includes it: one
server per system serves every workload, each of which only changes the calls sent to it. Inside
``kept_across_workloads()`` an opener asks for its server with ``kept(key, start)``; outside it
(a system opened on its own) ``kept`` starts one that the caller owns, as before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

__all__ = ["kept", "kept_across_workloads"]

T = TypeVar("T")

_kept: tuple[contextlib.ExitStack, dict[Any, Any]] | None = None


@contextlib.contextmanager
def kept_across_workloads() -> Iterator[None]:
    """Servers started within this block stay up until it ends, and are shared."""
    global _kept
    with contextlib.ExitStack() as stack:
        _kept = (stack, {})
        try:
            yield
        finally:
            _kept = None


def kept(
    key: Any, start: Callable[[], contextlib.AbstractContextManager[T]]
) -> contextlib.AbstractContextManager[T]:
    """The server ``start`` opens, the one already kept under ``key`` if there is one."""
    if _kept is None:
        return start()
    stack, servers = _kept
    if key not in servers:
        servers[key] = stack.enter_context(start())
    return contextlib.nullcontext(servers[key])
