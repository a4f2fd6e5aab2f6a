"""Servers the engine systems start, started once per bench run rather than once per workload.

Starting ``a2e serve`` (or an in-process engine) takes seconds, and no figure includes it: one
server per system serves every workload, each of which only changes the calls sent to it. Inside
``kept_across_workloads()`` an opener asks for its server with ``kept(key, start)``; outside it
(a system opened on its own) ``kept`` starts one that the caller owns, as before.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

__all__ = ["kept", "kept_across_workloads", "server_process"]

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


@contextlib.contextmanager
def server_process(
    command: Sequence[str], url_in: Callable[[str], str], what: str, grace_s: float
) -> Iterator[tuple[str, int]]:
    """A server started as ``command``: its URL (``url_in`` finds it in a line of its stderr,
    or says ``""``) and its pid, until the block ends; then SIGTERM, and SIGKILL after
    ``grace_s``. One that ends before saying its URL fails in one line with the end of what
    it said."""
    server = subprocess.Popen(list(command), stderr=subprocess.PIPE, text=True)
    assert server.stderr is not None
    url, said = "", []
    for line in server.stderr:
        url = url_in(line)
        if url:
            break
        said.append(line.strip())
    if not url:
        server.kill()
        server.wait()
        tail = " | ".join(s for s in said[-3:] if s) or "nothing on stderr"
        raise RuntimeError(f"{what} did not start: {tail}")
    threading.Thread(target=server.stderr.read, daemon=True).start()  # keep its pipe drained
    try:
        yield url, server.pid
    finally:
        server.terminate()
        try:
            server.wait(grace_s)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
