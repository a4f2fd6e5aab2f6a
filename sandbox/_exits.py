"""How a process ended, in the words every report uses.

One place names a signal: Python's ``signal.Signals`` has no member for most real-time signals
(35, say), and a report must not raise on the one signal it did not expect.
"""

from __future__ import annotations

import signal

__all__ = ["how_it_ended", "signal_name"]


def signal_name(number: int) -> str:
    """``SIGKILL``; ``signal 35`` for a number Python has no name for."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def how_it_ended(returncode: int) -> str:
    """``exited with code 3`` or ``was killed by SIGKILL``, from a return code that is the
    negated signal number when a signal ended the process (``subprocess``'s convention)."""
    if returncode < 0:
        return f"was killed by {signal_name(-returncode)}"
    return f"exited with code {returncode}"
