"""``a2e serve --http`` as a real subprocess on 127.0.0.1 (port 0: whatever is free), for the
tests that drive it with real clients."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import httpx

from tests.waiting import wait_for
from tests.worker_tree import WorkerTree

__all__ = ["ServiceProcess", "run_serve", "served_client", "wait_for"]

SERVE = [sys.executable, "-m", "a2e_engine.engine.cli", "serve", "--http", "127.0.0.1:0"]


class ServiceProcess(WorkerTree):
    def __init__(
        self, *flags: str, env: dict[str, str | None] | None = None, start_s: float = 90
    ) -> None:
        """``env``: on top of this process's environment; a name given ``None`` is unset."""
        merged = {**os.environ, **(env or {})}
        self.process = subprocess.Popen(
            [*SERVE, "--prefork", "1", *flags],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={name: value for name, value in merged.items() if value is not None},
            text=True,
        )
        super().__init__(self.process.pid)
        assert self.process.stderr is not None
        self.stderr: list[str] = []
        self.url = ""
        deadline = time.monotonic() + start_s
        for line in self.process.stderr:
            self.stderr.append(line)
            if line.startswith("a2e: serving on "):
                self.url = line.split()[3]
                break
            if time.monotonic() > deadline:
                break
        if not self.url:
            self.process.kill()
            raise RuntimeError("the service did not start:\n" + "".join(self.stderr))
        self._drain = threading.Thread(target=self._read_stderr, daemon=True)
        self._drain.start()

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line)

    @property
    def ws_url(self) -> str:
        return self.url.replace("http", "ws", 1) + "/a2e"

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise


def run_serve(flags: Sequence[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``a2e serve --http`` with ``flags`` expected to be refused before it serves."""
    return subprocess.run(
        [sys.executable, "-m", "a2e_engine.engine.cli", "serve", *flags],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@contextmanager
def served_client(*flags: str, timeout: float = 120) -> Iterator[httpx.Client]:
    """An httpx client of a server started with ``flags``, which must stop cleanly after."""
    server = ServiceProcess(*flags)
    try:
        with httpx.Client(base_url=server.url, timeout=timeout) as client:
            yield client
    finally:
        assert server.stop() == 0
