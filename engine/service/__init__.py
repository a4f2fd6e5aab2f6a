"""The engine as a network service (``a2e serve --http``): the A2E protocol over WebSocket, and
the operations endpoints, on uvicorn. Each transport here knows only the host protocol.

``HttpService`` brings uvicorn, Starlette and the MCP SDK (over a second of imports): it is
imported when first asked for, so that checking a service's settings (``ServiceConfig``, and
``a2e serve``'s usage errors) does not wait for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2e._lazy import lazy_exports

if TYPE_CHECKING:
    from a2e_engine.engine.service._config import ServiceConfig, is_loopback
    from a2e_engine.engine.service._server import HttpService, ServiceError

__all__ = ["HttpService", "ServiceConfig", "ServiceError", "is_loopback"]


__getattr__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(("HttpService", "ServiceError"), "a2e_engine.engine.service._server"),
        **dict.fromkeys(("ServiceConfig", "is_loopback"), "a2e_engine.engine.service._config"),
    },
)
