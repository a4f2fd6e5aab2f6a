"""Where a network tool may connect: globally routable addresses, plus what the engine allows.

Shared by every tool of the ``network`` profile (``http_request``, ``use_a2a_agent``), so that one
``allow`` list means the same thing for all of them. The check is made on the addresses a name
*resolves to*, every one of them, and the caller connects to the address that was checked: a
second DNS answer (rebinding) cannot slip an internal address in. Loopback, private, link-local
(cloud metadata at 169.254.169.254), shared, multicast, reserved and IPv4-mapped forms of those
are refused unless ``allow`` names the host, the address or a network holding it.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Sequence

__all__ = ["DestinationRefused", "Destinations", "addresses_of"]

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class DestinationRefused(Exception):
    """The connection may not go where it was asked to go; the message says why."""


class Destinations:
    """The engine's network policy for one tool: ``allow`` lists hosts, addresses or networks
    (``"127.0.0.1"``, ``"10.0.0.0/8"``, ``"peer.internal"``) to permit besides public ones."""

    def __init__(self, allow: Iterable[str] = ()) -> None:
        self.networks: list[Network] = []
        self.hosts: set[str] = set()
        for entry in allow:
            if not isinstance(entry, str) or not entry:
                raise ValueError(f"allow: {entry!r} is not a host, address or network")
            try:
                self.networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                self.hosts.add(_normal(entry))

    def pick(self, host: str, addresses: Sequence[str]) -> str:
        """The address to connect to, if ``host`` and every address it resolved to may be
        reached; raises ``DestinationRefused`` naming the first one that may not."""
        if not addresses:
            raise DestinationRefused(f"{host!r} resolved to no address")
        if _normal(host) in self.hosts:
            return addresses[0]
        for text in addresses:
            why = self.why_refused(ipaddress.ip_address(text.split("%")[0]))
            if why:
                shown = host if text == host else f"{host} ({text})"
                raise DestinationRefused(f"{shown} is {why}; the engine does not allow it")
        return addresses[0]

    def resolve(self, host: str, port: int) -> str:
        """Resolve ``host`` (blocking) and ``pick`` among its addresses."""
        try:
            infos = socket.getaddrinfo(_normal(host), port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise DestinationRefused(f"cannot resolve {host!r}: {exc.strerror}") from None
        return self.pick(host, addresses_of(infos))

    def why_refused(self, address: Address) -> str:
        """Empty when ``address`` may be reached, otherwise what kind of address it is."""
        if any(address in network for network in self.networks):
            return ""
        mapped = getattr(address, "ipv4_mapped", None)
        if mapped is not None:
            return self.why_refused(mapped)
        for attribute, kind in (
            ("is_loopback", "a loopback address"),
            ("is_unspecified", "an unspecified address"),
            ("is_link_local", "a link-local address (cloud metadata lives there)"),
            ("is_multicast", "a multicast address"),
            ("is_private", "a private address"),
            ("is_reserved", "a reserved address"),
        ):
            if getattr(address, attribute):
                return kind
        return "" if address.is_global else "not a globally routable address"

    def literal_refusal(self, host: str) -> str:
        """Why ``host`` is refused if it is an address literal (no DNS needed), else empty: lets
        configuration name a forbidden peer at start rather than at its first call."""
        try:
            address = ipaddress.ip_address(host.strip("[]").split("%")[0])
        except ValueError:
            return ""
        why = self.why_refused(address)
        return f"{host} is {why}; add it to allow to permit it" if why else ""


def addresses_of(infos: Iterable[tuple[object, ...]]) -> list[str]:
    """The distinct addresses of ``getaddrinfo`` results, in its order."""
    return list(dict.fromkeys(str(info[4][0]) for info in infos))  # type: ignore[index]


def _normal(host: str) -> str:
    return host.lower().rstrip(".").strip("[]")
