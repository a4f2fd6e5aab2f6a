"""The ``a2e`` command: ``demo``, ``serve``, ``list``, ``doctor``, ``call``, ``eval``, ``bench``.

Whatever goes wrong is one line on stderr, never a traceback, and the exit status says what
kind of failure it was (``EXIT_STATUS``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import signal
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from importlib.metadata import EntryPoint, entry_points
from typing import Any, NoReturn

from a2e.caps.tools.client import PendingCall, ToolAPI
from a2e.caps.tools.models import DEFAULT_TIMEOUT_S, ToolEvent
from a2e.caps.tools.plugin import ToolPlugin
from a2e.codec import MAX_MESSAGE_BYTES
from a2e_engine.engine.config import EngineConfig
from a2e_engine.engine.config_file import ConfigError, ConfigFile, load_config_file
from a2e_engine.engine.engine import Engine
from a2e_engine.engine.kept_output import OutputKeeper, prepare_directory
from a2e_engine.engine.plugins import PluginError, entry_point_plugins, load_plugin
from a2e_engine.engine.registry import ToolRegistry
from a2e_engine.engine.requirements import LimitTooLow
from a2e_engine.sandbox.layers import LAYERS, missing_layers
from a2e_engine.sandbox.limits import Limits
from a2e_engine.tools import BUILTIN_PLUGINS
from a2e_engine.tools.languages import toolchains

__all__ = ["EXIT_STATUS", "main"]

#: Where ``a2e serve --http`` listens when given no address.
DEFAULT_HTTP = "127.0.0.1:8080"
#: Where commands that live outside the engine are registered (``a2e bench``: the benchmarks').
COMMANDS_GROUP = "a2e_engine.commands"

#: ``a2e eval``'s cap on one call: judging a program on many test cases takes long.
EVAL_MAX_TIMEOUT_S = 3600

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


def _engine_from_args(args: argparse.Namespace, reporting: bool = False) -> Engine:
    """The configuration file (``--config``) as the base, the flags given on top of it;
    ``reporting`` (``a2e doctor``): nothing required, and every plugin's zygote started so
    that each can be reported."""
    try:
        file = load_config_file(args.config) if args.config else ConfigFile()
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    flags: dict[str, Any] = {
        "max_workers": args.max_workers,
        "prefork": args.prefork,
        "max_timeout": args.max_timeout,
        "token": args.token,
        "audit_path": args.audit,
    }
    settings = {**file.engine, **{k: v for k, v in flags.items() if v is not None}}
    if args.read_root:
        settings["read_roots"] = (*settings.get("read_roots", ()), *args.read_root)
    if reporting:
        settings["require"] = ()
        settings["start_all_zygotes"] = True
    elif args.require:
        settings["require"] = (*settings.get("require", ()), *args.require)
    for flag, key in (
        ("no_namespaces", "namespaces"),
        ("no_landlock", "landlock"),
        ("no_writable_root", "writable_root"),
        ("no_cgroups", "cgroups"),
        ("no_uid_drop", "identity"),
    ):
        if getattr(args, flag):
            settings[key] = False
    if args.allow_unprotected_root:
        settings["allow_unprotected_root"] = True
    try:
        if args.memory_mb is not None:
            limits = settings.get("limits", Limits())
            settings["limits"] = dataclasses.replace(limits, memory_mb=args.memory_mb)
        plugins = [load_plugin(spec, options) for spec, options in file.plugins]
        plugins += [load_plugin(spec) for spec in args.plugin]
        found: list[ToolPlugin] = []
        if not args.no_entry_points:
            found, _problems = entry_point_plugins(file.tools)  # each one logged
        builtin_names = {cls.name for cls in BUILTIN_PLUGINS}
        known = builtin_names | {p.name for p in found}
        for name in file.tools:
            if name not in known:
                raise PluginError(f"tools.{name}: no built-in or installed plugin is named so")
        config = EngineConfig(
            **settings,
            tool_settings={k: v for k, v in file.tools.items() if k in builtin_names},
        )
        return Engine(plugins=[*plugins, *found], config=config, policy=file.policy)
    except (PluginError, ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from None


@contextlib.contextmanager
def _started(engine: Engine) -> Iterator[Engine]:
    """``with engine:``, a failed start said in one line."""
    try:
        engine.start()
    except LimitTooLow as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        raise CommandFailed(f"the engine did not start: {exc.strerror or exc}{where}") from None
    except RuntimeError as exc:
        raise CommandFailed(f"the engine did not start: {exc}") from None
    try:
        yield engine
    finally:
        engine.stop()


def _add_engine_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("engine")
    group.add_argument(
        "--config", metavar="FILE", help="a TOML configuration file (flags given override it)"
    )
    group.add_argument(
        "--no-entry-points",
        action="store_true",
        help="do not load plugins installed under the a2e.tools entry point",
    )
    group.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE:CLASS",
        help="load an extra ToolPlugin (repeatable)",
    )
    group.add_argument(
        "--read-root",
        action="append",
        default=[],
        metavar="DIR",
        help="a directory tools may read besides the workspace (repeatable)",
    )
    group.add_argument(
        "--max-workers",
        type=_at_least(1),
        metavar="N",
        help="calls running at once (default: 4 per core, as far as memory holds each call's "
        "limit; a2e doctor says how many)",
    )
    group.add_argument(
        "--prefork",
        type=_at_least(0),
        metavar="N",
        help="hardened workers kept waiting (default 2)",
    )
    group.add_argument(
        "--max-timeout",
        type=_at_least(1),
        metavar="S",
        help="cap on any call's timeout (default 300 s)",
    )
    group.add_argument(
        "--memory-mb",
        type=_at_least(1),
        metavar="M",
        help="address-space limit per worker (default 1024)",
    )
    group.add_argument(
        "--token",
        default=os.environ.get("A2E_TOKEN"),
        help="require this token: in the handshake, or with --http on every request but "
        "/healthz (default: $A2E_TOKEN)",
    )
    group.add_argument(
        "--audit", default=None, metavar="PATH", help="append one JSON line per call"
    )
    group.add_argument(
        "--require",
        action="append",
        default=[],
        metavar="LAYER",
        choices=sorted(LAYERS),
        help="refuse to start without this isolation layer (repeatable; see a2e doctor)",
    )
    group.add_argument(
        "--no-landlock", action="store_true", help="do not restrict workers with Landlock"
    )
    group.add_argument(
        "--no-writable-root",
        action="store_true",
        help="calls write only their workspace and /tmp, not a layer over the whole root",
    )
    group.add_argument(
        "--no-namespaces",
        action="store_true",
        help="do not use PID/mount namespaces even where available",
    )
    group.add_argument(
        "--no-cgroups", action="store_true", help="no pids or memory cgroup per worker"
    )
    group.add_argument(
        "--no-uid-drop", action="store_true", help="do not run calls as a uid per session"
    )
    group.add_argument(
        "--allow-unprotected-root",
        action="store_true",
        help="run even if workers would be root with nothing keeping them off the host's files",
    )


def _print_event(event: ToolEvent) -> None:
    print(json.dumps({"seq": event.seq, "kind": str(event.kind), "data": event.data}), flush=True)


def _at_least(minimum: int) -> Callable[[str], int]:
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


def _positive_seconds(text: str) -> float:
    """``--timeout``: any positive number of seconds; like the protocol's ``timeout``, a
    fraction is rounded up to whole seconds when the call is sent."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text}")
    return seconds


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


