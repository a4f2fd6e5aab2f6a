"""Python programs judged on their output, each case a fork of the worker's clean template.

A case must start as ``python main.py`` starts, yet a fresh interpreter costs tens of
milliseconds of CPU before the program's first line; a fork of the worker's warm interpreter
(``tools._python_main``) costs a few, but the worker holds every case's expected output, and
its fork would too. The clean template (``sandbox._template``) is a fork of the worker made
before the job's arguments reached it: it holds no case, no expected output, no checker. Each
case is a fork of it, in which the program runs.

The fork is made with ``CLONE_PARENT`` (``sandbox._forking.fork_as_sibling``): the case's process
is the worker's child, not the template's, so that the worker reaps it, reads its exit status
and resource usage from the kernel, and kills it as it kills any run of its own; the template
only forks. Everything the run needs of the worker comes with the request as descriptors
(``SCM_RIGHTS``): its stdin, stdout and stderr, the pipe on which it says it is ready, the
case group's files it joins, and its Landlock layer, built by the worker, which it enforces on
itself before anything of the program runs. Its Landlock layer scopes signals, so that what a
case runs cannot stop or kill the template that forks the next.

Worker side: ``TemplateCases.start``; template side: ``serve_cases``. The template is the
worker's helper, holding nothing of value, but it answers in frames the worker checks as it
checks any: a pid that is not its own child's is refused.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import asdict
from typing import Any

from a2e.caps.tools._plugin import CleanTemplate
from a2e_engine.sandbox._forking import fork_as_sibling, sibling_forks_ready
from a2e_engine.sandbox._frames import read_frame, write_frame
from a2e_engine.sandbox._landlock import ABI_SCOPED, abi_version, restrict_self
from a2e_engine.sandbox._run_domain import children
from a2e_engine.sandbox._template import read_frame_with_fds, write_frame_with_fds
from a2e_engine.tools._python_main import (
    ForkedMain,
    FreshInterpreter,
    MainProgram,
    began_kb,
    fresh_interpreter,
    run_main_here,
)

__all__ = ["ROLE", "TemplateCases", "serve_cases"]

#: The first frame the worker sends a template it forks cases from.
ROLE = {"role": "cases"}
#: The most a request may be (a program's environment and arguments) or carry of descriptors.
_MAX_REQUEST = 1 << 20
_MAX_FDS = 16
#: stdin, stdout, stderr and the ready pipe come first in every request's descriptors.
_STDIO_AND_READY = 4


class TemplateCases:
    """The worker's side: cases started in forks of ``template``."""

    def __init__(self, template: CleanTemplate) -> None:
        self.template = template
        self._told = False

    @staticmethod
    def possible() -> bool:
        """Whether cases can be forked from a template here: the zygote found how to fork a
        sibling (``sandbox._forking.prepare_sibling_forks``), and Landlock scopes a case's
        signals. Without the scope a case could stop the template and hold up the call's
        later cases until its deadline: each case then runs in an interpreter of its own."""
        return sibling_forks_ready() and abi_version() >= ABI_SCOPED

    @property
    def pid(self) -> int:
        return self.template.pid

    def start(
        self,
        fresh: FreshInterpreter,
        program: MainProgram,
        stdio: tuple[int, int, int],
        joins: tuple[int, ...],
        ruleset: int | None,
    ) -> ForkedMain:
        """A fork of the template that becomes ``program`` (``tools._python_main``) on
        ``stdio``, after writing ``0`` to each of ``joins`` (the case group's
        ``cgroup.procs``) and enforcing the Landlock ruleset ``ruleset``; an ``OSError`` when
        it could not be started."""
        channel = self.template.channel
        ready_r, ready_w = os.pipe2(os.O_CLOEXEC)
        try:
            if not self._told:
                write_frame(channel, ROLE)
                self._told = True
            request = {**asdict(program), "joins": len(joins), "ruleset": ruleset is not None}
            fds = [*stdio, ready_w, *joins, *([ruleset] if ruleset is not None else [])]
            write_frame_with_fds(channel, request, fds)
        except BaseException:
            os.close(ready_r)
            raise
        finally:
            os.close(ready_w)
        try:
            reply = read_frame(channel, _MAX_REQUEST)
        except (EOFError, ValueError) as exc:
            os.close(ready_r)
            raise OSError(f"the clean template did not answer ({exc})") from None
        pid = reply.get("pid")
        if type(pid) is not int or pid not in children():  # not one the template made up
            os.close(ready_r)
            raise OSError(f"the clean template could not start the program: {reply.get('error')}")
        return ForkedMain(pid, began_kb(fresh, ready_r) - fresh.resident_kb)


def serve_cases(channel: int) -> None:
    """The template's side: fork each case the worker asks for, until it closes its end."""
    fresh = fresh_interpreter()
    while True:
        try:
            request, fds = read_frame_with_fds(channel, _MAX_REQUEST, _MAX_FDS)
        except (EOFError, OSError, ValueError):
            return
        try:
            reply: dict[str, Any] = {"pid": _start_case(fresh, channel, request, fds)}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
        write_frame(channel, reply)


def _start_case(
    fresh: FreshInterpreter | None, channel: int, request: dict[str, Any], fds: list[int]
) -> int:
    """The case's process, forked as the worker's child; its pid (here, never in it)."""
    if fresh is None:
        raise ValueError("no fresh interpreter was read in this zygote")
    program = MainProgram(request["script"], request["args"], request["cwd"], request["env"])
    joins = int(request["joins"])
    with_ruleset = request["ruleset"] is True
    if len(fds) != _STDIO_AND_READY + joins + with_ruleset:
        raise ValueError(f"{len(fds)} descriptors do not make a case's")
    stdin, stdout, stderr, ready = fds[:_STDIO_AND_READY]
    join_fds = fds[_STDIO_AND_READY : _STDIO_AND_READY + joins]
    ruleset = fds[-1] if with_ruleset else None

    def confine() -> None:
        for fd in join_fds:
            os.write(fd, b"0")
        if ruleset is not None:
            restrict_self(ruleset)

    pid = fork_as_sibling()
    if pid == 0:  # pragma: no cover - the child runs the program and exits
        os.close(channel)
        run_main_here(fresh, program, (stdin, stdout, stderr), confine, ready)
    return pid
