"""envd's directory watchers (``files.watch_dir``): ``CreateWatcher``, ``GetWatcherEvents`` and
``RemoveWatcher`` (the sync SDK's), and the ``WatchDir`` stream (the async SDK's).

A watcher compares listings of the directory (``list_dir`` in a worker of the sandbox, every
level down when ``recursive``): what appeared is ``CREATE``, what went ``REMOVE``, what changed
size or time ``WRITE``, and what changed mode alone ``CHMOD``; each event names its path
relative to the watched directory, with its ``EntryInfo`` when ``includeEntry`` asks. It sees
what changed between two looks, not each change: a rename reads as a removal and a creation,
and a file made and removed between two looks is not seen. The stream looks every
``POLL_S``. A sandbox holds ``MAX_WATCHERS`` at once.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from a2e_engine.engine.e2b._connect_rpc import (
    STREAM_MEDIA_TYPE,
    RpcError,
    end_of_stream,
    frame,
    read_request,
    unary_response,
)
from a2e_engine.engine.e2b._in_sandbox import Paths
from a2e_engine.engine.e2b._sandboxes import Sandbox

__all__ = ["MAX_WATCHERS", "Watchers"]

#: Watchers one sandbox may hold at once (streams counted).
MAX_WATCHERS = 16
#: How often a stream looks at its directory.
POLL_S = 0.5
#: How deep a recursive watch lists (the file tools' bound).
RECURSIVE_DEPTH = 32
#: How long a stream may be silent before it sends a keepalive.
KEEPALIVE_S = 30.0

Handler = Callable[[Request, Sandbox], Awaitable[Response]]
#: What the sandbox's file tools say of a path, as the filesystem service reads it.
Facts = dict[str, Any]
Lister = Callable[[Sandbox, dict[str, Any]], Awaitable[dict[str, Any]]]
EntryOf = Callable[[Facts, Paths], dict[str, Any]]


def _judged(facts: Facts) -> tuple[Any, Any, Any]:
    """What a path's change is judged by: its size, its time, its mode."""
    return facts.get("size"), facts.get("modified"), facts.get("mode")


class _Watcher:
    def __init__(self, path: str, recursive: bool, include_entry: bool) -> None:
        self.path = path
        self.recursive = recursive
        self.include_entry = include_entry
        #: Each path's size, time and mode at the last look (what a change is judged by).
        self.seen: dict[str, tuple[Any, Any, Any]] = {}


