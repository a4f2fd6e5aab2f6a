"""Sandboxes that last: each one an engine session (``Host.open_session``) kept open for a
trajectory, with E2B's identity (an id, an access token for its own side) and lifetime.

A sandbox belongs to the client that made it (its API key, or its address where the service
has a single token): another client can neither see it nor end it, and is told it does not
exist. It ends at its timeout (``set_timeout`` moves that), when killed, when the engine ends
its session (memory running short), or when the service stops; whatever its session held goes
with it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime
import secrets
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from a2e_engine.engine._host import Host, HostSession
from a2e_engine.engine.e2b._in_sandbox import HOME

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MAX_TIMEOUT_S",
    "Ended",
    "Sandbox",
    "Sandboxes",
    "Snapshot",
    "TooMany",
]

#: A sandbox's life when its creator gives none (E2B's default).
DEFAULT_TIMEOUT_S = 300
#: The longest a sandbox lives, from its start (E2B's longest, on its paid plan).
MAX_TIMEOUT_S = 24 * 3600
#: How many sandboxes the engine ended are remembered, to tell their owners why.
MAX_ENDED_KEPT = 4096


class TooMany(Exception):
    """The client holds as many sandboxes as it may (those being made counted)."""


@dataclass
class Sandbox:
    """One sandbox: its session, who made it, and when it ends."""

    id: str
    template: str
    owner: str
    session: HostSession
    access_token: str
    metadata: dict[str, str]
    env_vars: dict[str, str]
    started_at: datetime.datetime
    ends_at: datetime.datetime
    #: The life it was last given (at its creation or ``set_timeout``): each use renews it.
    timeout_s: int = DEFAULT_TIMEOUT_S
    #: Its processes frozen (``Sandboxes.pause``) until it is connected to again.
    paused: bool = False
    _timer: asyncio.TimerHandle | None = field(default=None, repr=False)

    @property
    def workspace(self) -> str:
        """Where its files are: its session's workspace."""
        return str(getattr(self.session, "workspace", "") or "/")


@dataclass(frozen=True)
class Ended:
    """What is kept of a sandbox the engine ended: enough to tell its owner why, and no one
    else."""

    owner: str
    access_token: str
    why: str


@dataclass
class Snapshot:
    """A sandbox as it was when snapshotted: a copy of its session (its files, and a stopped
    copy of its interpreter: ``Host.fork_session``) that runs nothing, and that new sandboxes
    are copied from. It lasts until deleted, or the service stops."""

    id: str
    owner: str
    names: list[str]
    sandbox_id: str  # whose it was
    template: str
    session: HostSession
    metadata: dict[str, str]
    env_vars: dict[str, str]


