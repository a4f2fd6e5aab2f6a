"""Sessions of the host (``engine._host.HostSession``), as REST, ``/run_code`` and MCP hold
them: the engine's own (``LocalSession``: opened for a client, or taken ready from the pool for
one stateless request) and one made of a wire connection (``RemoteSession``, the cluster's).
Several calls in flight in one session each get their own events and result; a cancel reaches
its worker; closing ends what still runs; a session prepared ahead is handed out once and
nothing of one request reaches the next."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from a2e.caps.tools._models import ToolCallRequest, ToolEvent, ToolListRequest, ToolResult
from a2e_engine.engine import Admission, Engine, EngineConfig
from a2e_engine.engine._host import HostSession, Refused
from a2e_engine.engine.transports._conversation import open_wire_session
from tests.waiting import wait_for

Opener = Callable[[Engine], Awaitable[HostSession]]

OPENERS: dict[str, Opener] = {
    "engine session": lambda engine: engine.open_session("test"),
    "stateless engine session": lambda engine: engine.open_session("test", stateless=True),
    "over a wire connection": lambda engine: open_wire_session(engine, "test", None),
}


def _printing(word: str, times: int, pause: float = 0.02) -> ToolCallRequest:
    code = f"import time\nfor i in range({times}):\n    print('{word}', i, flush=True)\n"
    code += f"    time.sleep({pause})"
    return ToolCallRequest(tool_name="python_eval", arguments={"code": code}, streaming=True)


async def _run(session: HostSession, request: ToolCallRequest) -> tuple[str, ToolResult]:
    """The text its events streamed, and its result."""
    streamed, result = [], None
    async for batch in session.call(request):
        for message in batch:
            if isinstance(message, ToolEvent) and message.kind == "artifact":
                streamed.append(message.data["chunk"])
            elif isinstance(message, ToolResult):
                assert message is batch[-1], "the result ends the last burst"
                result = message
    assert result is not None, "no result"
    return "".join(streamed), result


@pytest.mark.parametrize("opener", OPENERS.values(), ids=OPENERS.keys())
def test_calls_in_flight_at_once_each_get_their_own_events(engine: Engine, opener: Opener) -> None:
    async def scenario() -> list[tuple[str, ToolResult]]:
        session = await opener(engine)
        try:
            listed = await session.list_tools(ToolListRequest())
            assert "python_eval" in {tool.name for tool in listed.tools}
            requests = [_printing(word, 20) for word in ("alpha", "beta", "gamma")]
            return await asyncio.gather(*(_run(session, r) for r in requests))
        finally:
            session.close()

    results = engine.run(scenario(), timeout=60)
    for (streamed, result), word in zip(results, ("alpha", "beta", "gamma"), strict=True):
        assert result.success, result
        assert streamed == result.data["stdout"] == "".join(f"{word} {i}\n" for i in range(20))


@pytest.mark.parametrize("opener", OPENERS.values(), ids=OPENERS.keys())
def test_a_cancel_ends_one_call_and_not_the_other(engine: Engine, opener: Opener) -> None:
    async def scenario() -> tuple[ToolResult, tuple[str, ToolResult]]:
        session = await opener(engine)
        try:
            slow = _printing("slow", 600, pause=0.1)

            async def cancelled() -> ToolResult:
                async for batch in session.call(slow):
                    for message in batch:
                        if isinstance(message, ToolEvent):
                            session.cancel(slow.id)
                        elif isinstance(message, ToolResult):
                            return message
                raise AssertionError("no result")

            return await asyncio.gather(cancelled(), _run(session, _printing("fast", 3)))
        finally:
            session.close()

    answer, (streamed, _) = engine.run(scenario(), timeout=60)
    assert not answer.success and answer.reason == "cancelled", answer
    assert streamed == "fast 0\nfast 1\nfast 2\n"


@pytest.mark.parametrize("opener", OPENERS.values(), ids=OPENERS.keys())
def test_leaving_a_call_before_its_result_cancels_it(engine: Engine, opener: Opener) -> None:
    """A front-end whose client went away stops reading: the call's worker is killed, and the
    session's calls all end."""

    async def scenario() -> None:
        session = await opener(engine)
        try:
            calls = session.call(_printing("left", 600, pause=0.1))
            await calls.__anext__()  # it runs and says so
            await calls.aclose()
            for _ in range(200):
                if engine.status().calls_pending == 0:
                    return
                await asyncio.sleep(0.05)
            raise AssertionError("the call left behind kept running")
        finally:
            session.close()

    engine.run(scenario(), timeout=60)


def test_a_stopped_host_refuses_a_session() -> None:
    stopped = Engine()
    for stateless in (False, True):
        with pytest.raises(Refused) as refused:
            asyncio.run(stopped.open_session("test", stateless=stateless))
        assert refused.value.error.code == "overloaded"


# -- sessions prepared ahead --


def _sessions(engine: Engine) -> set[str]:
    """The session directories in the engine's state directory now."""
    return {entry.name for entry in os.scandir(engine.state_dir) if len(entry.name) == 32}


