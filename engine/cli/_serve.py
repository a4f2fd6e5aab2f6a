"""``a2e serve``: the engine for one peer on stdio (``--stdio``, ``--mcp``), or as a network
service (``--http``, on a Ray cluster with ``--ray``), until the peer leaves or SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from a2e.caps.tools._models import DEFAULT_TIMEOUT_S
from a2e_engine.engine._engine import Engine
from a2e_engine.engine.cli._arguments import Subcommands, positive_seconds
from a2e_engine.engine.cli._engine_options import (
    add_engine_options,
    engine_from_args,
    layer_summary,
    started,
)
from a2e_engine.engine.cli._errors import CommandFailed, UsageError, say
from a2e_engine.engine.service._config import ServiceConfig, is_loopback

if TYPE_CHECKING:
    from a2e_engine.engine.cluster._backend import RayEngine

__all__ = ["DEFAULT_HTTP", "register", "service_config_of"]

#: Where ``a2e serve --http`` listens when given no address.
DEFAULT_HTTP = "127.0.0.1:8080"


def register(sub: Subcommands) -> None:
    """Add ``a2e serve``."""
    serve = sub.add_parser("serve", help="serve the A2E tools protocol")
    serve.add_argument("--stdio", action="store_true", help="JSON lines on stdin/stdout")
    serve.add_argument(
        "--mcp",
        action="store_true",
        help="the Model Context Protocol on stdin/stdout, for MCP hosts (docs/mcp.md)",
    )
    serve.add_argument(
        "--call-timeout-s",
        type=positive_seconds,
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
    http.add_argument(
        "--api-key-file",
        metavar="FILE",
        help="API keys, one a line (# comments), each a client of its own: what one holds of "
        "the sandbox is judged apart from the others' (without keys, by client address)",
    )
    http.add_argument("--tls-cert", metavar="FILE", help="serve HTTPS with this certificate")
    http.add_argument("--tls-key", metavar="FILE", help="... and this key")
    http.add_argument(
        "--drain-s",
        type=float,
        default=ServiceConfig.drain_s,
        help="on SIGTERM, how long calls in flight may take to finish "
        f"(default {ServiceConfig.drain_s:g})",
    )
    http.add_argument(
        "--max-connections",
        type=int,
        default=ServiceConfig.max_connections,
        help=f"connections at once (default {ServiceConfig.max_connections})",
    )
    http.add_argument(
        "--max-idle-connections",
        type=int,
        default=ServiceConfig.max_idle_connections,
        help="connections waiting for a request, besides those; one more closes the one idle "
        "longest (default: a quarter of --max-connections, 8 to 256)",
    )
    http.add_argument(
        "--max-connections-per-address",
        type=int,
        default=ServiceConfig.max_connections_per_address,
        help="connections one client address may hold (default: a quarter of "
        "--max-connections, 2 to 64)",
    )
    http.add_argument(
        "--websocket-idle-s",
        type=float,
        default=ServiceConfig.websocket_idle_s,
        help="close a WebSocket with no call in flight and no message for this long "
        f"(default {ServiceConfig.websocket_idle_s:g})",
    )
    http.add_argument(
        "--sandboxes-per-client",
        type=int,
        default=ServiceConfig.sandboxes_per_client,
        metavar="N",
        help="E2B sandboxes one client (API key, or address) may hold live at once "
        f"(default {ServiceConfig.sandboxes_per_client})",
    )
    http.add_argument(
        "--max-message-bytes",
        type=int,
        default=ServiceConfig.max_message_bytes,
        help="largest WebSocket message or request body "
        f"(default {ServiceConfig.max_message_bytes})",
    )
    http.add_argument(
        "--max-bodies-bytes",
        type=int,
        default=ServiceConfig.max_bodies_bytes,
        help="what the bodies of the requests in flight may hold together once read "
        "(default: 16 times --max-message-bytes)",
    )
    http.add_argument(
        "--request-timeout-s",
        type=float,
        default=ServiceConfig.request_timeout_s,
        help="how long a client may take to send a request's head, or its body "
        f"(default {ServiceConfig.request_timeout_s:g})",
    )
    http.add_argument(
        "--max-outbox-bytes",
        type=int,
        default=ServiceConfig.max_outbox_bytes,
        help="what may wait for a client that does not read before it is dropped "
        f"(default {ServiceConfig.max_outbox_bytes >> 20} MiB)",
    )
    http.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="serve a Ray cluster: an engine on each of its nodes (docs/cluster.md); "
        "'auto' for the cluster this machine is in; a loopback address (127.0.0.1:PORT) "
        "keeps Ray on this machine",
    )
    http.add_argument(
        "--ray-resource",
        metavar="NAME",
        help="with --ray, only the nodes that have this custom resource",
    )
    add_engine_options(serve)
    serve.set_defaults(func=run_serve)


def run_serve(args: argparse.Namespace) -> int:
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
    from a2e_engine.engine.transports._stdio import serve_stdio

    return _serve_until_stdin_ends(args, serve_stdio, "serving on stdio")


def _serve_mcp(args: argparse.Namespace) -> int:
    from a2e_engine.engine.mcp._stdio import serve_mcp_stdio

    def serve(engine: Engine) -> Coroutine[Any, Any, None]:
        return serve_mcp_stdio(engine, args.call_timeout_s)

    return _serve_until_stdin_ends(args, serve, "serving MCP on stdio")


def _serve_until_stdin_ends(
    args: argparse.Namespace, serve: Callable[[Engine], Coroutine[Any, Any, None]], said: str
) -> int:
    """Serve one peer on stdin/stdout, on the engine's loop, until it closes stdin or SIGTERM."""
    with started(engine_from_args(args)) as engine:
        logging.getLogger("a2e").info("%s; layers: %s", said, layer_summary(engine))
        future = asyncio.run_coroutine_threadsafe(serve(engine), engine.loop)

        def stop(signum: int, _frame: Any) -> None:
            future.cancel()

        signal.signal(signal.SIGTERM, stop)
        try:
            future.result()
        except (KeyboardInterrupt, Exception):
            pass
    return 0


