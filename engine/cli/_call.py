"""``a2e call TOOL``: one call, its arguments from ``--json`` and ``--arg``, its result printed
as JSON (its events too, with ``--stream``), what ``--keep-output`` asked for copied out."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from typing import Any

from a2e.caps.tools._client import PendingCall, ToolAPI
from a2e.caps.tools._models import DEFAULT_TIMEOUT_S, ToolEvent
from a2e_engine.engine._kept_output import OutputKeeper, prepare_directory
from a2e_engine.engine._registry import ToolRegistry
from a2e_engine.engine.cli._arguments import Subcommands, positive_seconds
from a2e_engine.engine.cli._engine_options import add_engine_options, engine_from_args, started
from a2e_engine.engine.cli._errors import UsageError, say

__all__ = ["register"]


def register(sub: Subcommands) -> None:
    """Add ``a2e call``."""
    call = sub.add_parser("call", help="call one tool and print its result")
    call.add_argument("tool")
    call.add_argument(
        "--json",
        default=None,
        metavar="JSON|@FILE|-",
        help="arguments as a JSON object, or @FILE to read it from a file, or - from stdin",
    )
    call.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="one argument, as the tool's schema types it: text for a string parameter, "
        "JSON for any other (repeatable; on top of --json)",
    )
    call.add_argument("--stream", action="store_true", help="print events as they arrive")
    call.add_argument(
        "--keep-output",
        metavar="DIR",
        help="copy the whole of each stream that was cut short (saved in the call's session, "
        "which ends with the command) into DIR, made if missing, a file per call and stream; "
        "the result names the copies",
    )
    call.add_argument(
        "--timeout",
        type=positive_seconds,
        default=DEFAULT_TIMEOUT_S,
        metavar="S",
        help=f"seconds the call may take (default {DEFAULT_TIMEOUT_S}); a fraction is rounded "
        "up to whole seconds, as the protocol does",
    )
    add_engine_options(call)
    call.set_defaults(func=run_call)


def run_call(args: argparse.Namespace) -> int:
    engine = engine_from_args(args)
    arguments = _parse_arguments(args, engine.registry)
    keep_in = _keep_output_dir(args.keep_output)
    output_closed = threading.Event()
    pending: PendingCall | None = None

    def on_event(event: ToolEvent) -> None:
        """On the client's reader thread: nobody reading any more ends the call."""
        if output_closed.is_set():
            return
        try:
            _print_event(event)
        except BrokenPipeError:
            output_closed.set()
            if pending is not None:
                pending.cancel()

    with started(engine):
        tools = ToolAPI(engine.connect())
        pending = tools.start(
            tool_name=args.tool,
            arguments=arguments,
            streaming=args.stream,
            on_event=on_event if args.stream else None,
            timeout=args.timeout,
        )
        if output_closed.is_set():
            pending.cancel()
        result = pending.result()
        # The session, and the whole of any capped stream in its workspace, ends with the
        # engine: what is kept is copied now.
        keeper = OutputKeeper(args.tool, engine.session_workspace(tools.client.session_id), keep_in)
        output = result.model_dump(mode="json", exclude={"events"} if args.stream else None)
        output["data"] = keeper.rewrite(output["data"])
    if output_closed.is_set():
        raise BrokenPipeError
    print(json.dumps(output, indent=2, ensure_ascii=False))
    for problem in keeper.problems:
        say(f"{args.tool}: --keep-output: {problem}")
    if not result.success:
        say(f"{args.tool}: {result.reason or result.error_code}: {result.error}")
    return 0 if result.success and not keeper.problems else 1


def _print_event(event: ToolEvent) -> None:
    print(json.dumps({"seq": event.seq, "kind": str(event.kind), "data": event.data}), flush=True)


def _json_text(source: str) -> str:
    """``--json``'s value: the JSON itself, ``@path`` for a file's contents, ``-`` for stdin."""
    if source == "-":
        return sys.stdin.read()
    if source.startswith("@"):
        try:
            with open(source[1:], encoding="utf-8") as fh:
                return fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else str(exc)
            raise UsageError(f"--json {source}: cannot read it: {reason}") from None
    return source


def _parse_arguments(args: argparse.Namespace, registry: ToolRegistry) -> dict[str, Any]:
    """``--json`` first, then each ``--arg key=value`` on top. A value is taken as the type the
    tool's schema gives the parameter: a string parameter gets the text as written
    (``--arg code=42`` is the string "42"), any other type is read as JSON; a parameter the
    tool does not have is JSON where it parses (the call then says it is unknown)."""
    arguments: dict[str, Any] = {}
    if args.json is not None:
        try:
            loaded = json.loads(_json_text(args.json))
        except ValueError as exc:
            raise UsageError(f"--json is not valid JSON: {exc}") from None
        if not isinstance(loaded, dict):
            raise UsageError("--json must be a JSON object")
        arguments.update(loaded)
    tool = registry.get(args.tool)
    types = {p.name: p.type for p in tool.definition.input_parameters} if tool else {}
    for item in args.arg:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--arg takes key=value, got {item!r}")
        expected = types.get(key)
        if expected == "string":
            arguments[key] = raw
            continue
        try:
            arguments[key] = json.loads(raw)
        except ValueError:
            if expected is not None:
                raise UsageError(
                    f"--arg {key}: {args.tool}'s {key} is of type {expected}, written as JSON; "
                    f"got {raw!r}"
                ) from None
            arguments[key] = raw
    return arguments


def _keep_output_dir(path: str | None) -> str | None:
    """``--keep-output DIR``, made before the call runs."""
    if path is None:
        return None
    try:
        return prepare_directory(path)
    except OSError as exc:
        raise UsageError(
            f"--keep-output {path}: cannot write there: {exc.strerror or exc}"
        ) from None
