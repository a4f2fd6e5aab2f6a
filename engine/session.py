"""A session: what a handshake grants, and the workspace its calls share."""

from __future__ import annotations

import os
import shutil
import time
import uuid
from dataclasses import dataclass, field

from engine.policy import Policy

__all__ = ["Session"]


@dataclass
class Session:
    """Granted capabilities, the session's policies, and its workspace directory.

    The workspace is the working directory of every call of the session: what one call writes
    there, the next one reads. It is created with the session and removed with it.
    """

    client: str
    capabilities: frozenset[str]
    root: str
    policies: list[Policy] = field(default_factory=list)
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    created: float = field(default_factory=time.time)

    @property
    def workspace(self) -> str:
        return os.path.join(self.root, "workspace")

    @property
    def tmp_root(self) -> str:
        return os.path.join(self.root, "tmp")

    def create_dirs(self) -> None:
        os.makedirs(self.workspace, mode=0o700)
        os.makedirs(self.tmp_root, mode=0o700)

    def remove_dirs(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
