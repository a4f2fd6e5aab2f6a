"""The audit trail: one JSON line per call, to a file, a logger, or both.

A line is written for every call that reached the engine, whatever its outcome (denied, unknown
tool, invalid arguments, timed out, ...), so the trail answers "who ran what, and what happened".
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

__all__ = ["AuditTrail"]


class AuditTrail:
    def __init__(self, path: str | None = None, logger: logging.Logger | None = None) -> None:
        self.path = path
        self.logger = logger
        self._lock = threading.Lock()
        self._file = open(path, "a", buffering=1, encoding="utf-8") if path else None  # noqa: SIM115

    def record(self, **fields: Any) -> None:
        entry = {"ts": round(time.time(), 3), **fields}
        line = json.dumps(entry, separators=(",", ":"), default=str)
        if self._file is not None:
            with self._lock:
                self._file.write(line + "\n")
        if self.logger is not None:
            self.logger.info(line)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
