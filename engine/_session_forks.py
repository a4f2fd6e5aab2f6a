"""Sessions copied from a session: what ``Host.fork_session`` does (an E2B sandbox's fork).

Each copy is a session of its own (its id, uid, workspace, quota, cgroup slots, later its own
token at the front-end) with the parent's client, policies and tenant. Its directories start as
copies of the parent's (``sandbox._tree_copy``), its files its own uid's, and the interpreter the
parent keeps, if it keeps one, is forked into each (``sandbox._forks``): its variables, modules
and heap shared copy-on-write. The copied interpreter cannot change its uid (it has no
capability to); it keeps its family's, which stays taken while any copy lives
(``SessionState.family_uid``), and sees its session's files through an idmapped mount that
shows them as its own (``sandbox._adoption``). Both happen under the parent session's lock,
with its interpreter stopped: a call of the parent waits for the fork, and the fork for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass

from a2e_engine.engine._resident_workers import RESIDENT_TMP, ResidentWorkers
from a2e_engine.engine._session import SessionState
from a2e_engine.engine._sessions import Sessions
from a2e_engine.sandbox._busy import pid_of
from a2e_engine.sandbox._deadline import Deadline
from a2e_engine.sandbox._resident import ResidentWorker
from a2e_engine.sandbox._tree_copy import copy_tree
from a2e_engine.sandbox._waiting import StopSignal

__all__ = ["Copies", "fork_session"]


@dataclass(frozen=True)
class Copies:
    """What a fork made: the new sessions, whether the interpreter came along, and the bytes
    of files copied into them, in all."""

    sessions: list[SessionState]
    interpreter: bool
    bytes_copied: int


async def fork_session(
    sessions: Sessions,
    residents: ResidentWorkers | None,
    parent: SessionState,
    count: int,
    deadline: Deadline,
    stop: StopSignal,
) -> Copies:
    """``count`` copies of ``parent``. On any failure the copies made so far are ended and the
    error goes on (``ForkFailed``, ``OSError``, or what opening a session raises)."""
    made: list[SessionState] = []
    try:
        for _ in range(count):
            made.append(await sessions.open_copy(parent))
        copied = 0

        async def copy_files(worker: ResidentWorker | None) -> None:
            nonlocal copied
            loop = asyncio.get_running_loop()
            copied = await loop.run_in_executor(None, _copy_dirs, parent, made, worker)

        interpreter = False
        if residents is not None:
            own = [(s.id, s.root, s.uid) for s in made]
            interpreter = await residents.fork(parent.id, own, copy_files, deadline, stop)
        else:
            await copy_files(None)
        return Copies(made, interpreter, copied)
    except BaseException:
        for session in made:
            if residents is not None:
                with contextlib.suppress(Exception):
                    await residents.end(session.id, "its fork failed")
            sessions.end(session)
        raise


def _copy_dirs(
    parent: SessionState, copies: list[SessionState], worker: ResidentWorker | None
) -> int:
    """In a thread: the parent's workspace, and its kept worker's temporary directory (as the
    worker sees it: it may be its own ``/tmp``), into each copy's."""
    if worker is not None:
        seen_as = pid_of(worker.worker.pidfd) or worker.worker.pid
        tmp = f"/proc/{seen_as}/root{worker.paths[1]}"
    else:
        tmp = os.path.join(parent.tmp_root, RESIDENT_TMP)
    if worker is not None and not os.path.isdir(os.path.join(parent.tmp_root, RESIDENT_TMP)):
        parent.make_call_dir(RESIDENT_TMP)  # where the sandbox goes on now
    copied = 0
    for session in copies:
        copied += copy_tree(parent.workspace, session.workspace, session.uid)
        own_tmp = session.make_call_dir(RESIDENT_TMP)
        if os.path.isdir(tmp):
            copied += copy_tree(tmp, own_tmp, session.uid)
    return copied