class Watchers:
    """Every sandbox's watchers; ``lister`` is the filesystem service's ``list_dir`` call and
    ``entry_of`` its ``EntryInfo``."""

    def __init__(self, lister: Lister, entry_of: EntryOf) -> None:
        self._list = lister
        self._entry_of = entry_of
        self._by_sandbox: dict[str, dict[str, _Watcher]] = {}

    def methods(self) -> dict[str, Handler]:
        return {
            "CreateWatcher": self.create,
            "GetWatcherEvents": self.events,
            "RemoveWatcher": self.remove,
            "WatchDir": self.stream,
        }

    def forget(self, sandbox: Sandbox) -> None:
        self._by_sandbox.pop(sandbox.id, None)

    async def create(self, request: Request, sandbox: Sandbox) -> Response:
        watcher_id = uuid.uuid4().hex
        await self._started(sandbox, await read_request(request), watcher_id)
        return unary_response({"watcherId": watcher_id})

    async def events(self, request: Request, sandbox: Sandbox) -> Response:
        watcher = self._watcher(sandbox, await read_request(request))
        return unary_response({"events": await self._changes(sandbox, watcher)})

    async def remove(self, request: Request, sandbox: Sandbox) -> Response:
        message = await read_request(request)
        self._watcher(sandbox, message)
        del self._by_sandbox[sandbox.id][str(message.get("watcherId"))]
        return unary_response({})

    async def stream(self, request: Request, sandbox: Sandbox) -> Response:
        key = f"stream-{uuid.uuid4().hex}"
        watcher = await self._started(sandbox, await read_request(request), key)
        watchers = self._by_sandbox.setdefault(sandbox.id, {})

        async def messages() -> AsyncIterator[bytes]:
            try:
                yield frame({"start": {}})
                quiet = 0.0
                while watchers.get(key) is watcher:  # the sandbox has not ended
                    await asyncio.sleep(POLL_S)
                    try:
                        changes = await self._changes(sandbox, watcher)
                    except RpcError as exc:  # the directory went, or the sandbox did
                        yield end_of_stream(exc)
                        return
                    for change in changes:
                        yield frame({"filesystem": change})
                    quiet = 0.0 if changes else quiet + POLL_S
                    if quiet >= KEEPALIVE_S:
                        quiet = 0.0
                        yield frame({"keepalive": {}})
                yield end_of_stream(RpcError("unavailable", "the sandbox ended"))
            finally:
                watchers.pop(key, None)

        return StreamingResponse(messages(), media_type=STREAM_MEDIA_TYPE)

    async def _started(self, sandbox: Sandbox, message: dict[str, Any], key: str) -> _Watcher:
        """A new watcher, in its place under ``key`` from before its first look (so that
        requests at once cannot all pass the bound), gone again if that look fails."""
        path = message.get("path")
        if not isinstance(path, str) or not path or "\0" in path:
            raise RpcError("invalid_argument", "path must be a directory")
        watchers = self._by_sandbox.setdefault(sandbox.id, {})
        if len(watchers) >= MAX_WATCHERS:
            raise RpcError("resource_exhausted", f"this sandbox watches {MAX_WATCHERS} already")
        watcher = _Watcher(
            Paths(sandbox.workspace).inside(path),
            message.get("recursive") is True,
            message.get("includeEntry") is True,
        )
        watchers[key] = watcher
        try:
            watcher.seen = {
                name: _judged(f) for name, f in (await self._listing(sandbox, watcher)).items()
            }
        except BaseException:
            watchers.pop(key, None)
            raise
        return watcher

    def _watcher(self, sandbox: Sandbox, message: dict[str, Any]) -> _Watcher:
        found = self._by_sandbox.get(sandbox.id, {}).get(str(message.get("watcherId")))
        if found is None:
            raise RpcError("not_found", "no such watcher in this sandbox")
        return found

    async def _listing(self, sandbox: Sandbox, watcher: _Watcher) -> dict[str, Facts]:
        depth = RECURSIVE_DEPTH if watcher.recursive else 1
        listed = await self._list(sandbox, {"path": watcher.path, "depth": depth, "full": True})
        return {str(facts["name"]): facts for facts in listed.get("entries", [])}

    async def _changes(self, sandbox: Sandbox, watcher: _Watcher) -> list[dict[str, Any]]:
        """What changed since the watcher's last look, as envd's ``FilesystemEvent``s."""
        now = await self._listing(sandbox, watcher)
        before = watcher.seen
        watcher.seen = {name: _judged(facts) for name, facts in now.items()}
        changes: list[tuple[str, str, Facts | None]] = []
        for name in sorted(before.keys() - now.keys()):
            changes.append((name, "EVENT_TYPE_REMOVE", None))
        for name in sorted(now.keys() - before.keys()):
            changes.append((name, "EVENT_TYPE_CREATE", now[name]))
        for name in sorted(now.keys() & before.keys()):
            old, new = before[name], watcher.seen[name]
            if old[:2] != new[:2]:
                changes.append((name, "EVENT_TYPE_WRITE", now[name]))
            elif old[2] != new[2]:
                changes.append((name, "EVENT_TYPE_CHMOD", now[name]))
        paths = Paths(sandbox.workspace)
        events = []
        for name, kind, facts in changes:
            event: dict[str, Any] = {"name": name, "type": kind}
            if watcher.include_entry and facts is not None:
                event["entry"] = self._entry_of(facts, paths)
            events.append(event)
        return events
