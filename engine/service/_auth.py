"""``RequireToken``: every request but the open ones shows the service's token, or gets 401.

The token comes as ``Authorization: Bearer T`` (or ``X-API-Key: T``, as the E2B SDK sends
it), or as ``?token=T`` for clients that can only be
given a URL (verl's ``sandbox_fusion_url``), or as a path prefix ``/t/T/...`` for clients that
append their path to a base URL they are given (SkyRL's ``SANDBOX_FUSION_URL``), where a query
string would end up before the path. It is compared in constant
time. A WebSocket upgrade without it is refused with the same 401, before the upgrade (the ASGI
denial response), so that a client sees why rather than a bare close.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qs

from a2e import _jsonwire as jsonwire
from a2e_engine.engine.service._bodies import ErrorBody

__all__ = ["RequireToken", "presented_token", "refuse", "strip_path_token", "tenant_of"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
SendMessage = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, SendMessage], Awaitable[None]]


#: The path prefix that carries a token: ``/t/<token>/rest/of/the/path``.
PATH_TOKEN = "/t/"
#: Where a request's scope says which API key it showed (``tenant_of``).
TENANT = "a2e.tenant"


def strip_path_token(scope: Scope) -> tuple[Scope, str | None]:
    """The request as if it had no ``/t/<token>`` prefix, and the token it carried."""
    path: str = scope["path"]
    if not path.startswith(PATH_TOKEN):
        return scope, None
    token, _, rest = path[len(PATH_TOKEN) :].partition("/")
    stripped = dict(scope)
    stripped["path"] = "/" + rest
    stripped["raw_path"] = stripped["path"].encode()
    return stripped, token


def presented_token(scope: Scope) -> str | None:
    """The token a request shows: its bearer header first, else its ``X-API-Key`` header (the
    E2B SDK's, ``engine.e2b``), else its ``token`` parameter."""
    api_key = None
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, credentials = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer":
                return credentials.strip()
        elif name == b"x-api-key":
            api_key = value.decode("latin-1").strip()
    if api_key is not None:
        return api_key
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    tokens = query.get("token")
    return tokens[-1] if tokens else None


class RequireToken:
    def __init__(
        self,
        app: App,
        token: str | None,
        open_paths: frozenset[str],
        on_refused: Callable[[str], None] = lambda reason: None,
        api_keys: tuple[str, ...] = (),
    ) -> None:
        self.app = app
        self._expected = token.encode() if token is not None else None
        self._keys = [key.encode() for key in api_keys]
        self.open_paths = open_paths
        self._on_refused = on_refused

    async def __call__(self, scope: Scope, receive: Receive, send: SendMessage) -> None:
        if scope["type"] in ("http", "websocket"):
            scope, in_path = strip_path_token(scope)
        else:
            in_path = None
        if (
            (self._expected is None and not self._keys)
            or scope["type"] not in ("http", "websocket")
            or scope["path"] in self.open_paths
        ):
            await self.app(scope, receive, send)
            return
        shown = in_path if in_path is not None else presented_token(scope)
        key = self._key_of(shown.encode()) if shown is not None else None
        if key is not None:
            if key:
                scope[TENANT] = key
            await self.app(scope, receive, send)
            return
        self._on_refused("unauthorized")
        why = "missing token" if shown is None else "wrong token"
        await refuse(
            scope,
            send,
            401,
            "unauthorized",
            f"{why}: send 'Authorization: Bearer <token>', 'X-API-Key: <token>' or ?token=",
            [(b"www-authenticate", b'Bearer realm="a2e"')],
        )

    def _key_of(self, shown: bytes) -> str | None:
        """Which of the service's keys ``shown`` is: ``""`` for its token, ``key:N`` for the
        N-th API key (its client, a tenant of its own), None for none. Every one is compared,
        in constant time each, whichever matches."""
        found: str | None = None
        if self._expected is not None and hmac.compare_digest(shown, self._expected):
            found = ""
        for number, key in enumerate(self._keys, 1):
            if hmac.compare_digest(shown, key) and found is None:
                found = f"key:{number}"
        return found


def tenant_of(scope: Scope) -> str:
    """Who a request is for, as far as the service can tell: the API key it showed, where the
    service has several, one per client; else its client's address."""
    keyed = scope.get(TENANT)
    if isinstance(keyed, str) and keyed:
        return keyed
    client = scope.get("client")
    return f"address:{client[0]}" if client else "address:?"


async def refuse(
    scope: Scope,
    send: SendMessage,
    status: int,
    error: str,
    why: str,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """Answer an HTTP request, or refuse a WebSocket before its upgrade, with ``status`` and a
    JSON ``ErrorBody``; to E2B's SDK, which reads no other, E2B's ``{"code", "message"}``."""
    if _from_e2b(scope):
        value: dict[str, Any] = {"code": status, "message": why}
    else:
        value = ErrorBody(error=error, message=why).model_dump(mode="json")
    await _send_json(scope, send, status, value, headers or [])


def _from_e2b(scope: Scope) -> bool:
    """Whether a request comes from E2B's SDK, which names its key ``X-API-Key``."""
    return any(name == b"x-api-key" for name, _ in scope.get("headers", ()))


async def _send_json(
    scope: Scope,
    send: SendMessage,
    status: int,
    value: dict[str, Any],
    headers: list[tuple[bytes, bytes]],
) -> None:
    body = jsonwire.dumps(value).encode()
    all_headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *headers,
    ]
    prefix = "websocket.http.response" if scope["type"] == "websocket" else "http.response"
    await send({"type": f"{prefix}.start", "status": status, "headers": all_headers})
    await send({"type": f"{prefix}.body", "body": body})
