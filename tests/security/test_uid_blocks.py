"""Two engines on one machine (two services, an embedded engine beside a service, the node
engines several drivers start on one host) configured with the same uid range: no uid is ever
a session's in both, checked with the uids calls really run as (``engine._uid_blocks``). A
session uid shared between them would be one ``RLIMIT_NPROC`` count (one tenant's fork bomb
stopping the other's forks), one keyring, and each other's files where mode bits are the
guard. An engine's blocks go back when its sessions end, and when its process dies, however.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from a2e.caps.tools._models import ToolCallRequest, ToolResult
from a2e_engine.engine import Engine, EngineConfig, Isolation
from a2e_engine.engine._host_session import LocalSession
from a2e_engine.engine._identities import SessionUids, UidsExhausted
from a2e_engine.engine._uid_blocks import BLOCK_UIDS, UidBlocks, machine_blocks

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="session uids need root")

#: A range no other test's engines use, so that this one's blocks are all free to begin with.
RANGE = (1_700_000_000, 4 * BLOCK_UIDS)


@pytest.fixture(scope="module")
def engines() -> Iterator[tuple[Engine, Engine]]:
    config = EngineConfig(
        prefork=1,
        max_workers=2,
        max_timeout=30,
        workspace_mb=4,  # a hundred sessions and more, reserving their quotas or not
        isolation=Isolation(uid_range=RANGE),
    )
    with Engine(config=config) as first, Engine(config=config) as second:
        if not (first.layers.active("identity") and second.layers.active("identity")):
            pytest.skip("the identity layer is off here")
        yield first, second


def _open(engine: Engine, count: int) -> list[LocalSession]:
    async def open_all() -> list[LocalSession]:
        return [await engine.open_session("uid-blocks") for _ in range(count)]

    return engine.run(open_all(), timeout=60)


def _close(engine: Engine, sessions: list[LocalSession]) -> None:
    running = engine._running
    assert running is not None

    async def close_all() -> None:
        for session in sessions:
            session.close()
        await running.services.sessions.wait_ended(timeout=60)  # their uids given back

    engine.run(close_all(), timeout=60)


def _uid_of(session: LocalSession) -> int:
    uid = session.session.uid
    assert uid is not None
    return uid


def _runs_as(engine: Engine, session: LocalSession) -> int:
    """The uid a call of ``session`` really runs as."""

    async def call() -> int:
        code = "import os\nos.getuid()"
        request = ToolCallRequest(tool_name="python_eval", arguments={"code": code})
        async for burst in session.call(request):
            result = burst[-1]
        assert isinstance(result, ToolResult) and result.success, result
        return int(result.data["value"])

    return engine.run(call(), timeout=60)


def test_two_engines_with_one_range_never_give_a_uid_to_both(
    engines: tuple[Engine, Engine],
) -> None:
    first, second = engines
    mine = _open(first, BLOCK_UIDS + 1)  # a block, and one of the next
    theirs = _open(second, BLOCK_UIDS + 1)
    try:
        my_uids, their_uids = {_uid_of(s) for s in mine}, {_uid_of(s) for s in theirs}
        assert len(my_uids) == len(mine) and len(their_uids) == len(theirs)
        assert not my_uids & their_uids
        assert {uid // BLOCK_UIDS for uid in my_uids}.isdisjoint(
            uid // BLOCK_UIDS for uid in their_uids
        )
        assert _runs_as(first, mine[0]) == _uid_of(mine[0])
        assert _runs_as(second, theirs[0]) == _uid_of(theirs[0])
    finally:
        _close(first, mine)
        _close(second, theirs)
    # Every session of the first ended: its blocks are the second's to take now.
    taken = _open(second, 2 * BLOCK_UIDS)
    try:
        blocks = {_uid_of(s) // BLOCK_UIDS for s in taken}
        assert blocks & {uid // BLOCK_UIDS for uid in my_uids}
    finally:
        _close(second, taken)


def test_a_block_is_held_until_its_last_uid_goes_back(tmp_path: Path) -> None:
    mine, theirs = UidBlocks(str(tmp_path)), UidBlocks(str(tmp_path))  # two engines, one process
    assert mine.hold(5) and mine.hold(6)
    assert not theirs.hold(7)  # the same block
    assert theirs.hold(BLOCK_UIDS + 7)  # the next one
    mine.let_go(5)
    assert not theirs.hold(8)
    mine.let_go(6)
    assert theirs.hold(8)
    theirs.close()
    assert mine.hold(9)
    mine.close()


def test_the_blocks_of_an_engine_killed_are_free_again(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from a2e_engine.engine._uid_blocks import UidBlocks\n"
            f"assert UidBlocks({str(tmp_path)!r}).hold(3)\n"
            "print('held', flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        blocks = UidBlocks(str(tmp_path))
        assert not blocks.hold(4)
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        assert blocks.hold(4)
        blocks.close()
    finally:
        holder.kill()
        holder.wait(timeout=10)


def test_the_claims_directory_is_roots_alone(tmp_path: Path) -> None:
    """One others may write would let a session uid take or hold a block's file: its mode is
    made 0700, and a link or another user's directory is refused (and said in the log)."""
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o777)
    os.chmod(loose, 0o777)
    assert machine_blocks(str(loose)) is not None
    assert loose.stat().st_mode & 0o777 == 0o700
    link = tmp_path / "link"
    link.symlink_to(loose)
    assert machine_blocks(str(link)) is None
    others = tmp_path / "others"
    others.mkdir()
    os.chown(others, 1_700_000_000, 1_700_000_000)
    assert machine_blocks(str(others)) is None


def test_an_engine_fills_its_blocks_and_skips_anothers(tmp_path: Path) -> None:
    """A range across a block boundary, the second block another engine's: the first block's
    four uids are handed out, then none (not the other's), until the other lets go; a block
    an engine claimed goes back with its last uid, the one it took at its start stays."""
    mine, theirs = UidBlocks(str(tmp_path)), UidBlocks(str(tmp_path))
    start = 1000 * BLOCK_UIDS + BLOCK_UIDS - 4
    assert theirs.hold(start + 9)
    uids = SessionUids(start, 10, mine)
    assert [uids.take() for _ in range(4)] == [start, start + 1, start + 2, start + 3]
    with pytest.raises(UidsExhausted):
        uids.take()
    theirs.let_go(start + 9)
    assert uids.take() == start + 4
    assert not theirs.hold(start + 9)  # its now: one of its uids is handed out
    uids.give_back(start + 4)
    assert theirs.hold(start + 9)  # its last uid back: let go (the first, its own, is kept)
    assert not UidBlocks(str(tmp_path)).hold(start)
    mine.close()
