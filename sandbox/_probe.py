"""Trying something once in a throw-away child: what the zygote probes before it relies on it.

A probe changes the process it runs in for good (a namespace entered, an identity dropped, a
scheduling class set), so it runs in a forked child that exits right after. The child answers
through a socket pair with a short text and, where the probe made one, descriptors (a
namespace kept alive by its fd); a probe that raised, or a child that died, is a
``ProbeFailed`` saying how.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Callable
from typing import NamedTuple

__all__ = ["Answer", "ProbeFailed", "in_child", "namespace_made_in_child"]

_MAX_TEXT = 1000


class Answer(NamedTuple):
    text: str = ""
    fds: tuple[int, ...] = ()


class ProbeFailed(OSError):
    """The probe raised (its exception is the message), or its child died before answering."""


def in_child(probe: Callable[[], Answer | None]) -> Answer:
    """Run ``probe`` in a forked child; its answer, with the descriptors it sent (ours to
    close), or ``ProbeFailed``."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 0
        try:
            ours.close()
            answer = probe() or Answer()
            socket.send_fds(theirs, [b"+" + answer.text.encode()[:_MAX_TEXT]], list(answer.fds))
        except BaseException as exc:
            theirs.send(b"-" + f"{type(exc).__name__}: {exc}".encode(errors="replace")[:_MAX_TEXT])
            code = 1
        os._exit(code)
    theirs.close()
    try:
        message, fds, _, _ = socket.recv_fds(ours, _MAX_TEXT + 1, 4)
    finally:
        ours.close()
        _, status = os.waitpid(pid, 0)
    for fd in fds:
        os.set_inheritable(fd, False)
    text = message[1:].decode(errors="replace")
    if message[:1] == b"+":
        return Answer(text, tuple(fds))
    for fd in fds:
        os.close(fd)
    if message[:1] == b"-":
        raise ProbeFailed(text)
    raise ProbeFailed(f"the probe's child died without answering (wait status {status})")


def namespace_made_in_child(kind: str, prepare: Callable[[], None]) -> int:
    """An fd to the ``kind`` namespace (``net``, ``mnt``) that ``prepare`` leaves a short-lived
    child in. The caller itself never leaves its own namespace (in a user namespace it could
    not come back); the namespace lives on as long as the fd does. ``OSError`` saying why not."""

    def make() -> Answer:
        prepare()
        return Answer(fds=(os.open(f"/proc/self/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC),))

    try:
        return in_child(make).fds[0]
    except (ProbeFailed, IndexError) as exc:
        raise OSError(errno.EPERM, str(exc) or "no namespace was created") from None
