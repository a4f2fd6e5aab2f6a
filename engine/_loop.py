"""``EngineLoop``: the engine's asyncio loop, on a thread of its own.

So that the engine embeds in any host: synchronous code hands work to it (``run``,
``call_soon``), and servers run their coroutines on it. Blocking chores (removing directories,
joining the zygote) go to a small executor of its own, which keeps the engine's thread count
fixed however busy it gets.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["EngineLoop"]

T = TypeVar("T")
log = logging.getLogger("a2e.engine")

#: How long the tasks still on the loop when it stops may take to end once cancelled.
END_TASKS_S = 5.0


def _end_what_is_left(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the tasks still pending when the loop stops, and let them end, as
    ``asyncio.run`` does: a task left pending is destroyed with the loop, and asyncio logs
    each one as an error (a library's watcher, an SSE stream's pinger, ...)."""
    pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in pending:
        task.cancel()
    if pending:
        ending = asyncio.wait(pending, timeout=END_TASKS_S)
        _, stuck = loop.run_until_complete(ending)
        for task in stuck:
            log.warning("a task did not end when cancelled at shutdown: %r", task)
        for task in pending:
            if task.done() and not task.cancelled() and task.exception() is not None:
                log.debug("a task ended with %r at shutdown", task.exception())
    loop.run_until_complete(loop.shutdown_asyncgens())


class EngineLoop:
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._loop is not None:
            raise RuntimeError("the engine's loop is already running")
        loop = asyncio.new_event_loop()
        loop.set_default_executor(
            concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="a2e-chores")
        )
        ready = threading.Event()

        def run_loop() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()
            _end_what_is_left(loop)

        self._thread = threading.Thread(target=run_loop, name="a2e-engine", daemon=True)
        self._thread.start()
        ready.wait()
        self._loop = loop

    def stop(self) -> None:
        """Stop the loop, end what still runs on it (``_end_what_is_left``), close it."""
        loop, self._loop = self._loop, None
        if loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10 + END_TASKS_S)
        if not loop.is_running():
            loop.close()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("the engine is not running; use 'with Engine(...) as engine:'")
        return self._loop

    def in_thread(self) -> bool:
        """Whether the caller runs on the loop's own thread. Once that thread has ended, its id
        may be another thread's (the system reuses them): that thread must be told the engine
        stopped, not run loop code as if it were the loop."""
        thread = self._thread
        return thread is not None and thread.is_alive() and threading.get_ident() == thread.ident

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run a coroutine on the loop from another thread and wait for its result."""
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout)

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the loop soon; from any thread. ``RuntimeError`` once stopped."""
        self.loop.call_soon_threadsafe(fn, *args)
