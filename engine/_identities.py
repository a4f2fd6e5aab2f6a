"""Session uids: each live session gets a uid of its own from the engine's range.

Handed out round-robin, so a uid freed by an ended session is the last to be reused (among the
blocks the engine holds, where other engines may share the machine: it fills those before it
claims another, and so holds few); two live sessions never share one. A forked sandbox's copies
each get their own, and hold their family's too (``share``): their copied interpreter keeps it
(a process cannot change its uid), so it is not handed out while one lives. Running out is an
error the client sees, never a silent sharing of uids between sessions; nor between engines on
one machine (``engine._uid_blocks``).
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
        if blocks is not None:
            # A block held for the engine's life: its first sessions claim nothing, and an
            # idle engine holds what a busy one does.
            self._next_free(held_only=False)

    def take(self) -> int:
        with self._lock:
            uid = self._next_free(held_only=self.blocks is not None)
            if uid is None and self.blocks is not None:
                uid = self._next_free(held_only=False)  # a block of its own more
            if uid is None:
                raise UidsExhausted(
                    f"all {self.count} session uids are in use (by this engine's sessions, or "
                    "held by other engines on this machine); end sessions or widen uid_range"
                )
            self._taken[uid] = 1
            self._next = (uid - self.first + 1) % self.count
            return uid

    def _next_free(self, held_only: bool) -> int | None:
        """The first uid from where the last one was handed out that no session has and
        whose block this engine holds (``held_only``: the blocks it holds are filled before
        another is claimed, so that it holds few) or can claim; None if there is none."""
        blocks = self.blocks
        offset, tried = self._next, 0
        while tried < self.count:
            uid = self.first + offset
            step = 1
            if uid not in self._taken:
                if blocks is None:
                    return uid
                if (not held_only or blocks.holds(uid)) and blocks.hold(uid):
                    return uid
                step = min(BLOCK_UIDS - uid % BLOCK_UIDS, self.count - offset)  # past it
            offset = (offset + step) % self.count
            tried += step
        return None

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
