"""The ``a2e`` command line: the parser, made of each command's own (``register`` in
``demo``, ``serve``, ``listing``, ``doctor``, ``call``, ``evaluate``) and the commands installed
from outside the engine (``COMMANDS_GROUP``: ``a2e bench``, the benchmarks'); logging; and
``main``, which turns every failure into one line and an exit status (``errors``)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import NoReturn

from a2e_engine.engine.cli import _call as call
from a2e_engine.engine.cli import _demo as demo
from a2e_engine.engine.cli import _doctor as doctor
from a2e_engine.engine.cli import _evaluate as evaluate
from a2e_engine.engine.cli import _listing as listing
from a2e_engine.engine.cli import _serve as serve
from a2e_engine.engine.cli._errors import EXIT_STATUS, CommandFailed, UsageError, output_closed, say

__all__ = ["COMMANDS_GROUP", "build_parser", "main"]

#: Where commands that live outside the engine are registered (``a2e bench``: the benchmarks').
COMMANDS_GROUP = "a2e_engine.commands"


class Parser(argparse.ArgumentParser):
    """argparse's parser with its errors in one line, as every other error of ``a2e`` is (its
    own way prints the whole usage first)."""

    #: Commands registered from outside the engine (``COMMANDS_GROUP``) that no built-in one
    #: shadows: each takes the rest of the command line as its own.
    installed: dict[str, EntryPoint]

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"a2e: {message} (see {self.prog} --help)\n")


def build_parser() -> Parser:
    parser = Parser(
        prog="a2e",
        description="Sandboxed tool execution engine",
        epilog="exit status: "
        + "; ".join(f"{code} {meaning}" for code, meaning in EXIT_STATUS.items()),
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log to stderr")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in (demo, serve, listing, doctor, call, evaluate):
        command.register(sub)
    found = entry_points(group=COMMANDS_GROUP)
    parser.installed = {entry.name: entry for entry in found if entry.name not in sub.choices}
    for name, entry in sorted(parser.installed.items()):
        source = entry.dist.name if entry.dist is not None else entry.value
        installed = sub.add_parser(name, help=f"installed by {source} (a2e {name} --help)")
        installed.add_argument("options", nargs="*", help=f"see a2e {name} --help")
    return parser


class _OursOrWarnings(logging.Filter):
    """Our own loggers at the level asked for, other libraries' from WARNING up only (bm25s,
    for one, logs every index it builds at DEBUG)."""

    def filter(self, record: logging.LogRecord) -> bool:
        ours = record.name == "a2e" or record.name.startswith("a2e.")
        return ours or record.levelno >= logging.WARNING


def _configure_logging(verbose: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    handler.addFilter(_OursOrWarnings())
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler])


def _installed_command(parser: Parser, argv: list[str]) -> tuple[bool, str, list[str]] | None:
    """``(verbose, name, its arguments)`` when ``argv`` runs an installed command, after none
    but ``-v`` of ours (anything else before it is for argparse to judge)."""
    for position, word in enumerate(argv):
        if word in ("-v", "--verbose"):
            continue
        if word in parser.installed:
            return bool(position), word, argv[position + 1 :]
        return None
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    installed = _installed_command(parser, argv)
    if installed is not None:
        verbose, name, rest = installed
        _configure_logging(verbose)
        # Its options are its own (argparse's REMAINDER would not pass a leading --option on).
        command: Callable[[list[str]], int] = parser.installed[name].load()
        return command(rest)
    args = parser.parse_args(argv)
    _configure_logging(args.verbose)
    try:
        return int(args.func(args))
    except UsageError as exc:
        say(exc)
        return 2
    except CommandFailed as exc:
        say(exc)
        return 1
    except BrokenPipeError:
        return output_closed()
    except KeyboardInterrupt:
        return 130
