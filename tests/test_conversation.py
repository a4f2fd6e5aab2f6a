"""``Conversation``: the session with the host that HTTP requests and MCP sessions hold. Several
calls in flight in one session each get their own events and answer; a cancel reaches its
worker; closing ends what still runs."""

from __future__ import annotations

import asyncio

from a2e.caps.tools.models import ToolCallRequest, ToolCallResponse, ToolEvent, ToolListRequest
from a2e_engine.engine import Engine
from a2e_engine.engine.transports.conversation import Conversation, Refused


def _printing(word: str, times: int, pause: float = 0.02) -> ToolCallRequest:
    code = f"import time\nfor i in range({times}):\n    print('{word}', i, flush=True)\n"
    code += f"    time.sleep({pause})"
    return ToolCallRequest(tool_name="python_eval", arguments={"code": code}, streaming=True)


async def _run(conversation: Conversation, request: ToolCallRequest) -> tuple[str, str]:
    """The text its events streamed, and its result's stdout."""
    streamed, result = [], None
    async for message in conversation.call(request):
        if isinstance(message, ToolEvent) and message.kind == "artifact":
            streamed.append(message.data["chunk"])
        elif isinstance(message, ToolCallResponse):
            result = message.data
    assert result is not None and result.success, result
    return "".join(streamed), result.data["stdout"]


def test_calls_in_flight_at_once_each_get_their_own_events(engine: Engine) -> None:
    async def scenario() -> list[tuple[str, str]]:
        conversation = Conversation(engine, lambda message: None, "test")
        try:
            await conversation.open()
            listed = await conversation.list_tools(ToolListRequest())
            assert "python_eval" in {tool.name for tool in listed.tools}
            requests = [_printing(word, 20) for word in ("alpha", "beta", "gamma")]
            return await asyncio.gather(*(_run(conversation, r) for r in requests))
        finally:
            conversation.close()

    results = engine.run(scenario(), timeout=60)
    for (streamed, stdout), word in zip(results, ("alpha", "beta", "gamma"), strict=True):
        assert streamed == stdout == "".join(f"{word} {i}\n" for i in range(20))


def test_a_cancel_ends_one_call_and_not_the_other(engine: Engine) -> None:
    async def scenario() -> tuple[ToolCallResponse, tuple[str, str]]:
        conversation = Conversation(engine, lambda message: None, "test")
        try:
            await conversation.open()
            slow = _printing("slow", 600, pause=0.1)

            async def cancelled() -> ToolCallResponse:
                async for message in conversation.call(slow):
                    if isinstance(message, ToolEvent):
                        conversation.cancel(slow.id)
                    elif isinstance(message, ToolCallResponse):
                        return message
                raise AssertionError("no answer")

            return await asyncio.gather(cancelled(), _run(conversation, _printing("fast", 3)))
        finally:
            conversation.close()

    answer, (streamed, _) = engine.run(scenario(), timeout=60)
    assert not answer.data.success and "cancelled" in (answer.data.error or "")
    assert streamed == "fast 0\nfast 1\nfast 2\n"


def test_a_stopped_host_refuses_a_conversation() -> None:
    stopped = Engine()
    try:
        Conversation(stopped, lambda message: None, "test")
    except Refused as exc:
        assert exc.error.code == "overloaded"
    else:
        raise AssertionError("a host that is not running accepted a connection")
