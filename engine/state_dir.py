"""The engine's state directory: where the sessions' workspaces and tmp directories live.

One per running engine, named after its owner (PID namespace and pid), so that the next engine
clears what one killed together with its zygote left behind (``sandbox.leftovers``). Mode
``0711``: session uids pass through it to their own directory but cannot list it, so session
names stay secret. Where the engine is root and quotas are on, it is also a shared mount, so
that the per-session tmpfs mounted later reach the workers' mount namespaces
(``sandbox.quota``).
"""

from __future__ import annotations

import os
import shutil
import tempfile

from a2e_engine.sandbox.leftovers import owner_tag, sweep_state_dirs
from a2e_engine.sandbox.quota import share_state_dir, unmount_tree

__all__ = ["StateDirectory"]


class StateDirectory:
    """Made by ``create``, gone (with every mount below it) after ``remove``."""

    def __init__(self, parent: str | None = None) -> None:
        self.parent = parent  # None: the system's temporary directory
        self.path = ""

    def create(self) -> str:
        if self.parent:
            os.makedirs(self.parent, mode=0o700, exist_ok=True)
            parent, prefix = self.parent, "a2e-"
        else:
            parent, prefix = tempfile.gettempdir(), "a2e-engine-"
        sweep_state_dirs(parent, prefix)
        self.path = tempfile.mkdtemp(prefix=f"{prefix}{owner_tag()}-", dir=parent)
        os.chmod(self.path, 0o711)
        return self.path

    def share_for_quotas(self, workspace_mb: int) -> str | None:
        """Make per-session quotas possible; why they are off, or ``None`` when they are on."""
        if not workspace_mb:
            return "disabled by configuration"
        if os.geteuid() != 0:
            return "not running as root: no tmpfs per session"
        try:
            share_state_dir(self.path)
        except OSError as exc:
            return f"cannot make the state directory a shared mount: {exc.strerror}"
        return None

    def remove(self) -> None:
        if not self.path:
            return
        unmount_tree(self.path)  # session quotas, then the state directory's own bind
        shutil.rmtree(self.path, ignore_errors=True)
