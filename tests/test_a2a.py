"""``use_a2a_agent`` against real A2A peers (``a2a-sdk`` servers on 127.0.0.1), through a real
engine: a peer that completes, one that streams, one that asks for input and is resumed, one
that fails, one that hangs (and must receive the cancel, whichever way the call ends), an address
where nothing listens, and peers the network policy does not allow."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import dill
import pytest

from a2e.adapters._llm_agents import engine_tools
from a2e.caps.tools._client import ToolAPI
from a2e.caps.tools._models import ToolEvent, ToolResult
from a2e.caps.tools._schema import openai_tool
from a2e_engine.engine import Engine, EngineConfig
from a2e_engine.engine._config_file import parse_config
from a2e_engine.tools._a2a_peers import A2APeers
from tests.a2a_servers import ANSWER_DELAY_S, POINTER_URL, PeerServers, free_port

TOKEN = "peer-token-5d1c9"


@pytest.fixture(scope="module")
def peers() -> Iterator[PeerServers]:
    with PeerServers() as servers:
        yield servers


#: Peers registered under the name of the test agent they reach, and the others.
SAME_NAMED = (
    "echo", "streamer", "asker", "failer", "hanger", "replier", "pointer", "slowpoke",
    "slowpoke_polled",
)  # fmt: skip
OTHERS = ("impatient", "nowhere", "with_token", "by_card", "slowpoke_impatient")


def settings_for(peers: PeerServers) -> dict[str, Any]:
    registry: dict[str, dict[str, Any]] = {
        name: {"url": peers.url(name), "description": f"the {name} agent"} for name in SAME_NAMED
    }
    registry["impatient"] = {"url": peers.url("hanger"), "timeout": 1.5}
    registry["slowpoke_impatient"] = {"url": peers.url("slowpoke"), "timeout": 1.0}
    registry["nowhere"] = {"url": f"http://127.0.0.1:{free_port()}/nobody"}
    registry["with_token"] = {"url": peers.url("echo"), "headers": {"X-Peer-Token": TOKEN}}
    registry["by_card"] = {"card": {"name": "echo", "supportedInterfaces": [
        {"url": f"{peers.url('echo')}/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ]}}  # fmt: skip
    return {"allow": ["127.0.0.1"], "peers": registry}


@pytest.fixture(scope="module")
def engine(peers: PeerServers) -> Iterator[Engine]:
    config = EngineConfig(tool_settings={"a2a": settings_for(peers)}, max_workers=4, prefork=1)
    with Engine(config=config) as running:
        yield running


@pytest.fixture
def tools(engine: Engine) -> Iterator[ToolAPI]:
    api = ToolAPI(engine.connect(client_name="test_a2a"))
    yield api
    api.client.close()


def dispatch(tools: ToolAPI, name: str, task: str = "hello", **extra: Any) -> ToolResult:
    timeout = extra.pop("timeout", 30)
    arguments = {"name": name, "task": task, **extra}
    return tools.call(tool_name="use_a2a_agent", arguments=arguments, timeout=timeout)


def error_of(result: ToolResult) -> dict[str, Any]:
    """The JSON failure, checked to have exactly the documented shape."""
    assert not result.success and result.error_code == "tool_error"
    content = json.loads(result.error or "")
    assert set(content) == {"error_type", "a2a_agent", "message"}, content
    assert {k: result.data[k] for k in content} == content  # the same object in the data
    return content


# -- the tool's description --


def test_the_name_is_an_enum_of_the_registered_peers_sorted(tools: ToolAPI) -> None:
    (definition,) = [t for t in tools.list() if t.name == "use_a2a_agent"]
    schema = openai_tool(definition)["function"]["parameters"]
    expected = sorted(SAME_NAMED + OTHERS)
    assert schema["properties"]["name"]["enum"] == expected
    assert schema["required"] == ["name", "task"] and "task_id" in schema["properties"]
    assert "echo: the echo agent" in definition.description
    assert not definition.idempotent  # never retried: a second dispatch is a second task


def test_no_peers_no_tool() -> None:
    assert A2APeers()._list_tools() == []


# -- peers that answer --


def test_a_peer_that_completes(tools: ToolAPI, peers: PeerServers) -> None:
    result = dispatch(tools, "echo", "hello there")
    assert result.success, result.error
    assert result.data["state"] == "completed" and result.data["text"] == "echo: hello there"
    assert result.data["a2a_agent"] == "echo" and result.data["task_id"]
    (artifact,) = result.data["artifacts"]
    assert artifact["name"] == "answer"
    assert artifact["parts"] == [{"kind": "text", "text": "echo: hello there"}]


def test_a_peer_given_by_its_card(tools: ToolAPI) -> None:
    result = dispatch(tools, "by_card", "carded")
    assert result.success and result.data["text"] == "echo: carded"


def test_a_peer_that_replies_with_a_message(tools: ToolAPI) -> None:
    result = dispatch(tools, "replier", "ping")
    assert result.success and result.data["state"] == "replied" and result.data["text"] == "pong"


def test_streaming_relays_status_progress_and_artifacts_as_they_arrive(tools: ToolAPI) -> None:
    arrivals: list[tuple[float, ToolEvent]] = []
    result = tools.call(
        tool_name="use_a2a_agent",
        arguments={"name": "streamer", "task": "write the report"},
        streaming=True,
        on_event=lambda event: arrivals.append((time.monotonic(), event)),
    )
    returned = time.monotonic()
    assert result.success, result.error
    events = [event for _, event in arrivals]
    statuses = [e.data["message"] for e in events if e.kind == "status"]
    assert [s for s in statuses if "step" in s] == [
        f"streamer: working - step {n}/3" for n in (1, 2, 3)
    ]
    assert statuses[0].startswith("streamer: submitted - task ")
    assert statuses[-1] == "streamer: completed - report written"
    assert [e.data["pct"] for e in events if e.kind == "progress"] == [33, 66, 100]
    chunks = [e.data for e in events if e.kind == "artifact"]
    assert [c["chunk"] for c in chunks] == ["part 1. ", "part 2. ", "part 3. "]
    assert [c["final"] for c in chunks] == [False, False, True]
    assert {c["name"] for c in chunks} == {"report"} and {c["mime"] for c in chunks} == {
        "text/plain"
    }
    # Relayed while the peer worked (it pauses 0.25 s per step), not replayed at the end.
    first_chunk_at = next(at for at, event in arrivals if event.kind == "artifact")
    assert returned - first_chunk_at > 0.4
    assert result.data["text"] == "part 1. part 2. part 3. "
    assert result.data["message"] == "report written"


def test_a_call_that_does_not_stream_gets_the_same_result_without_events(
    tools: ToolAPI,
) -> None:
    result = dispatch(tools, "streamer", "quietly")
    assert result.success and result.events == []
    assert result.data["text"] == "part 1. part 2. part 3. "


def test_input_required_then_resumed_with_the_task_id(tools: ToolAPI) -> None:
    asked = dispatch(tools, "asker", "what is the weather?")
    assert asked.success, asked.error
    assert asked.data["state"] == "input-required" and asked.data["text"] == "Which city?"
    task_id = asked.data["task_id"]
    assert task_id in asked.data["resume"]
    answered = dispatch(tools, "asker", "Lyon", task_id=task_id)
    assert answered.success, answered.error
    assert answered.data["state"] == "completed" and answered.data["text"] == "sunny in Lyon"
    assert answered.data["task_id"] == task_id


def test_headers_reach_the_peer_and_no_other_worker(tools: ToolAPI, peers: PeerServers) -> None:
    result = dispatch(tools, "with_token", "authenticated")
    assert result.success and TOKEN in peers.tokens
    assert peers.tokens.count(TOKEN) == len(peers.tokens)  # sent only to the peer that has it
    # Code in another plugin's worker walks its frames for the A2A plugin (the zygote's own
    # frames hold the plugins it loaded): forked from a zygote of its own, it finds none.
    probe = tools.call(tool_name="python_eval", arguments={"code": FIND_THE_PLUGIN})
    assert probe.success, probe.error
    assert probe.data["stdout"].startswith("0 ") and TOKEN not in probe.data["stdout"]


FIND_THE_PLUGIN = """
import json, sys
frame, found = sys._getframe(), {}
while frame is not None:
    for p in frame.f_locals.get("plugins") or ():
        if type(p).__name__ == "A2APeers":
            found[id(p)] = p
    frame = frame.f_back