def service_config_of(args: argparse.Namespace) -> ServiceConfig:
    """The service's settings from the flags; the rules of binding said as usage errors."""
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
    api_keys = _api_keys(args.api_key_file)
    if args.no_auth and (token is not None or api_keys):
        raise UsageError(
            "--no-auth and a token (--token, $A2E_TOKEN, --api-key-file) exclude each other"
        )
    if not is_loopback(host):
        if args.host is None:
            raise UsageError(
                f"{host} is not a loopback address: to serve beyond this machine, give it "
                "with --host"
            )
        if token is None and not api_keys and not args.no_auth:
            raise UsageError(
                f"serving on {host} needs a token (--token, $A2E_TOKEN or --api-key-file), "
                "or --no-auth"
            )
        if args.no_auth:
            say(
                f"warning: serving on {host} with no authentication: anyone who reaches it "
                "can run code"
            )
    try:
        return ServiceConfig(
            host=host,
            port=port,
            token=token,
            api_keys=api_keys,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            drain_s=args.drain_s,
            max_connections=args.max_connections,
            max_idle_connections=args.max_idle_connections,
            max_connections_per_address=args.max_connections_per_address,
            websocket_idle_s=args.websocket_idle_s,
            max_message_bytes=args.max_message_bytes,
            max_bodies_bytes=args.max_bodies_bytes,
            max_outbox_bytes=args.max_outbox_bytes,
            request_timeout_s=args.request_timeout_s,
            mcp_call_timeout_s=args.call_timeout_s,
            sandboxes_per_client=args.sandboxes_per_client,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _api_keys(path: str | None) -> tuple[str, ...]:
    """The keys of ``--api-key-file``: one a line, blank lines and ``#`` comments skipped."""
    if path is None:
        return ()
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(
            f"--api-key-file {path}: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    stripped = (line.strip() for line in lines)
    keys = tuple(line for line in stripped if line and not line.startswith("#"))
    if not keys:
        raise UsageError(f"--api-key-file {path}: no key in it")
    return keys


def _serve_http(args: argparse.Namespace) -> int:
    service_config = service_config_of(args)  # usage errors before a second of imports
    from a2e_engine.engine.service import HttpService, ServiceError

    # The service checks the token on every request, before any message reaches the engine.
    local = engine_from_args(args, handshake_token=False)
    engine: Engine | RayEngine = local
    if args.ray or args.ray_resource:
        engine = _on_ray(local, args.ray, args.ray_resource)
    with started(engine) as engine:
        service = HttpService(engine, service_config)
        try:
            engine.run(service.start(), timeout=60)
        except ServiceError as exc:
            raise CommandFailed(str(exc)) from None
        say(
            f"serving on {service.url} (WebSocket {service.url.replace('http', 'ws', 1)}/a2e); "
            f"auth {'on' if service_config.token or service_config.api_keys else 'off'}; "
            f"layers: {layer_summary(engine)}"
        )
        stopping = threading.Event()

        def stop(signum: int, _frame: Any) -> None:
            stopping.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        while not stopping.wait(0.5):
            pass
        say(f"stopping: calls in flight have {service_config.drain_s:g} s to finish")
        engine.run(service.drain(), timeout=service_config.drain_s + 60)
    return 0


def _on_ray(engine: Engine, address: str | None, resource: str | None) -> RayEngine:
    """The same plugins, configuration and policy, on every node of a Ray cluster. A cluster
    on loopback (``127.0.0.1:PORT``) is one on this machine alone: Ray is kept there, where
    left to itself it would dial the machine's interface address and wait for ever."""
    from a2e_engine.engine.cluster._loopback import is_loopback_address, stay_on_loopback

    if address and is_loopback_address(address):
        stay_on_loopback()  # before Ray is imported
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
