"""What the tests that drive E2B's SDK against a real server share: the SDK's options for a
server, and the processes a sandbox's uid runs."""

from __future__ import annotations

from typing import Any

import psutil

from tests.service_process import ServiceProcess


def sdk_opts(server: ServiceProcess, key: str) -> dict[str, Any]:
    """The options that point E2B's SDK at ``server``, both planes, with API key ``key``."""
    return {"api_key": key, "api_url": server.url, "sandbox_url": server.url}


def running_as(uid: int) -> list[psutil.Process]:
    """The processes whose real uid is ``uid`` (a sandbox's, or its family's)."""
    return [p for p in psutil.process_iter(["uids"]) if p.info["uids"].real == uid]
