"""How a call's worker ended: ``CallEnding``, what the supervisor decides first and what a plugin
is told (``ToolPlugin.accept_result``).

Apart from the wire models (pydantic), as ``reasons`` is: a plugin's worker-side code names it,
and a worker imports nothing it does not need.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["CallEnding"]


class CallEnding(StrEnum):
    OK = "ok"  # the tool returned a result
    FAILED = "failed"  # the tool raised; the error says what
    TIMEOUT = "timeout"  # the wall-clock deadline passed; the worker's tree was killed
    CANCELLED = "cancelled"  # tool/cancel/req or shutdown; the worker's tree was killed
    CRASHED = "crashed"  # the worker died without a result (signal, os._exit, zygote death)
    VIOLATION = "violation"  # the worker broke the frame protocol or a cap; it was killed
    SETUP_FAILED = "setup_failed"  # a sandbox layer could not be applied; the tool never ran
    UNAVAILABLE = "unavailable"  # no worker could be had (the sandbox is broken)
