"""A forked worker as the supervisor sees it: its two pipes, its pidfd, and how it ended."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Any

__all__ = ["WorkerHandle"]


class WorkerHandle:
    """A forked worker as the supervisor sees it: its pipes, its pidfd, its exit."""

    def __init__(self, pid: int, profile: str, fds: list[int], loop: asyncio.AbstractEventLoop):
        self.pid = pid
        self.profile = profile
        self.job_fd, self.result_fd, self.pidfd = fds
        self.exited: asyncio.Future[dict[str, Any]] = loop.create_future()
        self.busy = False
        os.set_blocking(self.job_fd, False)
        os.set_blocking(self.result_fd, False)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def send_signal(self, sig: int) -> None:
        if self.pidfd < 0:
            return
        with contextlib.suppress(ProcessLookupError, OSError):
            signal.pidfd_send_signal(self.pidfd, sig)

    def close(self) -> None:
        for name in ("job_fd", "result_fd", "pidfd"):
            fd = getattr(self, name)
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
                setattr(self, name, -1)
