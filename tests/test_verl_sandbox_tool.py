"""``a2e.adapters.verl_sandbox_tool``: verl's multi-turn tool on the engine's E2B sandboxes, as
verl's agent loop calls it (``create``, ``execute``, ``release``), against a real server: each
trajectory's cells share a sandbox no other trajectory sees; release ends it; one verl never
releases ends once idle, and its next call says its state is gone; failures are text."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from a2e.adapters.verl_sandbox_tool import SandboxTool
from tests.service_process import ServiceProcess
from tests.waiting import wait_for

TOKEN = "verl-tool-token-0123456789"
SCHEMA = SimpleNamespace(function=SimpleNamespace(name="code_interpreter"))


@pytest.fixture(scope="module")
def service() -> Iterator[ServiceProcess]:
    process = ServiceProcess("--token", TOKEN)
    yield process
    process.stop()


def _tool(service: ServiceProcess, **config: Any) -> SandboxTool:
    return SandboxTool({"a2e_url": service.url, "token": TOKEN, **config}, SCHEMA)


def _live(service: ServiceProcess) -> int:
    listed = httpx.get(f"{service.url}/v2/sandboxes", headers={"X-API-Key": TOKEN}, timeout=10)
    return len(listed.json())


def test_each_trajectory_keeps_its_own_sandbox_until_released(service: ServiceProcess) -> None:
    tool = _tool(service)

    async def rollout() -> None:
        first, _ = await tool.create()
        second, _ = await tool.create("trajectory-2")
        assert second == "trajectory-2" and _live(service) == 0  # made at first use only
        said, reward, metrics = await tool.execute(first, {"code": "x = 20\nprint('set')"})
        assert said.text == "set\n" and reward == 0.0 and metrics["new_sandbox"] is True
        again, _, metrics = await tool.execute(first, {"code": "x * 2 + 2"})
        assert again.text == "42\n" and metrics["new_sandbox"] is False
        other, _, _ = await tool.execute(second, {"code": "x"})
        assert "NameError" in other.text  # another trajectory's sandbox
        failed, _, _ = await tool.execute(first, {"code": "1/0"})
        assert "ZeroDivisionError" in failed.text
        assert _live(service) == 2
        await tool.release(first)
        await tool.release(second)
        await tool.release("never-made")
        assert _live(service) == 0

    asyncio.run(rollout())


def test_a_trajectory_never_released_ends_once_idle_and_says_so(service: ServiceProcess) -> None:
    tool = _tool(service, idle_timeout_s=2, max_output_chars=60)

    async def rollout() -> None:
        instance, _ = await tool.create()
        await tool.execute(instance, {"code": "kept = 1"})
        assert wait_for(lambda: _live(service) == 0, 20)  # the server ended it, unused
        after, _, metrics = await tool.execute(instance, {"code": "print('x' * 500)"})
        assert "ended after 2 s unused" in after.text and metrics["new_sandbox"] is True
        assert after.text.endswith("more characters not shown]")
        await tool.release(instance)

    asyncio.run(rollout())


def test_a_server_that_fails_is_a_reason_in_the_text() -> None:
    tool = SandboxTool({"a2e_url": "http://127.0.0.1:9", "token": TOKEN}, SCHEMA)

    async def rollout() -> None:
        instance, _ = await tool.create()
        said, reward, metrics = await tool.execute(instance, {"code": "1"})
        assert said.text.startswith("[the sandbox failed: ") and reward == 0.0
        assert "error" in metrics

    asyncio.run(rollout())
    with pytest.raises(ValueError, match="a2e_url"):
        SandboxTool({}, SCHEMA)
