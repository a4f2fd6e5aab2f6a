"""The service's ASGI app: which path does what, behind which checks.

``/a2e`` is the A2E protocol over WebSocket (``engine.service._websocket``); ``/v1/tools`` is
REST for tools (``engine.service._rest``); ``/run_code``, ``/run_jupyter`` and ``/v1/ping`` are
SandboxFusion's (``engine.service._sandbox_fusion``), and so are ``/submit``, ``/get_prompts``,
``/get_prompt_by_id``, ``/list_ids`` and ``/list_datasets``
(``engine.service._sandbox_fusion_oj``); ``/mcp`` is MCP's Streamable HTTP (``engine.mcp._http``);
``/v2/sandboxes`` and ``/sandboxes/...`` are E2B's control plane (``engine.e2b``);
``/openapi.json`` describes the others. ``/healthz``, ``/readyz`` and ``/metrics`` are for
operators (``engine.service._probes``). Every path but ``/healthz`` wants the token
(``engine.service._auth``). A request that names an E2B sandbox (``E2b-Sandbox-Id``) or is a
signed file URL of one goes to that sandbox's own side (``engine.e2b._sandbox_side``), whose
key is the sandbox's access token, not the service's.
While the service drains (``ServiceState.draining``) new requests get 503 and new WebSockets are
refused, and the calls in flight finish.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from a2e_engine.engine.e2b._control import E2BEndpoint
from a2e_engine.engine.e2b._sandbox_side import SandboxSide
from a2e_engine.engine.mcp._http import McpEndpoint
from a2e_engine.engine.service._auth import RequireToken
from a2e_engine.engine.service._body_budget import HoldBodies
from a2e_engine.engine.service._draining import RefuseWhileDraining
from a2e_engine.engine.service._openapi import openapi_document
from a2e_engine.engine.service._probes import probe_routes
from a2e_engine.engine.service._responses import json_response
from a2e_engine.engine.service._rest import rest_routes
from a2e_engine.engine.service._sandbox_fusion import sandbox_fusion_routes
from a2e_engine.engine.service._sandbox_fusion_oj import online_judge_routes
from a2e_engine.engine.service._state import ServiceState
from a2e_engine.engine.service._websocket import serve_websocket

__all__ = ["OPEN_PATHS", "build_app"]

#: Paths anyone may ask, token or not, draining or not.
OPEN_PATHS = frozenset({"/healthz"})


def build_app(
    state: ServiceState, mcp: McpEndpoint, e2b: E2BEndpoint, version: str = "0"
) -> ASGIApp:
    host, config = state.host, state.config

    # /readyz answers while draining: that it is draining, for the balancer to see.
    undrained = OPEN_PATHS | {"/readyz"}
    document = openapi_document(version, open_paths=OPEN_PATHS, undrained_paths=undrained)

    async def openapi(request: Request) -> Response:
        return json_response(document)

    async def a2e(websocket: WebSocket) -> None:
        await serve_websocket(host, websocket, config, state.watch, lambda: state.draining)

    routes: list[BaseRoute] = [
        *probe_routes(state),
        Route("/openapi.json", openapi, methods=["GET"]),
        WebSocketRoute("/a2e", a2e),
        Route("/mcp", mcp),
        *rest_routes(state),
        *sandbox_fusion_routes(state),
        *online_judge_routes(state),
        *e2b.routes(),
    ]
    app = Starlette(routes=routes)
    gated = RefuseWhileDraining(HoldBodies(app, state.bodies), state, undrained)
    service = RequireToken(
        gated, config.token, OPEN_PATHS, on_refused=state.metrics.reject, api_keys=config.api_keys
    )
    return _SandboxesFirst(
        e2b.sandbox_side, RefuseWhileDraining(e2b.sandbox_side, state, frozenset()), service
    )


class _SandboxesFirst:
    """A request for a sandbox's own side (``SandboxSide.wants``: it names one) goes there,
    where the sandbox's access token is its key; every other one to the service, behind its
    token."""

    def __init__(self, side: SandboxSide, drained_side: ASGIApp, service: ASGIApp) -> None:
        self.wants = side.wants
        self.side = drained_side
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.wants(scope):
            await self.side(scope, receive, send)
        else:
            await self.service(scope, receive, send)
