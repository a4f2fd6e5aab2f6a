"""The engine on a Ray cluster: one engine per node, reached with the same ``A2EClient``.

``RayEngine`` (``backend``) keeps an engine actor on every node (``node``); a client it gives
out talks to them through ``transport``, whose messages travel on the driver's one channel to
each node (``channel``, ``frames``) and its relay there (``relay``), while Ray starts, places,
watches and stops the actors. Importing this package does not import Ray; starting a
``RayEngine`` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2e._lazy import lazy_exports

if TYPE_CHECKING:
    from a2e_engine.engine.cluster._backend import RayEngine
    from a2e_engine.engine.cluster._links import NodeInfo
    from a2e_engine.engine.cluster._loopback import stay_on_loopback

__all__ = ["NodeInfo", "RayEngine", "stay_on_loopback"]

__getattr__ = lazy_exports(
    __name__,
    {
        "NodeInfo": "a2e_engine.engine.cluster._links",
        "RayEngine": "a2e_engine.engine.cluster._backend",
        "stay_on_loopback": "a2e_engine.engine.cluster._loopback",
    },
)