class Sandboxes:
    """The live sandboxes of one service; every method runs on the host's loop."""

    def __init__(self, host: Host, per_owner: int) -> None:
        """``per_owner``: the sandboxes one owner may hold live at once."""
        self._host = host
        self._live: dict[str, Sandbox] = {}
        self.per_owner = per_owner
        self._opening: collections.Counter[str] = collections.Counter()
        #: Called with each sandbox as it ends (its sandbox side lets go of what it held).
        self.on_end: list[Callable[[Sandbox], None]] = []
        self._thawing: set[asyncio.Task[None]] = set()
        self._snapshots: dict[str, Snapshot] = {}
        #: Sandboxes whose session the engine ended, newest last (``why_ended``).
        self._ended: collections.OrderedDict[str, Ended] = collections.OrderedDict()

    async def create(
        self,
        owner: str,
        template: str,
        timeout_s: int,
        metadata: Mapping[str, str],
        env_vars: Mapping[str, str],
    ) -> Sandbox:
        """A new sandbox of ``owner``'s, alive for ``timeout_s``; ``TooMany`` past its share
        (counting those it is making now), ``Refused`` when the engine cannot open a session
        now (its uids or its memory bound)."""
        with self._making(owner, 1):
            session = await self._host.open_session("e2b", tenant=owner, lasting=True, home=HOME)
        return self._add(owner, template, session, metadata, env_vars, timeout_s)

    def _add(
        self,
        owner: str,
        template: str,
        session: HostSession,
        metadata: Mapping[str, str],
        env_vars: Mapping[str, str],
        timeout_s: int,
    ) -> Sandbox:
        """A live sandbox of ``owner``'s on ``session``, with an id and access token of its own."""
        now = _now()
        sandbox = Sandbox(
            id=_new_id(session),
            template=template,
            owner=owner,
            session=session,
            access_token=secrets.token_urlsafe(24),
            metadata=dict(metadata),
            env_vars=dict(env_vars),
            started_at=now,
            ends_at=now,
        )
        self._live[sandbox.id] = sandbox
        self.set_timeout(sandbox, timeout_s)
        return sandbox

    async def snapshot(self, sandbox: Sandbox, name: str | None) -> Snapshot:
        """A snapshot of ``sandbox`` as it is now (``Snapshot``), which goes on. ``TooMany``
        past its owner's share of snapshots (as many as of sandboxes), ``Refused`` when the
        engine cannot copy it."""
        owner = sandbox.owner
        if sum(1 for s in self._snapshots.values() if s.owner == owner) >= self.per_owner:
            raise TooMany(f"this client holds {self.per_owner} snapshots already")
        (session,) = await self._copies(sandbox, 1)
        made = Snapshot(
            id=f"snapshot-{_new_id(session)}",
            owner=owner,
            names=[name] if name else [],
            sandbox_id=sandbox.id,
            template=sandbox.template,
            session=session,
            metadata=dict(sandbox.metadata),
            env_vars=dict(sandbox.env_vars),
        )
        self._snapshots[made.id] = made
        return made

    def snapshots(self, owner: str) -> list[Snapshot]:
        """``owner``'s snapshots, oldest first."""
        return [s for s in self._snapshots.values() if secrets.compare_digest(s.owner, owner)]

    def find_snapshot(self, owner: str, id_or_name: str) -> Snapshot | None:
        """``owner``'s snapshot of that id, or the newest of that name."""
        found = self._snapshots.get(id_or_name)
        if found is not None and secrets.compare_digest(found.owner, owner):
            return found
        named = [s for s in self.snapshots(owner) if id_or_name in s.names]
        return named[-1] if named else None

    def delete_snapshot(self, snapshot: Snapshot) -> None:
        """``snapshot`` gone, and what its session held with it."""
        if self._snapshots.pop(snapshot.id, None) is not None:
            snapshot.session.close()

    async def create_from(self, snapshot: Snapshot, timeout_s: int) -> Sandbox:
        """A new sandbox of ``snapshot``'s owner's, as the sandbox was when snapshotted (its
        files and its interpreter's state), alive for ``timeout_s``. As ``create`` refuses."""
        owner = snapshot.owner
        with self._making(owner, 1):
            (session,) = await self._host.fork_session(snapshot.session, 1)
        return self._add(
            owner, snapshot.id, session, snapshot.metadata, snapshot.env_vars, timeout_s
        )

    @contextlib.contextmanager
    def _making(self, owner: str, count: int) -> Iterator[None]:
        """While ``count`` sandboxes of ``owner``'s are being made: counted against its share
        (``TooMany`` if they would pass it), whatever becomes of them."""
        held = len(self.owned_by(owner)) + self._opening[owner]
        if held + count > self.per_owner:
            if held >= self.per_owner:
                raise TooMany(f"this client holds {self.per_owner} live sandboxes already")
            raise TooMany(f"{count} more would pass the {self.per_owner} sandboxes of a client")
        self._opening[owner] += count
        try:
            yield
        finally:
            self._opening[owner] -= count
            if not self._opening[owner]:
                del self._opening[owner]

    async def _copies(self, sandbox: Sandbox, count: int) -> list[HostSession]:
        """``count`` copies of ``sandbox``'s session; a paused one is thawed for as long as it
        is copied (its interpreter is forked from a turn of its own)."""
        paused = sandbox.paused
        await self.resume(sandbox)
        try:
            return await self._host.fork_session(sandbox.session, count)
        finally:
            if paused and self._live.get(sandbox.id) is sandbox:
                await self.pause(sandbox)

    async def fork(self, parent: Sandbox, count: int, timeout_s: int) -> list[Sandbox]:
        """``count`` copies of ``parent`` (its files, and its interpreter's state where it has
        one: ``Host.fork_session``), each a sandbox of its owner's with an id and access token
        of its own, its template, metadata and environment, alive for ``timeout_s``; the
        parent goes on. ``TooMany`` past its owner's share, ``Refused`` when the engine
        cannot make them."""
        owner = parent.owner
        with self._making(owner, count):
            sessions = await self._copies(parent, count)
        copies = [
            self._add(owner, parent.template, session, parent.metadata, parent.env_vars, timeout_s)
            for session in sessions
        ]
        self.touch(parent)
        return copies

    async def pause(self, sandbox: Sandbox) -> bool:
        """``sandbox`` paused (``Host.pause_session``): its processes frozen, holding no CPU,
        their memory and files kept; its timeout runs on (past it, it is freed). False if it
        was paused already."""
        if sandbox.paused:
            return False
        sandbox.paused = True
        await self._host.pause_session(sandbox.session, True)
        return True

    async def resume(self, sandbox: Sandbox) -> None:
        """``sandbox`` going on where it was paused (nothing if it was not)."""
        if sandbox.paused:
            await self._host.pause_session(sandbox.session, False)
            sandbox.paused = False

    def get(self, owner: str, sandbox_id: str) -> Sandbox | None:
        """``owner``'s live sandbox of that id, or None (none, another's, or ended)."""
        sandbox = self.find(sandbox_id)
        if sandbox is None or not secrets.compare_digest(sandbox.owner, owner):
            return None
        return sandbox

    def find(self, sandbox_id: str) -> Sandbox | None:
        """The live sandbox of that id, whoever's (its own side checks its access token)."""
        sandbox = self._live.get(sandbox_id)
        if sandbox is not None and getattr(sandbox.session, "closed", False):
            why = str(getattr(sandbox.session, "ended_because", ""))
            if why:  # the engine ended its session: its owner is told why, later
                self._ended[sandbox.id] = Ended(sandbox.owner, sandbox.access_token, why)
                while len(self._ended) > MAX_ENDED_KEPT:
                    self._ended.popitem(last=False)
            self.end(sandbox)
            return None
        return sandbox

    def why_ended(self, sandbox_id: str) -> Ended | None:
        """A sandbox that the engine ended (its node lost, its memory needed): whose it was
        and why, for its owner's next request; None for any other."""
        return self._ended.get(sandbox_id)

    def live(self) -> Iterator[Sandbox]:
        """Every live sandbox, whoever's."""
        return iter(list(self._live.values()))

    def touch(self, sandbox: Sandbox) -> None:
        """``sandbox`` is being used: its life starts again from now."""
        self.set_timeout(sandbox, sandbox.timeout_s)

    def owned_by(self, owner: str) -> list[Sandbox]:
        """``owner``'s live sandboxes, oldest first."""
        found = [self.get(owner, sandbox_id) for sandbox_id in list(self._live)]
        return [sandbox for sandbox in found if sandbox is not None]

    def set_timeout(self, sandbox: Sandbox, timeout_s: int) -> None:
        """End ``sandbox`` ``timeout_s`` from now, rather than when it was to end, but never
        past ``MAX_TIMEOUT_S`` from its start (E2B's longest life); nothing for one ended."""
        if self._live.get(sandbox.id) is not sandbox:
            return
        if sandbox._timer is not None:
            sandbox._timer.cancel()
        sandbox.timeout_s = timeout_s
        now = _now()
        latest = sandbox.started_at + datetime.timedelta(seconds=MAX_TIMEOUT_S)
        sandbox.ends_at = min(now + datetime.timedelta(seconds=timeout_s), latest)
        seconds = (sandbox.ends_at - now).total_seconds()
        loop = asyncio.get_running_loop()
        sandbox._timer = loop.call_later(max(seconds, 0.0), self.end, sandbox)

    def end(self, sandbox: Sandbox) -> None:
        """End ``sandbox`` and everything its session holds (idempotent)."""
        was_live = self._live.get(sandbox.id) is sandbox
        if was_live:
            del self._live[sandbox.id]
        if sandbox._timer is not None:
            sandbox._timer.cancel()
            sandbox._timer = None
        if sandbox.paused:  # a frozen process dies only once thawed
            task = asyncio.get_running_loop().create_task(self._thaw_and_close(sandbox))
            self._thawing.add(task)
            task.add_done_callback(self._thawing.discard)
        else:
            sandbox.session.close()
        if was_live:
            for ended in self.on_end:
                ended(sandbox)

    async def _thaw_and_close(self, sandbox: Sandbox) -> None:
        try:
            await self.resume(sandbox)
        except Exception:  # the session is gone already: nothing of it is frozen
            pass
        finally:
            sandbox.session.close()

    def end_all(self) -> None:
        """The service stops: every sandbox ends, and every snapshot."""
        for sandbox in list(self._live.values()):
            self.end(sandbox)
        for snapshot in list(self._snapshots.values()):
            self.delete_snapshot(snapshot)

    def __len__(self) -> int:
        return len(self._live)


def _new_id(session: HostSession) -> str:
    """An id as E2B's look (20 lowercase letters and digits), unguessable. On a cluster it
    starts with the short id of the node its session lives on (``node_tag``), which every
    call for it goes to: what a router in front of many services would route by."""
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    tag = str(getattr(session, "node_tag", ""))
    return tag + "".join(secrets.choice(alphabet) for _ in range(max(12, 20 - len(tag))))


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