def cmd_call(args: argparse.Namespace) -> int:
    engine = _engine_from_args(args)
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

    with _started(engine):
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
        _say(f"{args.tool}: --keep-output: {problem}")
    if not result.success:
        _say(f"{args.tool}: {result.reason or result.error_code}: {result.error}")
    return 0 if result.success and not keeper.problems else 1


def cmd_list(args: argparse.Namespace) -> int:
    with _started(_engine_from_args(args)) as engine:
        tools = ToolAPI(engine.connect()).list(query=args.query, include_deferred=args.all)
    if args.json_output:
        print(json.dumps([t.model_dump(mode="json") for t in tools], indent=2))
    else:
        for tool in tools:
            params = ", ".join(p.name + ("" if p.required else "?") for p in tool.input_parameters)
            print(f"{tool.name}({params})  {tool.description}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    if [args.stdio, args.mcp, args.http is not None].count(True) != 1:
        raise UsageError("serve: give one of --stdio, --mcp or --http [HOST:PORT]")
    if (args.ray or args.ray_resource) and args.http is None:
        raise UsageError("serve: --ray serves a Ray cluster over --http only")
    if args.stdio:
        return _serve_stdio(args)
    if args.mcp:
        return _serve_mcp(args)
    return _serve_http(args)


def _serve_stdio(args: argparse.Namespace) -> int:
    from a2e_engine.engine.transports.stdio import serve_stdio

    return _serve_until_stdin_ends(args, serve_stdio, "serving on stdio")


def _serve_mcp(args: argparse.Namespace) -> int:
    from a2e_engine.engine.mcp.stdio import serve_mcp_stdio

    def serve(engine: Engine) -> Coroutine[Any, Any, None]:
        return serve_mcp_stdio(engine, args.call_timeout_s)

    return _serve_until_stdin_ends(args, serve, "serving MCP on stdio")


def _serve_until_stdin_ends(
    args: argparse.Namespace, serve: Callable[[Engine], Coroutine[Any, Any, None]], said: str
) -> int:
    """Serve one peer on stdin/stdout, on the engine's loop, until it closes stdin or SIGTERM."""
    with _started(_engine_from_args(args)) as engine:
        logging.getLogger("a2e").info("%s; layers: %s", said, _layer_summary(engine))
        future = asyncio.run_coroutine_threadsafe(serve(engine), engine.loop)

        def stop(signum: int, _frame: Any) -> None:
            future.cancel()

        signal.signal(signal.SIGTERM, stop)
        try:
            future.result()
        except (KeyboardInterrupt, Exception):
            pass
    return 0


def _service_config(args: argparse.Namespace) -> Any:
    """The service's settings from the flags; the rules of binding said as usage errors."""
    from a2e_engine.engine.service import ServiceConfig, is_loopback

    address = args.http or DEFAULT_HTTP
    host, _, port_text = address.rpartition(":") if ":" in address else ("", "", address)
    host = args.host or host or "127.0.0.1"
    try:
        port = int(port_text)
        if not 0 <= port <= 65535:
            raise ValueError
    except ValueError:
        raise UsageError(f"--http: {address!r} is not HOST:PORT or PORT") from None
    token = args.token or None
    if args.no_auth and token is not None:
        raise UsageError("--no-auth and a token (--token or $A2E_TOKEN) exclude each other")
    if not is_loopback(host):
        if args.host is None:
            raise UsageError(
                f"{host} is not a loopback address: to serve beyond this machine, give it "
                "with --host"
            )
        if token is None and not args.no_auth:
            raise UsageError(
                f"serving on {host} needs a token (--token or $A2E_TOKEN), or --no-auth"
            )
        if args.no_auth:
            _say(
                f"warning: serving on {host} with no authentication: anyone who reaches it "
                "can run code"
            )
    try:
        return ServiceConfig(
            host=host,
            port=port,
            token=token,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            drain_s=args.drain_s,
            max_connections=args.max_connections,
            max_message_bytes=args.max_message_bytes,
            max_outbox_bytes=args.max_outbox_bytes,
            request_timeout_s=args.request_timeout_s,
            mcp_call_timeout_s=args.call_timeout_s,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _serve_http(args: argparse.Namespace) -> int:
    service_config = _service_config(args)  # usage errors before a second of imports
    from a2e_engine.engine.service import HttpService, ServiceError

    # The service checks the token on every request, before any message reaches the engine.
    engine_args = argparse.Namespace(**{**vars(args), "token": None})
    engine: Any = _engine_from_args(engine_args)
    if args.ray or args.ray_resource:
        engine = _on_ray(engine, args.ray, args.ray_resource)
    with _started(engine) as engine:
        service = HttpService(engine, service_config)
        try:
            engine.run(service.start(), timeout=60)
        except ServiceError as exc:
            raise CommandFailed(str(exc)) from None
        _say(
            f"serving on {service.url} (WebSocket {service.url.replace('http', 'ws', 1)}/a2e); "
            f"auth {'on' if service_config.token else 'off'}; layers: {_layer_summary(engine)}"
        )
        stopping = threading.Event()

        def stop(signum: int, _frame: Any) -> None:
            stopping.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        while not stopping.wait(0.5):
            pass
        _say(f"stopping: calls in flight have {service_config.drain_s:g} s to finish")
        engine.run(service.drain(), timeout=service_config.drain_s + 60)
    return 0


def _on_ray(engine: Engine, address: str | None, resource: str | None) -> Any:
    """The same plugins, configuration and policy, on every node of a Ray cluster."""
    try:
        import ray  # noqa: F401 - said here, in one line, rather than at start

        from a2e_engine.engine.cluster import RayEngine
    except ImportError:
        raise UsageError("--ray needs Ray: pip install 'a2e-engine[ray]'") from None
    return RayEngine(
        engine.registry.plugins,
        engine.config,
        builtin_tools=False,  # the registry holds them already
        resource=resource,
        address=address or "auto",
        policy=engine.policy,
    )


def _layer_summary(engine: Engine) -> str:
    return ", ".join(
        f"{name}={'on' if info.get('active') else 'off'}" for name, info in engine.layers.items()
    )


DEMO_STEPS: list[tuple[str, str, dict[str, Any], float]] = [
    (
        "Stream output while the code runs",
        "python_eval",
        {
            "code": "import time\nfor i in range(1, 4):\n    print(f'step {i}')\n"
            "    time.sleep(0.2)\nsum(range(10**6))"
        },
        10,
    ),
    (
        "The network is closed to python_eval",
        "python_eval",
        {"code": "import socket\nsocket.create_connection(('127.0.0.1', 9))"},
        10,
    ),
    (
        "New processes are refused under the compute profile",
        "python_eval",
        {"code": "import os\nos.fork()"},
        10,
    ),
    (
        "Only the call's own processes, its own uid, a scrubbed environment",
        "python_eval",
        {
            "code": "import os\nprint('processes:', [p for p in os.listdir('/proc') "
            "if p.isdigit()])\nprint('uid:', os.getuid())\ndict(os.environ)"
        },
        10,
    ),
    (
        "A call writes into a layer of its own; the host's files stay as they are",
        "python_eval",
        {
            "code": "open('/mnt/scratch.txt', 'w').write('gone with the call')\n"
            "print(open('/mnt/scratch.txt').read())\nopen('/etc/a2e-demo', 'w')"
        },
        10,
    ),
    (
        "... and the next call finds none of it",
        "python_eval",
        {"code": "import os\nos.path.exists('/mnt/scratch.txt')"},
        10,
    ),
    (
        "Shell commands run too: a real /bin/sh, still without a network",
        "run_shell",
        {"command": "echo $((6 * 7)); python3 -c 'import socket; socket.socket()' 2>&1 | tail -1"},
        10,
    ),
    (
        "code_eval grades like a benchmark harness; exiting early does not pass",
        "code_eval",
        {
            "program": "import sys\ndef add(a, b):\n    sys.exit(0)\n",
            "tests": "def check(f):\n    assert f(1, 2) == 3\n",
            "entry_point": "add",
        },
        10,
    ),
    (
        "A runaway loop is killed at its deadline",
        "python_eval",
        {"code": "print('spinning...')\nwhile True: pass"},
        2,
    ),
    (
        "Memory is capped (catchable MemoryError)",
        "python_eval",
        {"code": "x = bytearray(4 * 1024**3)"},
        10,
    ),
    (
        "Files: the workspace is shared by a session's calls",
        "python_eval",
        {"code": "open('notes.txt', 'w').write('written by an earlier call\\n')"},
        10,
    ),
    ("... and read_file stays inside its roots", "read_file", {"path": "notes.txt"}, 10),
    ("... even through '..'", "read_file", {"path": "../../../../../../etc/shadow"}, 10),
]


def cmd_demo(args: argparse.Namespace) -> int:
    print("a2e-engine demo: every call below runs in a fresh, sandboxed worker process.\n")
    with _started(_engine_from_args(args)) as engine:
        print(f"isolation layers: {_layer_summary(engine)}\n")
        tools = ToolAPI(engine.connect(client_name="a2e-demo"))
        print("tools:", ", ".join(t.name for t in tools.list()), "\n")
        for title, tool, arguments, timeout in DEMO_STEPS:
            print(f"== {title}\n   {tool} {json.dumps(arguments)[:110]}")

            def show(event: ToolEvent) -> None:
                text = str(event.data.get("chunk", event.data.get("message", ""))).rstrip()
                print(f"   [event {event.seq}] {text}")

            result = tools.call(
                tool_name=tool, arguments=arguments, streaming=True, on_event=show, timeout=timeout
            )
            if result.success:
                print(f"   -> ok in {result.duration_ms} ms: {json.dumps(result.data)[:300]}")
            else:
                print(f"   -> {result.error_code}: {result.error}")
                if result.data:
                    print(f"      partial data: {json.dumps(result.data)[:200]}")
            print()
        count, started = 200, time.perf_counter()
        for _ in range(count):
            tools.call(tool_name="python_eval", arguments={"code": "1 + 1"})
        elapsed = time.perf_counter() - started
        print(
            f"== {count} sequential python_eval calls, each in a fresh sandboxed process: "
            f"{count / elapsed:.0f} calls/s ({elapsed / count * 1000:.1f} ms per call)"
        )
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    """A whole benchmark's samples graded through the engine (``engine.evaluation``)."""
    from a2e_engine.engine.evaluation import EvalOptions, evaluate, prepare

    options = EvalOptions(
        problems=args.problems,
        samples=args.samples,
        out=args.out,
        ks=args.k,
        workers=args.workers,
        seconds=args.timeout,
        language=args.language,
    )
    try:
        plan = prepare(options)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    # The engine runs as many calls at once as there are workers, unless told otherwise.
    for flag in ("max_workers", "prefork"):
        if getattr(args, flag) is None:
            setattr(args, flag, args.workers)
    if args.max_timeout is None:
        args.max_timeout = EVAL_MAX_TIMEOUT_S
    try:
        with _started(_engine_from_args(args)) as engine:
            summary = evaluate(plan, lambda: ToolAPI(engine.connect(client_name="a2e-eval")))
    finally:
        plan.close()
    print(json.dumps(summary))
    return 0


def _ks(text: str) -> tuple[int, ...]:
    try:
        ks = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None
    if not ks or min(ks) < 1:
        raise argparse.ArgumentTypeError(f"each k must be at least 1: {text!r}")
    return ks


def cmd_doctor(args: argparse.Namespace) -> int:
    """Which layers this host gives the sandbox, why not where not, and the limits per call."""
    with _started(_engine_from_args(args, reporting=True)) as engine:
        layers = engine.layers
        limits = engine.config.limits
        zygotes = engine.zygotes
        bound = engine.worker_bound
        live = engine.status().resident_workers
    missing = missing_layers(tuple(args.require), layers)
    languages = toolchains()
    if args.json_output:
        report = {
            "layers": layers,
            "limits": limits.to_dict(),
            "missing": missing,
            "languages": languages,
            "zygotes": zygotes,
            "max_workers": {"workers": bound.workers, "why": bound.why},
            "resident_workers": {"live": live, **dataclasses.asdict(engine.config.resident)},
        }
        print(json.dumps(report, indent=2))
        return 1 if missing else 0
    print(f"a2e doctor: kernel {os.uname().release}, euid {os.geteuid()}\n")
    for name, layer in LAYERS.items():
        info = layers.get(name, {"active": False, "reason": "not reported"})
        state = "on " if info.get("active") else "OFF"
        print(f"  {state}  {name}")
        if not info.get("active"):
            print(f"       why not: {info.get('reason')}")
        print(textwrap.fill(layer.stops, 96, initial_indent=" " * 7, subsequent_indent=" " * 7))
    print(
        f"\nlimits per call: address space {limits.memory_mb} MiB{_uncapped(layers)}, "
        f"CPU {limits.cpu_seconds} s, "
        f"{limits.open_files} open files, files up to {limits.file_size_mb} MiB, "
        f"{limits.processes} processes and threads, {limits.call_memory_mb} MiB in all, "
        f"/tmp {limits.tmp_mb} MiB; per session: {engine.config.workspace_mb} MiB on disk"
    )
    print(f"calls at once: {bound.workers} ({bound.why}); the rest queue")
    resident = engine.config.resident
    print(
        f"stateful sessions (python_session): {live} live, at most {resident.limit} at once, "
        f"each worker kept until {resident.idle_s:g} s idle or {resident.lifetime_s:g} s old"
    )
    print("\nzygotes (every worker is a fork of its plugin's):")
    for zygote in zygotes:
        print(
            f"  {zygote['name']:<11}{zygote.get('rss_kib', 0) / 1024:5.1f} MiB resident, "
            f"{zygote.get('private_kib', 0) / 1024:4.1f} MiB its own, "
            f"{zygote.get('mapped_kib', 0) / 1024:5.1f} MiB mapped, "
            f"{zygote.get('modules', 0)} modules"
        )
    print("\nlanguages (run_code, code_eval):")
    for name, language in languages.items():
        print(f"  {'on ' if language['available'] else 'OFF'}  {name:<11}", end="")
        print(language.get("version") or language.get("missing") or "")
        libraries = language.get("libraries")
        if isinstance(libraries, dict) and libraries:
            has = ", ".join(label for label, present in libraries.items() if present) or "none"
            lacks = [label for label, present in libraries.items() if not present]
            print(f"{'':16}with {has}" + (f"; without {', '.join(lacks)}" if lacks else ""))
    if missing:
        print(f"\nmissing required layers: {'; '.join(missing)}")
        return 1
    return 0


def _uncapped(layers: dict[str, Any]) -> str:
    profiles = layers.get("rlimits", {}).get("address_space_uncapped") or []
    return f" (but {' and '.join(profiles)}: the memory cgroup caps them)" if profiles else ""


class _Parser(argparse.ArgumentParser):
    """argparse's parser with its errors in one line, as every other error of ``a2e`` is (its
    own way prints the whole usage first)."""

    #: Commands registered from outside the engine (``COMMANDS_GROUP``) that no built-in one
    #: shadows: each takes the rest of the command line as its own.
    installed: dict[str, EntryPoint]

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"a2e: {message} (see {self.prog} --help)\n")


def build_parser() -> _Parser:
    parser = _Parser(
        prog="a2e",
        description="Sandboxed tool execution engine",
        epilog="exit status: "
        + "; ".join(f"{code} {meaning}" for code, meaning in EXIT_STATUS.items()),
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log to stderr")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run a short tour of the engine")
    _add_engine_options(demo)
    demo.set_defaults(func=cmd_demo)
    serve = sub.add_parser("serve", help="serve the A2E tools protocol")
    serve.add_argument("--stdio", action="store_true", help="JSON lines on stdin/stdout")
    serve.add_argument(
        "--mcp",
        action="store_true",
        help="the Model Context Protocol on stdin/stdout, for MCP hosts (docs/mcp.md)",
    )
    serve.add_argument(
        "--call-timeout-s",
        type=_positive_seconds,
        default=DEFAULT_TIMEOUT_S,
        metavar="S",
        help="MCP calls' timeout (--mcp, and /mcp with --http), as MCP requests carry none "
        f"(default {DEFAULT_TIMEOUT_S})",
    )
    serve.add_argument(
        "--http",
        nargs="?",
        const=DEFAULT_HTTP,
        metavar="HOST:PORT",
        help="a network service (WebSocket /a2e, REST /v1/tools, SandboxFusion's /run_code, "
        f"MCP /mcp, /healthz, /readyz, /metrics; docs/service.md); {DEFAULT_HTTP} if no address is "
        "given, port 0 for any free port",
    )
    http = serve.add_argument_group("service (--http)")
    http.add_argument(
        "--host", help="bind this address; needed to serve beyond loopback, with a token"
    )
    http.add_argument(
        "--no-auth", action="store_true", help="serve without a token (warned beyond loopback)"
    )
    http.add_argument("--tls-cert", metavar="FILE", help="serve HTTPS with this certificate")
    http.add_argument("--tls-key", metavar="FILE", help="... and this key")
    http.add_argument(
        "--drain-s",
        type=float,
        default=30.0,
        help="on SIGTERM, how long calls in flight may take to finish (default 30)",
    )
    http.add_argument(
        "--max-connections", type=int, default=1024, help="connections at once (default 1024)"
    )
    http.add_argument(
        "--max-message-bytes",
        type=int,
        default=MAX_MESSAGE_BYTES,
        help=f"largest WebSocket message or request body (default {MAX_MESSAGE_BYTES})",
    )
    http.add_argument(
        "--request-timeout-s",
        type=float,
        default=30.0,
        help="how long a client may take to send a request's head, or its body (default 30)",
    )
    http.add_argument(
        "--max-outbox-bytes",
        type=int,
        default=64 * 1024 * 1024,
        help="what may wait for a client that does not read before it is dropped (64 MiB)",
    )
    http.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="serve a Ray cluster: an engine on each of its nodes (docs/cluster.md); "
        "'auto' for the cluster this machine is in",
    )
    http.add_argument(
        "--ray-resource",
        metavar="NAME",
        help="with --ray, only the nodes that have this custom resource",
    )
    _add_engine_options(serve)
    serve.set_defaults(func=cmd_serve)
    lister = sub.add_parser("list", help="list (or search) the tools")
    lister.add_argument("--query", default="", help="search instead of listing")
    lister.add_argument("--all", action="store_true", help="include deferred tools in a search")
    lister.add_argument("--json", dest="json_output", action="store_true", help="print JSON")
    _add_engine_options(lister)
    lister.set_defaults(func=cmd_list)
    doctor = sub.add_parser("doctor", help="which isolation layers this host has, and why not")
    doctor.add_argument("--json", dest="json_output", action="store_true", help="print JSON")
    _add_engine_options(doctor)
    doctor.set_defaults(func=cmd_doctor)
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
        type=_positive_seconds,
        default=DEFAULT_TIMEOUT_S,
        metavar="S",
        help=f"seconds the call may take (default {DEFAULT_TIMEOUT_S}); a fraction is rounded "
        "up to whole seconds, as the protocol does",
    )
    _add_engine_options(call)
    call.set_defaults(func=cmd_call)
    grader = sub.add_parser(
        "eval",
        help="grade a benchmark's samples and print pass@k (HumanEval, MBPP, APPS, MultiPL-E)",
        description="Grade every sample through the engine, writing each result to --out as "
        "it finishes (a run that stopped resumes from that file), then print pass@k as JSON.",
    )
    grader.add_argument("--problems", required=True, metavar="FILE", help="problems, .jsonl[.gz]")
    grader.add_argument("--samples", required=True, metavar="FILE", help="samples, .jsonl[.gz]")
    grader.add_argument("--out", required=True, metavar="FILE", help="results, .jsonl")
    grader.add_argument(
        "-k", type=_ks, default=(1, 10, 100), metavar="K,K...", help="pass@k for these k"
    )
    grader.add_argument(
        "--workers", type=int, default=os.cpu_count() or 2, help="samples graded at once"
    )
    grader.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=3.0,
        metavar="S",
        help="seconds per sample, or per test case when judged by output (default 3)",
    )
    grader.add_argument(
        "--language", default="python", help="for samples and problems that do not say"
    )
    _add_engine_options(grader)
    grader.set_defaults(func=cmd_eval)
    found = entry_points(group=COMMANDS_GROUP)
    parser.installed = {entry.name: entry for entry in found if entry.name not in sub.choices}
    for name, entry in sorted(parser.installed.items()):
        installed = sub.add_parser(name, help=f"from {entry.value} (a2e {name} --help)")
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


def _say(message: object) -> None:
    print("a2e: " + " ".join(str(message).split()), file=sys.stderr)


def _output_closed() -> int:
    """Nobody reads our output any more: say so once, and let the interpreter's last flush
    go nowhere instead of raising again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    _say("the output was closed before it was all written; stopped")
    return 141


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    if argv and argv[0] in parser.installed:
        # Its options are its own (argparse's REMAINDER would not pass a leading --option on).
        command: Callable[[list[str]], int] = parser.installed[argv[0]].load()
        return command(argv[1:])
    args = parser.parse_args(argv)
    _configure_logging(args.verbose)
    try:
        return int(args.func(args))
    except UsageError as exc:
        _say(exc)
        return 2
    except CommandFailed as exc:
        _say(exc)
        return 1
    except BrokenPipeError:
        return _output_closed()
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
