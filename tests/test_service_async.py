"""``AsyncToolAPI`` over ``AsyncWebSocketTransport``, on the test's own event loop, against a
real ``a2e serve --http``."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Iterator

import pytest

from a2e.caps.tools._async_client import AsyncToolAPI
from a2e.caps.tools._models import ToolEvent
from a2e.transports._websocket import TransportRefused
from tests.service_process import ServiceProcess

TOKEN = "async-tests-token"


@pytest.fixture(scope="module")
def service() -> Iterator[ServiceProcess]:
    server = ServiceProcess("--token", TOKEN, "--max-workers", "4")
    yield server
    assert server.stop() == 0


def test_calls_on_the_hosts_own_loop(service: ServiceProcess) -> None:
    async def main() -> None:
        async with await AsyncToolAPI.connect(service.ws_url, token=TOKEN) as tools:
            assert "run_code" in {tool.name for tool in await tools.list()}
            result = await tools.call("python_eval", {"code": "print(6 * 7)"})
            assert result.success and result.data["stdout"] == "42\n"
            # Many at once on one connection, each answered as it finishes.
            codes = [f"import time\ntime.sleep(0.3)\nprint({i})" for i in range(8)]
            started = time.monotonic()
            results = await asyncio.gather(*(tools.call("python_eval", {"code": c}) for c in codes))
            assert [r.data["stdout"] for r in results] == [f"{i}\n" for i in range(8)]
            assert time.monotonic() - started < 8 * 0.3  # not one after the other
            seen: list[str] = []

            async def on_event(event: ToolEvent) -> None:
                seen.append(event.kind)

            streamed = await tools.call(
                "python_eval", {"code": "print(1)\nprint(2)"}, streaming=True, on_event=on_event
            )
            assert streamed.success and seen
            pending = await tools.start(
                "python_eval", {"code": "import time\ntime.sleep(60)"}, timeout=60
            )
            with pytest.raises(TimeoutError):
                await pending.result(timeout=0.2)
            await pending.cancel()
            cancelled = await pending.result()
            assert not cancelled.success and "cancelled" in (cancelled.error or "")

    asyncio.run(main())


def test_a_wrong_token_is_refused(service: ServiceProcess) -> None:
    async def main() -> None:
        with pytest.raises(TransportRefused, match="401"):
            await AsyncToolAPI.connect(service.ws_url, token="wrong")

    asyncio.run(main())


def test_a_server_that_dies_fails_the_calls_in_flight() -> None:
    server = ServiceProcess()

    async def main() -> None:
        tools = await AsyncToolAPI.connect(server.ws_url)
        pending = await tools.start("python_eval", {"code": "import time\ntime.sleep(60)"})
        await asyncio.sleep(0.5)
        server.process.send_signal(signal.SIGKILL)
        result = await asyncio.wait_for(pending.result(), 20)
        assert not result.success and "closed" in (result.error or "")
        await tools.close()

    try:
        asyncio.run(main())
    finally:
        server.stop()


def test_a_cancel_that_arrives_after_its_call_ended_is_expected_here_too(
    service: ServiceProcess, caplog: pytest.LogCaptureFixture
) -> None:
    """The async client routes by the threaded one's table (``a2e._requests``): the host's
    ``unknown_request`` for a cancel that came too late is no stray error."""

    async def main() -> None:
        async with await AsyncToolAPI.connect(service.ws_url, token=TOKEN) as tools:
            done = await tools.start("python_eval", {"code": "1"})
            assert (await done.result()).success
            with caplog.at_level(logging.DEBUG, logger="a2e.client"):
                await done.cancel()
                assert (await tools.call("python_eval", {"code": "2"})).success
                await asyncio.sleep(0.2)

    asyncio.run(main())
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert any("unknown_request answered" in r.getMessage() for r in caplog.records)
