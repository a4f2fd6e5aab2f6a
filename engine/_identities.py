"""Session uids: each live session gets a uid of its own from the engine's range.

Handed out round-robin, so a uid freed by an ended session is the last to be reused; two live
sessions never share one. A forked sandbox's copies each get their own, and hold their
family's too (``share``): their copied interpreter keeps it (a process cannot change its uid),
so it is not handed out while one lives. Running out is an error the client sees, never a
silent sharing of uids between sessions.
"""

from __future__ import annotations

import threading

__all__ = ["SessionUids", "UidsExhausted"]


class UidsExhausted(RuntimeError):
    """Every uid of the range belongs to a live session."""


class SessionUids:
    def __init__(self, first: int, count: int) -> None:
        if first <= 0 or count < 1:
            raise ValueError("the uid range must start above 0 and hold at least one uid")
        self.first = first
        self.count = count
        self._next = 0
        self._taken: dict[int, int] = {}  # by uid, the live sessions that have it
        self._lock = threading.Lock()

    def take(self) -> int:
        with self._lock:
            for _ in range(self.count):
                uid = self.first + self._next
                self._next = (self._next + 1) % self.count
                if uid not in self._taken:
                    self._taken[uid] = 1
                    return uid
        raise UidsExhausted(
            f"all {self.count} session uids are in use; end sessions or widen uid_range"
        )

    def share(self, uid: int) -> int:
        """``uid``, held by one more session (a copy of one whose interpreter runs as it)."""
        with self._lock:
            if uid not in self._taken:
                raise ValueError(f"uid {uid} belongs to no live session")
            self._taken[uid] += 1
            return uid

    def give_back(self, uid: int) -> None:
        with self._lock:
            left = self._taken.get(uid, 0) - 1
            if left > 0:
                self._taken[uid] = left
            else:
                self._taken.pop(uid, None)
