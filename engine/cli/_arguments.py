"""The types of ``a2e``'s flags: each says in one line what is wrong with a value."""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = ["Subcommands", "at_least", "positive_seconds"]

#: What each command's module adds its parser to (``register``).
Subcommands = argparse._SubParsersAction


def at_least(minimum: int) -> Callable[[str], int]:
    """An integer flag's type: a whole number of at least ``minimum``."""

    def whole_number(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < minimum:
            kind = "a positive integer" if minimum == 1 else f"at least {minimum}"
            raise argparse.ArgumentTypeError(f"must be {kind}, not {value}")
        return value

    whole_number.__name__ = "whole number"  # how argparse names the type in its errors
    return whole_number


def positive_seconds(text: str) -> float:
    """``--timeout``: any positive number of seconds; like the protocol's ``timeout``, a
    fraction is rounded up to whole seconds when the call is sent."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text}")
    return seconds
