"""How ``a2e`` fails: a usage error (exit status 2) or a command that could not be done (1), each
said in one line on stderr, never a traceback (``EXIT_STATUS`` says what each status means)."""

from __future__ import annotations

import os
import sys

__all__ = ["EXIT_STATUS", "CommandFailed", "UsageError", "output_closed", "say"]

#: What each exit status of ``a2e`` means.
EXIT_STATUS = {
    0: "success",
    1: "the call failed, output it was asked to keep could not be kept (--keep-output), or "
    "the engine could not start (the message says why)",
    2: "usage: the command line, the configuration file or an argument is wrong",
    130: "interrupted (Ctrl-C)",
    141: "the output was closed before it was all written (a pipe to head, say)",
}


class UsageError(Exception):
    """What was asked cannot be understood as written: exit status 2."""


class CommandFailed(Exception):
    """What was asked could not be done: exit status 1."""


def say(message: object) -> None:
    print("a2e: " + " ".join(str(message).split()), file=sys.stderr)


def output_closed() -> int:
    """Nobody reads our output any more: say so once, and let the interpreter's last flush
    go nowhere instead of raising again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    say("the output was closed before it was all written; stopped")
    return 141
