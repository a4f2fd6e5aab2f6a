"""The engine as a network service (``a2e serve --http``): the A2E protocol over WebSocket, and
the operations endpoints, on uvicorn. Each transport here knows only the host protocol."""

from a2e_engine.engine.service.config import ServiceConfig, is_loopback
from a2e_engine.engine.service.server import HttpService, ServiceError

__all__ = ["HttpService", "ServiceConfig", "ServiceError", "is_loopback"]
