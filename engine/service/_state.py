"""``ServiceState``: what every part of one service shares: its host, its settings, its
metrics, and whether it is draining; and the one way a request that keeps nothing calls a tool
(``call_once``), for REST, ``/run_code`` and ``/run_jupyter`` alike."""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.requests import Request
from starlette.responses import Response

from a2e._messages import A2EError, A2EMessage, ErrorCode
from a2e.caps.tools._models import ToolCallRequest, ToolCallResponse, ToolResult
from a2e_engine.engine._host import Host, Refused
from a2e_engine.engine.service._auth import tenant_of
from a2e_engine.engine.service._body_budget import BodyBudget
from a2e_engine.engine.service._config import ServiceConfig
from a2e_engine.engine.service._connections import Connections
from a2e_engine.engine.service._metrics import ServiceMetrics
from a2e_engine.engine.service._responses import refusal_response, result_or_gone

__all__ = ["ServiceState"]

#: Protocol errors that mean the service turned a request away (the rest are the client's).
_COUNTED_REFUSALS = frozenset({ErrorCode.OVERLOADED, ErrorCode.MESSAGE_TOO_LARGE})


@dataclass
class ServiceState:
    host: Host
    config: ServiceConfig
    metrics: ServiceMetrics = field(init=False)
    connections: Connections = field(init=False)
    bodies: BodyBudget = field(init=False)
    draining: bool = False

    def __post_init__(self) -> None:
        self.metrics = ServiceMetrics(self.host)
        config = self.config
        self.connections = Connections(
            config.max_connections, config.idle_connections, config.connections_per_address
        )
        self.bodies = BodyBudget(config.bodies_bytes, config.body_charge_bytes)

    def watch(self, message: A2EMessage) -> None:
        """Each message the WebSocket sends: results and refusals are counted."""
        if type(message) is ToolCallResponse:
            self.metrics.observe(message.data)
        elif type(message) is A2EError:
            self._count(message)

    def count_refusal(self, refused: Refused) -> None:
        """The host turned a request away: counted when it was the service's doing."""
        self._count(refused.error)

    def _count(self, error: A2EError) -> None:
        if error.code in _COUNTED_REFUSALS:
            self.metrics.reject(error.code)

    def refusal(self, refused: Refused) -> Response:
        """The HTTP answer to a refusal, counted."""
        self.count_refusal(refused)
        return refusal_response(refused)

    async def call_once(
        self, request: Request, front_end: str, call: ToolCallRequest
    ) -> ToolResult | Response:
        """``call`` in a session of its own for the length of ``request`` (one prepared ahead:
        ``Host.open_session(stateless=True)``), counted: its result, or the response that
        says why there is none (a refusal; 499 when the client went away first, its call
        cancelled)."""
        try:
            session = await self.host.open_session(
                front_end, stateless=True, tenant=tenant_of(request.scope)
            )
        except Refused as exc:
            return self.refusal(exc)
        try:
            result = await result_or_gone(request, session, call)
        except Refused as exc:
            return self.refusal(exc)
        finally:
            session.close()
        if result is None:
            return Response(status_code=499)  # nobody is there to read it
        self.metrics.observe(result)
        return result
