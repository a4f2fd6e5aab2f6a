"""Session uids: each live session gets a uid of its own from the engine's range.

Handed out round-robin, so a uid freed by an ended session is the last to be reused; two live
sessions never share one. A forked sandbox's copies each get their own, and hold their
family's too (``share``): their copied interpreter keeps it (a process cannot change its uid),
so it is not handed out while one lives. Running out is an error the client sees, never a
silent sharing of uids between sessions; nor between engines on one machine
(``engine._uid_blocks``).
"""

from __future__ import annotations

import threading

from a2e_engine.engine._uid_blocks import BLOCK_UIDS, UidBlocks

__all__ = ["SessionUids", "UidsExhausted"]


class UidsExhausted(RuntimeError):
    """Every uid of the range belongs to a live session."""


class SessionUids:
    def __init__(self, first: int, count: int, blocks: UidBlocks | None = None) -> None:
        """``blocks``: the machine-wide claims that keep these uids apart from other
        engines' (``engine._uid_blocks``); a uid whose block another engine holds is
        skipped."""
        if first <= 0 or count < 1:
            raise ValueError("the uid range must start above 0 and hold at least one uid")
        self.first = first
        self.count = count
        self.blocks = blocks
        self._next = 0
        self._taken: dict[int, int] = {}  # by uid, the live sessions that have it
        self._lock = threading.Lock()

    def take(self) -> int:
        with self._lock:
            tried = 0
            while tried < self.count:
                uid = self.first + self._next
                step = 1
                if uid not in self._taken:
                    if self.blocks is None or self.blocks.hold(uid):
                        self._taken[uid] = 1
                        self._next = (self._next + 1) % self.count
                        return uid
                    step = BLOCK_UIDS - uid % BLOCK_UIDS  # another engine's block: past it
                self._next = (self._next + step) % self.count
                tried += step
        raise UidsExhausted(
            f"all {self.count} session uids are in use (by this engine's sessions, or held by "
            "other engines on this machine); end sessions or widen uid_range"
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
            elif self._taken.pop(uid, None) is not None and self.blocks is not None:
                self.blocks.let_go(uid)
