"""The service's ASGI app: which path does what, behind which checks.

``/a2e`` is the A2E protocol over WebSocket (``engine.service.websocket``); ``/v1/tools`` is
REST for tools (``engine.service.rest``); ``/run_code`` and ``/v1/ping`` are SandboxFusion's
(``engine.service.sandbox_fusion``); ``/mcp`` is MCP's Streamable HTTP (``engine.mcp.http``);
``/openapi.json`` describes the REST ones. ``/healthz`` says the
process is alive (no token: for load balancers and orchestrators); ``/readyz`` says whether
calls can run now; ``/metrics`` is Prometheus text. Every path but ``/healthz`` wants the
token (``engine.service.auth``).
While the service drains (``ServiceState.draining``) new requests get 503 and new WebSockets are
refused, and the calls in flight finish.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from a2e_engine.engine.mcp.http import McpEndpoint
from a2e_engine.engine.service.auth import RequireToken
from a2e_engine.engine.service.draining import RefuseWhileDraining
from a2e_engine.engine.service.metrics import CONTENT_TYPE
from a2e_engine.engine.service.openapi import openapi_document
from a2e_engine.engine.service.responses import json_response
from a2e_engine.engine.service.rest import rest_routes
from a2e_engine.engine.service.sandbox_fusion import sandbox_fusion_routes
from a2e_engine.engine.service.state import ServiceState
from a2e_engine.engine.service.websocket import serve_websocket

__all__ = ["OPEN_PATHS", "build_app"]

#: Paths anyone may ask, token or not, draining or not.
OPEN_PATHS = frozenset({"/healthz"})


def build_app(state: ServiceState, mcp: McpEndpoint, version: str = "0") -> RequireToken:
    host, config = state.host, state.config

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "alive"})

    async def readyz(request: Request) -> Response:
        status = host.status()
        ready = status.ready and not state.draining
        body = {
            "ready": ready,
            "reason": "the service is draining" if state.draining else status.why_not_ready,
            "calls_in_flight": status.calls_pending,
            "calls_running": status.calls_running,
            "queue_length": status.calls_queued,
            "workers_waiting": status.workers_waiting,
            "zygote_restarts": status.zygote_restarts,
        }
        return JSONResponse(body, status_code=200 if ready else 503)

    async def metrics(request: Request) -> Response:
        return Response(state.metrics.render(), media_type=CONTENT_TYPE)

    document = openapi_document(version)

    async def openapi(request: Request) -> Response:
        return json_response(document)

    async def a2e(websocket: WebSocket) -> None:
        await serve_websocket(host, websocket, config, state.watch, lambda: state.draining)

    routes: list[BaseRoute] = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        WebSocketRoute("/a2e", a2e),
        Route("/mcp", mcp),
        *rest_routes(state),
        *sandbox_fusion_routes(state),
    ]
    app = Starlette(routes=routes)
    gated = RefuseWhileDraining(app, state, OPEN_PATHS | {"/readyz"})
    return RequireToken(gated, config.token, OPEN_PATHS, on_refused=state.metrics.reject)
