"""``RefuseWhileDraining``: once the service drains (SIGTERM), new requests get 503 and new
WebSockets are refused, while what is already running goes on (``engine.service._server``)."""

from __future__ import annotations

from a2e_engine.engine.service._auth import App, Receive, Scope, SendMessage, refuse
from a2e_engine.engine.service._state import ServiceState

__all__ = ["RefuseWhileDraining"]


class RefuseWhileDraining:
    def __init__(self, app: App, state: ServiceState, open_paths: frozenset[str]) -> None:
        self.app = app
        self.state = state
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: SendMessage) -> None:
        if (
            self.state.draining
            and scope["type"] in ("http", "websocket")
            and scope["path"] not in self.open_paths
        ):
            self.state.metrics.reject("draining")
            await refuse(
                scope,
                send,
                503,
                "draining",
                "the service is shutting down; try another instance",
                [(b"connection", b"close"), (b"retry-after", b"1")],
            )
            return
        await self.app(scope, receive, send)
