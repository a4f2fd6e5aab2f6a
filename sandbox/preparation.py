"""``Preparation``: what the zygote prepares its layers from, and where each says if it is on.

Every layer module (``sandbox.layers`` lists them) has a ``prepare(prep, ...)`` that the zygote
calls once, in the order of ``Zygote.prepare``: it probes what the host allows, prepares what
every worker will use, and reports its layers under their names, active or why not (what
``a2e doctor`` and ``EngineConfig.require`` read).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from a2e_engine.sandbox.settings import ZygoteSettings

__all__ = ["Preparation"]


@dataclass
class Preparation:
    settings: ZygoteSettings
    #: What a worker may need to import from: the Python installation, our packages and the
    #: plugins' (``landlock.readable_code_paths``).
    code_paths: tuple[str, ...] = ()
    #: Running in a user namespace of our own (an engine that is not root).
    in_user_namespace: bool = False
    layers: dict[str, dict[str, Any]] = field(default_factory=dict)

    def report(self, layer: str, why_not: str | None, **facts: Any) -> None:
        self.layers[layer] = {"active": why_not is None, "reason": why_not or "", **facts}
