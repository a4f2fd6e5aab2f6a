"""``wait_for``: poll a condition until it holds or the time is up (tests that watch processes
or servers change state); ``running``: a call, once it runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from a2e.caps.tools._client import PendingCall, ToolAPI


def wait_for(condition: Callable[[], bool], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def running(tools: ToolAPI, code: str, timeout: float = 60, seconds: float = 30) -> PendingCall:
    """A ``python_eval`` call of ``code``, returned once it runs: its first line of output has
    arrived (the call streams it), not after a pause that may be too short or too long."""
    started = threading.Event()
    pending = tools.start(
        tool_name="python_eval",
        arguments={"code": f"print('running', flush=True)\n{code}"},
        streaming=True,
        on_event=lambda event: started.set(),
        timeout=timeout,
    )
    assert started.wait(seconds), "the call did not start"
    return pending
