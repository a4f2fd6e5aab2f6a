"""Ray on one machine, kept on loopback: for tests, benchmarks and trying it out.

Left to itself, Ray takes the machine's interface address as every node's, even for a cluster
started on 127.0.0.1, and dials it; inside containers and sandboxed machines that address is
often not reachable (the GCS connection then times out). Ray reads these settings when it is
imported, and its processes inherit them: call this before the first ``import ray``.
"""

from __future__ import annotations

import ipaddress
import os

__all__ = ["is_loopback_address", "stay_on_loopback"]


def stay_on_loopback() -> None:
    """Every Ray address on this machine 127.0.0.1, and no usage statistics sent: what
    ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` and ``RAY_USAGE_STATS_ENABLED=0`` say (export
    them before ``ray start`` to start a cluster that stays there). Settings already made
    are kept."""
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # local addresses only
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def is_loopback_address(address: str) -> bool:
    """Whether a Ray address (``HOST:PORT``, ``ray://HOST:PORT``) names this machine's
    loopback: a cluster there is one that stays on it."""
    host = address.removeprefix("ray://").rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
