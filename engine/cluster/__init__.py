"""The engine on a Ray cluster: one engine per node, reached with the same ``A2EClient``.

``RayEngine`` (``backend``) keeps an engine actor on every node (``node``); a client it gives
out talks to them through ``transport``, whose messages travel on the driver's one channel to
each node (``channel``, ``frames``) and its relay there (``relay``), while Ray starts, places,
watches and stops the actors. Importing this package does not import Ray; starting a
``RayEngine`` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2e.lazy import lazy_exports

if TYPE_CHECKING:
    from a2e_engine.engine.cluster.backend import RayEngine
    from a2e_engine.engine.cluster.links import NodeInfo

__all__ = ["NodeInfo", "RayEngine"]

__getattr__ = lazy_exports(
    __name__,
    {
        "NodeInfo": "a2e_engine.engine.cluster.links",
        "RayEngine": "a2e_engine.engine.cluster.backend",
    },
)
