"""A clean template: a fork of a worker made once the worker has taken its job's layers (its
uid, its Landlock domain, its workspace) and before it reads the job's payload (the arguments
and the secrets, ``sandbox._messages.encode_job``). It therefore holds nothing of the call (no
argument, no secret, no answer) and no descriptor to the supervisor, and is confined exactly as
the worker is: seccomp, namespaces, cgroups, rlimits, the uid, the Landlock domain (the same
domain: the worker can signal it and what it starts).

A tool that must run untrusted code apart from what judges it asks for one
(``ToolPlugin.clean_template``): ``code_eval`` runs a candidate of function tests there while the
worker, holding the tests and the expected values, judges what comes back, and forks each
Python case of stdin/stdout tests from it (``tools._template_cases``). Its life is
the worker's code (``sandbox._worker``): it runs the plugin's ``template_main`` on one end of a unix
socket pair (``Template.channel`` is the worker's end), over which frames travel each way and
descriptors with them (``write_frame_with_fds``).

The worker is the template's parent: in the worker's PID namespace it dies with the worker;
without one it has a death signal and the zygote, as subreaper, kills what is left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from a2e_engine.sandbox._forking import fork_single_threaded, thread_count
from a2e_engine.sandbox._frames import (
    HEADER_SIZE,
    FrameError,
    encode_frame,
    read_frame_body,
    write_frame_bytes,
)

__all__ = ["Template", "fork_serving", "read_frame_with_fds", "write_frame_with_fds"]


@dataclass
class Template:
    """The worker's handle on its template: its pid and the worker's end of their socket
    pair."""

    pid: int
    channel: int
    _reaped: bool = False

    def close(self) -> int | None:
        """End it and reap it: how it ended, as an exit code (a negative signal number), or
        None when that is not known (it was closed before)."""
        if self.channel >= 0:
            with contextlib.suppress(OSError):
                os.close(self.channel)
            self.channel = -1
        if self._reaped:
            return None  # its pid may be another process's by now
        self._reaped = True
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            return None
        return os.waitstatus_to_exitcode(status)


def fork_serving(serve: Callable[[int], None], closed: tuple[int, ...] = ()) -> tuple[int, int]:
    """A child that closes ``closed`` and runs ``serve(channel)`` on its end of a unix socket
    pair with this process, then exits (1 if it raised); its pid, and this process's end."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ours_fd, theirs_fd = ours.detach(), theirs.detach()  # both close-on-exec, as Python makes them
    pid = fork_single_threaded() if thread_count() == 1 else os.fork()
    if pid == 0:  # pragma: no cover - the child never returns
        code = 0
        try:
            for fd in (*closed, ours_fd):
                os.close(fd)
            serve(theirs_fd)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(theirs_fd)
    return pid, ours_fd


def write_frame_with_fds(channel: int, obj: Mapping[str, Any], fds: Sequence[int]) -> None:
    """One frame on a unix socket, ``fds`` sent with its first bytes (``SCM_RIGHTS``)."""
    frame = encode_frame(obj)
    with socket.socket(fileno=channel) as sock:
        try:
            sent = socket.send_fds(sock, [frame], list(fds))
        finally:
            sock.detach()
    write_frame_bytes(channel, frame[sent:])


def read_frame_with_fds(
    channel: int, max_frame: int, max_fds: int
) -> tuple[dict[str, Any], list[int]]:
    """One frame from a unix socket and the descriptors sent with it (the caller's to close);
    ``EOFError`` at the end. More than ``max_fds`` descriptors is an error (none is kept)."""
    with socket.socket(fileno=channel) as sock:
        try:
            head, fds, flags, _ = socket.recv_fds(sock, HEADER_SIZE, max_fds)
        finally:
            sock.detach()
    try:
        if flags & socket.MSG_CTRUNC:
            raise FrameError(f"a frame came with more than {max_fds} descriptors")
        if not head:
            raise EOFError("the channel is closed")
        return read_frame_body(channel, head, max_frame), fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
