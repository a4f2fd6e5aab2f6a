"""Protocol abuse from a client: every bad message gets a named error, nothing is lost, the
engine goes on."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from a2e._codec import MAX_MESSAGE_BYTES, ProtocolError, decode
from a2e._messages import A2EMessage
from tests.security.harness import Attacker, Sandbox, attack, leftover_processes

CODEC = "the codec: size cap, strict JSON, typed models; an error per bad line"


class RawConnection:
    """A connection fed raw lines, the way the stdio and socket transports feed it."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.engine = sandbox.engine
        self.replies: list[dict[str, Any]] = []
        self.arrived = threading.Condition()
        self.connection = self.engine.open_connection(self._on_reply, name="raw")

    def _on_reply(self, message: A2EMessage) -> None:
        with self.arrived:
            self.replies.append(json.loads(message.model_dump_json()))
            self.arrived.notify_all()

    def send(self, line: str | bytes) -> None:
        try:
            message: A2EMessage | ProtocolError = decode(line)
        except ProtocolError as exc:
            message = exc
        self.connection.receive(message)

    def wait_for(self, count: int, timeout: float = 30) -> list[dict[str, Any]]:
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.replies) >= count, timeout)
            return list(self.replies)

    def close(self) -> None:
        self.connection.close()


def _handshake(raw: RawConnection, capabilities: list[str]) -> str:
    raw.send(
        json.dumps(
            {"type": "handshake/req", "id": "h", "client": "raw", "capabilities": capabilities}
        )
    )
    reply = raw.wait_for(1)[-1]
    assert reply["type"] == "handshake/resp", reply
    return str(reply["session_id"])


@attack("oversized message", full=CODEC, reduced=CODEC)
def test_oversized_message(sandbox: Sandbox, attacker: Attacker) -> None:
    raw = RawConnection(sandbox)
    raw.send(b"{" + b" " * MAX_MESSAGE_BYTES + b"}")
    reply = raw.wait_for(1)[0]
    assert reply["type"] == "error" and reply["code"] == "message_too_large", reply
    raw.close()
    attacker.still_serving()


@attack("malformed JSON, wrong types, NaN, deep nesting", full=CODEC, reduced=CODEC)
def test_malformed_messages(sandbox: Sandbox, attacker: Attacker) -> None:
    raw = RawConnection(sandbox)
    lines = [
        "not json at all",
        '{"type": "tool/call/req", "id": 5}',
        '{"type": "warp/drive"}',
        '{"type": "tool/list/req", "id": "x", "limit": NaN}',
        "[" * 100_000 + "]" * 100_000,
        "\xff\xfe",
    ]
    for line in lines:
        raw.send(line)
    replies = raw.wait_for(len(lines))
    assert len(replies) == len(lines) and all(r["type"] == "error" for r in replies), replies
    raw.close()
    attacker.still_serving()


@attack(
    "a flood of pipelined calls",
    full="pending-call cap (refused retryably), bounded workers, queueing within each timeout",
    reduced="the same",
)
def test_pipelined_call_flood(sandbox: Sandbox, attacker: Attacker) -> None:
    raw = RawConnection(sandbox)
    session = _handshake(raw, ["tools"])
    count = 300
    for i in range(count):
        raw.send(
            json.dumps(
                {
                    "type": "tool/call/req",
                    "id": f"c{i}",
                    "session_id": session,
                    "tool_name": "python_eval",
                    "arguments": {"code": f"{i}"},
                    "timeout": 60,
                }
            )
        )
    replies = raw.wait_for(1 + count, timeout=120)
    results = [r for r in replies if r["type"] == "tool/call/resp"]
    assert len(results) == count, f"{len(results)} of {count} answered"
    values = sorted(r["data"]["data"]["value"] for r in results if r["data"]["success"])
    assert values == list(range(count))
    raw.close()
    assert leftover_processes(sandbox.engine) == []
    attacker.still_serving()


@attack(
    "calls on a session without the tools capability, and on no session",
    full="capability gating per session",
    reduced="the same",
)
def test_calls_without_the_capability(sandbox: Sandbox, attacker: Attacker) -> None:
    raw = RawConnection(sandbox)
    session = _handshake(raw, ["not-tools"])
    call = {
        "type": "tool/call/req",
        "tool_name": "python_eval",
        "arguments": {"code": "open('pwned', 'w')"},
    }
    raw.send(json.dumps({**call, "id": "a", "session_id": session}))
    raw.send(json.dumps({**call, "id": "b", "session_id": "no-such-session"}))
    replies = raw.wait_for(3)[1:]
    assert len(replies) == 2 and not any(r.get("data", {}).get("success") for r in replies), replies
    raw.close()
    time.sleep(0.1)
    attacker.still_serving()
