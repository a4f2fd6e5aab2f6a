"""A clean template: a fork of a hardened worker made before its job arrives, which therefore
holds nothing of the job (no arguments, no secrets, no answers) and no descriptor to the
supervisor, and is confined as the worker is (seccomp, namespaces, cgroups, rlimits, the
capabilities it keeps for the job's uid).

A tool that must run untrusted code apart from what judges it asks for one
(``ToolPlugin.clean_template``): ``code_eval`` runs a candidate there while the worker, holding
the tests and the expected values, judges what comes back. The worker forks it once hardened,
off the call's path (``sandbox._worker``). When the job comes and is one of such a plugin, the
worker gives it the job's layers without the arguments or the secrets (``Template.start``); the
template takes the job's last steps itself (its uid, its Landlock domain, the workspace), and
then runs the plugin's ``template_main`` on the two pipes it shares with the worker, one each
way. Any other job kills it.

The worker is the template's parent: in the worker's PID namespace it dies with the worker;
without one it has a death signal and the zygote, as subreaper, kills what is left. Its life,
which takes a job as the worker takes its own, is the worker's code (``sandbox._worker``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from a2e_engine.sandbox._forking import fork_single_threaded, thread_count
from a2e_engine.sandbox._frames import write_frame

if TYPE_CHECKING:
    from a2e_engine.sandbox._messages import Job
    from a2e_engine.sandbox._preparation import Preparation

__all__ = ["Template", "fork_serving", "wants_template"]

#: How long a template the worker cannot kill has to end once its pipe is closed.
_GRACE_S = 0.05

#: What a job's layers need of it: the template is given these fields, nothing else.
_LAYER_FIELDS = (
    "zygote",
    "plugin",
    "tool",
    "profile",
    "workspace",
    "tmp_dir",
    "read_roots",
    "call_id",
    "uid",
    "streaming",
)


@dataclass
class Template:
    """The worker's handle on its template: its pid, the pipe the worker writes to it
    (``requests``) and the one it reads from it (``replies``)."""

    pid: int
    requests: int
    replies: int

    def start(self, job: Job) -> None:
        """Give it the job's layers (never its arguments or its secrets)."""
        layers = {name: job[name] for name in _LAYER_FIELDS if name in job}  # type: ignore[literal-required]
        write_frame(self.requests, {**layers, "arguments": {}, "secrets": {}})

    def close(self) -> int | None:
        """End it and reap it: how it ended, as an exit code (a negative signal number), or
        None when that is not known yet.

        Its job's Landlock domain is its own, not one beneath the worker's, so where Landlock
        scopes signals the worker cannot kill it: closing its pipe ends a template that
        behaves, and whatever it still runs dies with the worker (its PID namespace, or its
        death signal and the zygote's sweep of orphans)."""
        for fd in (self.requests, self.replies):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.requests = self.replies = -1
        try:
            os.kill(self.pid, signal.SIGKILL)
            killed = True
        except ProcessLookupError:
            killed = True  # gone already, a zombie to reap
        except PermissionError:
            killed = False
        deadline = time.monotonic() + (0 if killed else _GRACE_S)
        while True:
            try:
                pid, status = os.waitpid(self.pid, 0 if killed else os.WNOHANG)
            except ChildProcessError:
                return None
            if pid:
                return os.waitstatus_to_exitcode(status)
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.002)


def wants_template(prep: Preparation) -> bool:
    """Whether a worker of this zygote forks a template: one of its plugins asks for one."""
    return any(getattr(plugin, "clean_template", False) for plugin in prep.plugins)


def fork_serving(
    serve: Callable[[int, int], None], closed: tuple[int, ...] = ()
) -> tuple[int, int, int]:
    """A child that closes ``closed`` and runs ``serve(requests, replies)`` on a pipe each way
    to this process, then exits (1 if it raised); its pid, and this process's ends of the
    pipes: the one it writes requests to and the one it reads replies from."""
    to_child, requests = os.pipe2(os.O_CLOEXEC)
    replies, from_child = os.pipe2(os.O_CLOEXEC)
    pid = fork_single_threaded() if thread_count() == 1 else os.fork()
    if pid == 0:  # pragma: no cover - the child never returns
        code = 0
        try:
            for fd in (*closed, requests, replies):
                os.close(fd)
            serve(to_child, from_child)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(to_child)
    os.close(from_child)
    return pid, requests, replies
