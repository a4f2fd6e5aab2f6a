"""What operators and orchestrators ask: ``/healthz`` (the process is alive: no token, for load
balancers), ``/readyz`` (calls can run now; 503 while the zygote restarts, once the sandbox is
broken, and while the service drains) and ``/metrics`` (Prometheus text).

Their answers are models so that ``/openapi.json`` describes them from the same source."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2e_engine.engine.service._metrics import CONTENT_TYPE
from a2e_engine.engine.service._responses import json_response
from a2e_engine.engine.service._state import ServiceState

__all__ = ["Liveness", "Readiness", "probe_routes"]


class Liveness(BaseModel):
    status: Literal["alive"] = "alive"


class Readiness(BaseModel):
    ready: bool
    reason: str
    calls_in_flight: int
    calls_running: int
    queue_length: int
    workers_waiting: int
    zygote_restarts: int
    max_workers: int = Field(description="calls that may run at once; the rest queue")
    max_workers_why: str = Field(description="as configured, or what it was sized from")
    resident_workers: int = Field(description="workers sessions keep for stateful tools")
    max_resident_workers: int = Field(description="how many sessions may keep one at once")


def probe_routes(state: ServiceState) -> list[Route]:
    host = state.host

    async def healthz(request: Request) -> Response:
        return json_response(Liveness().model_dump(mode="json"))

    async def readyz(request: Request) -> Response:
        status = host.status()
        ready = status.ready and not state.draining
        body = Readiness(
            ready=ready,
            reason="the service is draining" if state.draining else status.why_not_ready,
            calls_in_flight=status.calls_pending,
            calls_running=status.calls_running,
            queue_length=status.calls_queued,
            workers_waiting=status.workers_waiting,
            zygote_restarts=status.zygote_restarts,
            max_workers=status.max_workers,
            max_workers_why=status.max_workers_why,
            resident_workers=status.resident_workers,
            max_resident_workers=status.max_resident_workers,
        )
        return json_response(body.model_dump(mode="json"), 200 if ready else 503)

    async def metrics(request: Request) -> Response:
        return Response(state.metrics.render(), media_type=CONTENT_TYPE)

    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
