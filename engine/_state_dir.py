"""The engine's state directory: where the sessions' workspaces and tmp directories live.

One per running engine, named after its owner (PID namespace and pid), so that the next engine
clears what one killed together with its zygote left behind (``sandbox._leftovers``). Mode
``0711``: session uids pass through it to their own directory but cannot list it, so session
names stay secret. Where the engine is root and quotas are on, ``sandbox._quota`` makes it a
shared mount, so that the per-session tmpfs mounted later reach the workers' mount namespaces.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from a2e_engine.sandbox._leftovers import mark_boot, owner_tag, sweep_state_dirs
from a2e_engine.sandbox._quota import unmount_tree

__all__ = ["StateDirectory", "default_parent"]

#: Where state directories go by default, ahead of the system's temporary directory.
PREFERRED_PARENT = "/var/tmp"


def default_parent() -> str:
    """``$TMPDIR`` when it names another place than ``/tmp``; else ``/var/tmp`` where it is
    there to write; else the system's temporary directory. Not ``/tmp`` first: the programs a
    call runs write their run layer's ``/tmp`` (``sandbox._run_root``), which they could not if
    the engine's state, the shared compile cache among it, lay beneath it."""
    chosen = os.environ.get("TMPDIR")
    if chosen and os.path.realpath(chosen) != "/tmp":
        return tempfile.gettempdir()
    if os.access(PREFERRED_PARENT, os.W_OK | os.X_OK):
        return PREFERRED_PARENT
    return tempfile.gettempdir()


class StateDirectory:
    """Made by ``create``, gone (with every mount below it) after ``remove``."""

    def __init__(self, parent: str | None = None) -> None:
        self.parent = parent  # None: default_parent()
        self.path = ""

    def create(self) -> str:
        if self.parent:
            os.makedirs(self.parent, mode=0o700, exist_ok=True)
            parent, prefix = self.parent, "a2e-"
        else:
            parent, prefix = default_parent(), "a2e-engine-"
        sweep_state_dirs(parent, prefix)
        # Real: workers refuse a link anywhere on the way to a session's directories.
        self.path = os.path.realpath(tempfile.mkdtemp(prefix=f"{prefix}{owner_tag()}-", dir=parent))
        os.chmod(self.path, 0o711)
        mark_boot(self.path)
        return self.path

    def remove(self) -> None:
        if not self.path:
            return
        unmount_tree(self.path)  # session quotas, then the state directory's own bind
        shutil.rmtree(self.path, ignore_errors=True)
