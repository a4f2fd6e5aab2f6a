"""An ``httpx`` transport whose every connection passes the engine's network policy.

For tools built on libraries that speak HTTP through ``httpx`` (the A2A SDK): the library may
connect wherever a server's answer points it (an agent card names its own endpoint URL), so the
check cannot be made on the URL we start from. It is made where the connection is opened: the
host is resolved, every address it resolves to must pass ``Destinations``, and the socket goes to
the checked address (TLS still verifies the certificate against the host name). Unix sockets and
proxies from the environment are not used.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

from a2e_engine.tools._destinations import Destinations, addresses_of

__all__ = ["CheckedTransport"]


class _CheckedBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, destinations: Destinations) -> None:
        self.destinations = destinations
        self.inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(
                loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), timeout
            )
        except socket.gaierror as exc:
            raise httpcore.ConnectError(f"cannot resolve {host!r}: {exc.strerror}") from None
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"resolving {host!r} timed out") from None
        address = self.destinations.pick(host, addresses_of(infos))
        return await self.inner.connect_tcp(
            address, port, timeout=timeout, local_address=local_address,
            socket_options=socket_options,
        )  # fmt: skip

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are not network destinations; refused")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class CheckedTransport(httpx.AsyncHTTPTransport):
    """``httpx.AsyncHTTPTransport`` over a connection pool that checks each new connection.

    A refused destination raises ``tools._destinations.Refused`` out of the request.
    """

    def __init__(self, destinations: Destinations, ssl_context: ssl.SSLContext | None = None):
        context = ssl_context or httpx.create_ssl_context()
        super().__init__(verify=context, trust_env=False)
        # httpx takes no network backend of its own; its pool is the one attribute we replace.
        # tests/test_a2a.py pins that a refused address stays refused if httpx changes this.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=context, network_backend=_CheckedBackend(destinations)
        )