def test_stateless_sessions_are_prepared_ahead_and_held_by_one_request_at_a_time() -> None:
    with Engine(config=EngineConfig(prefork=1, max_workers=2)) as engine:

        async def one(pause: float) -> str:
            session = await engine.open_session("test", stateless=True)
            try:
                request = _printing("x", 1, pause)
                _, result = await _run(session, request)
                assert result.success, result
            finally:
                session.close()
            return os.path.basename(session.session.guard)

        first = engine.run(one(0), timeout=60)
        # The pool fills behind the first: as many ready as calls may run at once.
        assert wait_for(lambda: len(_sessions(engine)) == 2, 10), _sessions(engine)
        ready = _sessions(engine)
        later = [engine.run(one(0), timeout=60) for _ in range(4)]
        assert set(later) <= ready and first in ready, "taken from those prepared ahead"

        async def at_once() -> list[str]:
            return list(await asyncio.gather(one(0.3), one(0.3), one(0.3)))

        together = engine.run(at_once(), timeout=60)
        assert len(set(together)) == 3, "never one session for two requests at once"


LEAVE_BEHIND = """
ln -s CANARY "${TMPDIR:-/tmp}/../../tmp/escape" 2>/dev/null
(cd .. && mv workspace moved && ln -s CANARY workspace) 2>/dev/null || true
cd ../moved 2>/dev/null || true
echo 'secret of the first request' > left.txt
mkdir -p deep/er && echo x > deep/er/file && chmod 0 deep
ln -s /etc/passwd link
echo 'tmp secret' > "${TMPDIR:-/tmp}/tmp-left"
setsid sleep 300 < /dev/null > /dev/null 2>&1 &
for i in 1 2 3; do dd if=/dev/zero of=fill$i bs=1M count=200 status=none || exit 1; done
id -u
"""

LOOK_AROUND = """
import os
print(sorted(os.listdir('.')))
print(sorted(os.listdir(os.environ.get('TMPDIR', '/tmp'))))
for i in range(4):  # 800 MiB of the 1024: the whole quota is its own again
    with open(f'big{i}', 'wb') as fh:
        for _ in range(200):
            fh.write(bytes(1 << 20))
print('room')
"""


def test_nothing_of_one_stateless_request_reaches_the_next(tmp_path: Path) -> None:
    """The attack: a request leaves files (one unreadable, a symlink out), tmp files, a process,
    and most of the quota used; once it is done no process of its uid is left, and every
    following request, whichever session it gets (its uid may be the first's again, given back
    once nothing of it was left), finds an empty workspace and tmp, and the whole quota."""
    config = EngineConfig(prefork=1, max_workers=1, workspace_mb=1024)
    canary = tmp_path / "canary"
    canary.mkdir()
    (canary / "keep").write_text("the host's")
    with Engine(config=config) as engine:

        async def one(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
            session = await engine.open_session("attacker", stateless=True)
            try:
                request = ToolCallRequest(tool_name=tool, arguments=arguments, timeout=60)
                _, result = await _run(session, request)
            finally:
                session.close()
            assert result.success, result
            return dict(result.data)

        attack = LEAVE_BEHIND.replace("CANARY", str(canary))
        left = engine.run(one("run_shell", {"command": attack}), timeout=120)
        assert left["exit_code"] == 0, left
        uid = int(left["stdout"].strip())

        def of_that_uid() -> list[psutil.Process]:
            return [
                p for p in psutil.process_iter(["uids"]) if (p.info["uids"] or (None,))[0] == uid
            ]

        assert wait_for(lambda: not of_that_uid(), 20), of_that_uid()
        for _ in range(4):
            seen = engine.run(one("python_eval", {"code": LOOK_AROUND}), timeout=120)
            listed, tmp, room = seen["stdout"].splitlines()
            assert listed == "[]" and "tmp-left" not in tmp, seen["stdout"]
            assert room == "room", seen
        assert (canary / "keep").read_text() == "the host's", "the wipe followed a link out"


def test_a_lone_session_bounds_its_calls_and_refuses_a_reused_id() -> None:
    """Without a connection around it (REST, MCP), a session is where request ids must differ
    and where ``admission.max_calls_per_connection`` bounds the calls in flight."""
    config = EngineConfig(max_workers=2, prefork=1, admission=Admission(max_calls_per_connection=2))

    def sleeping(call_id: str) -> ToolCallRequest:
        code = "import time\ntime.sleep(1)"
        return ToolCallRequest(id=call_id, tool_name="python_eval", arguments={"code": code})

    async def scenario(engine: Engine) -> tuple[str, str, ToolResult]:
        session = await engine.open_session("test")
        try:
            first = asyncio.ensure_future(_run(session, sleeping("a")))
            second = asyncio.ensure_future(_run(session, sleeping("b")))
            await asyncio.sleep(0)
            refusals = []
            for call_id in ("a", "c"):
                with pytest.raises(Refused) as refused:
                    await _run(session, sleeping(call_id))
                refusals.append(refused.value.error.message)
            await asyncio.gather(first, second)
            _, later = await _run(session, sleeping("a"))  # its id free again once it ended
            return refusals[0], refusals[1], later
        finally:
            session.close()

    with Engine(config=config) as engine:
        duplicate, overloaded, later = engine.run(scenario(engine), timeout=60)
    assert "'a' is already in flight in this session" in duplicate
    assert "this session already has 2 calls in flight" in overloaded
    assert later.success, later
