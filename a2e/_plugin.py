"""Base of every capability plugin."""

from __future__ import annotations

import logging
from abc import ABC
from typing import ClassVar

from a2e._capability import A2ECapability

__all__ = ["A2EPlugin"]


class A2EPlugin(ABC):
    """What all plugins share: a name, the capability they serve, and an audit logger."""

    name: ClassVar[str] = "base"
    capability: ClassVar[A2ECapability]

    def audit_handle(self) -> logging.Logger:
        """Logger for this plugin's own audit lines (the engine writes one line per call too)."""
        return logging.getLogger(f"a2e.plugin.{self.name}")