print(len(found), json.dumps([vars(p) for p in found.values()], default=repr))
"""


# -- failures: tool_error with error_type, a2a_agent, message --


def test_a_task_that_fails(tools: ToolAPI) -> None:
    result = dispatch(tools, "failer", "try")
    error = error_of(result)
    assert error == {
        "error_type": "A2ATaskFailedError",
        "a2a_agent": "failer",
        "message": "cannot do that: the model is down",
    }
    assert result.data["state"] == "failed" and result.data["task_id"]


def test_an_unknown_task_id(tools: ToolAPI) -> None:
    error = error_of(dispatch(tools, "echo", "more", task_id="no-such-task"))
    assert error["error_type"] == "TaskNotFoundError" and "no-such-task" in error["message"]


def test_an_address_where_nothing_listens(tools: ToolAPI) -> None:
    started = time.monotonic()
    error = error_of(dispatch(tools, "nowhere"))
    assert error["error_type"] == "AgentCardResolutionError" and error["a2a_agent"] == "nowhere"
    assert "connection" in error["message"].lower()
    assert time.monotonic() - started < 10


def test_an_unknown_peer_fails_in_the_same_shape(tools: ToolAPI) -> None:
    error = error_of(dispatch(tools, "ghost"))
    assert error["error_type"] == "A2AAgentNotFoundError" and error["a2a_agent"] == "ghost"
    assert "echo" in error["message"]  # the peers that exist, to re-plan with


def test_a_peer_timeout_cancels_the_remote_task(tools: ToolAPI, peers: PeerServers) -> None:
    result = dispatch(tools, "impatient", "take forever")
    error = error_of(result)
    assert error["error_type"] == "A2ATimeoutError" and "1.5 s" in error["message"]
    task_id = result.data["task_id"]
    assert "was cancelled" in error["message"] and result.data["state"] == "canceled"
    assert task_id in peers.cancelled


def test_the_calls_timeout_reaches_the_peer_as_a_cancel(tools: ToolAPI, peers: PeerServers) -> None:
    before = len(peers.started)
    result = dispatch(tools, "hanger", "take forever", timeout=2)
    assert not result.success and "timed out" in (result.error or "")
    assert peers.wait_for(lambda: len(peers.started) > before)
    task_id = peers.started[-1]
    assert peers.wait_for(lambda: task_id in peers.cancelled), "the peer was never told"


def test_cancelling_the_call_cancels_the_remote_task(tools: ToolAPI, peers: PeerServers) -> None:
    working = threading.Event()
    before = len(peers.started)

    def on_event(event: ToolEvent) -> None:
        if event.kind == "status" and "working" in event.data["message"]:
            working.set()

    pending = tools.start(
        "use_a2a_agent", {"name": "hanger", "task": "long job"}, True, on_event, 60.0
    )
    assert working.wait(15)
    pending.cancel()
    result = pending.result()
    assert not result.success
    assert peers.wait_for(lambda: len(peers.started) > before)
    task_id = peers.started[-1]
    assert peers.wait_for(lambda: task_id in peers.cancelled), "the peer was never told"


# A call that ends after its instruction reached the peer, before the peer's first answer (the
# one that names the task) came back: the task runs on the peer, and must be cancelled there.


def _started_on_the_peer(peers: PeerServers, before: int) -> str:
    assert peers.wait_for(lambda: len(peers.started) > before), "the peer never started it"
    return peers.started[-1]


@pytest.mark.parametrize("peer", ["slowpoke", "slowpoke_polled"])
def test_a_cancel_before_the_first_answer_reaches_the_peer(
    tools: ToolAPI, peers: PeerServers, peer: str
) -> None:
    before = len(peers.started)
    pending = tools.start("use_a2a_agent", {"name": peer, "task": "slow start"}, timeout=60.0)
    task_id = _started_on_the_peer(peers, before)
    pending.cancel()  # well within ANSWER_DELAY_S: no answer has named the task yet
    result = pending.result()
    assert not result.success and "cancelled" in (result.error or "")
    assert peers.wait_for(lambda: task_id in peers.cancelled, 10), "the peer was never told"


def test_a_timeout_before_the_first_answer_reaches_the_peer(
    tools: ToolAPI, peers: PeerServers
) -> None:
    before = len(peers.started)
    result = dispatch(tools, "slowpoke", "slow start", timeout=1)
    assert ANSWER_DELAY_S > 1
    assert not result.success and "timed out" in (result.error or "")
    task_id = _started_on_the_peer(peers, before)
    assert peers.wait_for(lambda: task_id in peers.cancelled, 10), "the peer was never told"


def test_a_peer_timeout_before_the_first_answer_cancels_the_task(
    tools: ToolAPI, peers: PeerServers
) -> None:
    before = len(peers.started)
    error = error_of(dispatch(tools, "slowpoke_impatient", "slow start"))
    assert error["error_type"] == "A2ATimeoutError" and "was cancelled" in error["message"]
    assert _started_on_the_peer(peers, before) in peers.cancelled


# -- the network policy --


def test_a_card_cannot_send_the_tool_to_an_address_the_policy_refuses(tools: ToolAPI) -> None:
    error = error_of(dispatch(tools, "pointer"))
    assert error["error_type"] == "DestinationRefused"
    assert "169.254.169.254 is a link-local address" in error["message"]
    assert POINTER_URL.startswith("http://169.254.169.254/")


def test_peers_on_internal_addresses_need_allow() -> None:
    with pytest.raises(ValueError, match=r"peers\.local: 127\.0\.0\.1 is a loopback address"):
        A2APeers(peers={"local": {"url": "http://127.0.0.1:9/x"}})
    card = {"name": "x", "supportedInterfaces": [{"url": "http://10.1.2.3/rpc"}]}
    with pytest.raises(ValueError, match=r"10\.1\.2\.3 is a private address"):
        A2APeers(peers={"carded": {"card": card}})
    assert A2APeers(peers={"carded": {"card": card}}, allow=["10.0.0.0/8"]).peers


def test_without_allow_the_running_tool_refuses_loopback(peers: PeerServers) -> None:
    """The check at connect time, not only the one at configuration (the name resolves)."""
    plugin = A2APeers(peers={"named": {"url": f"http://localhost:{peers.port}/echo"}})
    with Engine(plugins=[plugin], builtin_tools=False) as running:
        api = ToolAPI(running.connect())
        error = error_of(dispatch(api, "named"))
        api.client.close()
    assert error["error_type"] == "DestinationRefused" and "loopback" in error["message"]


@pytest.mark.parametrize(
    ("peers_setting", "message"),
    [
        ({"bad name!": {"url": "http://example.com"}}, "a peer name is"),
        ({"x": {"url": "http://example.com", "card": {}}}, "give url or card"),
        ({"x": {}}, "give url or card"),
        ({"x": {"url": "ftp://example.com"}}, "not an http"),
        ({"x": {"url": "http://example.com", "timeout": 0}}, r"peers\.x\.timeout"),
        ({"x": {"url": "http://example.com", "retries": 3}}, r"peers\.x\.retries"),
        ({"x": {"card": {"name": "no interfaces"}}}, "names no interface"),
        ({"x": {"card": {"supportedInterfaces": "nope"}}}, "not an agent card"),
        ({"x": "http://example.com"}, r"peers\.x: Input should be a valid dictionary"),
    ],
)
def test_bad_peer_settings_are_refused_at_start(peers_setting: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        A2APeers(peers=peers_setting)


def test_headers_are_not_in_what_the_zygote_receives() -> None:
    plugin = A2APeers(peers={"p": {"url": "http://example.com/a", "headers": {"X-K": TOKEN}}})
    assert TOKEN.encode() not in dill.dumps(plugin, recurse=True)
    assert plugin.secrets_for("use_a2a_agent", {"name": "p"}) == {"X-K": TOKEN}
    assert plugin.secrets_for("use_a2a_agent", {"name": "other"}) == {}


def test_the_config_file_registers_peers() -> None:
    config = parse_config(
        {
            "tools": {
                "a2a": {
                    "allow": ["10.0.0.0/8"],
                    "peers": {"coder": {"url": "http://10.0.0.7:8000", "timeout": 60}},
                }
            }
        }
    )
    plugin = A2APeers(**config.tools["a2a"])
    assert plugin.peers["coder"].timeout == 60
    assert plugin._list_tools()[0].input_parameters[0].enum == ["coder"]


# -- hosts in llm-agents-from-scratch's tool shape --


def test_the_adapter_gives_the_framework_the_tools_own_error_shape(tools: ToolAPI) -> None:
    import asyncio
    from types import SimpleNamespace

    (tool,) = [t for t in engine_tools(tools) if t.name == "use_a2a_agent"]
    assert tool.parameters_json_schema["properties"]["name"]["enum"] == sorted(SAME_NAMED + OTHERS)
    ok = asyncio.run(tool(SimpleNamespace(id_="c1", arguments={"name": "echo", "task": "x"})))
    assert not ok.error and json.loads(ok.content)["text"] == "echo: x"
    failed = asyncio.run(tool(SimpleNamespace(id_="c2", arguments={"name": "failer", "task": "x"})))
    assert failed.error and json.loads(failed.content)["error_type"] == "A2ATaskFailedError"
    assert json.loads(failed.content)["a2a_agent"] == "failer"
