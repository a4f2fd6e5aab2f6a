"""Real A2A peer agents, built with the ``a2a-sdk`` server and served by uvicorn on 127.0.0.1.

Each agent behaves one way (completes, streams, asks for input, fails, hangs, replies with a
message) and is mounted under ``/<name>``, its card at ``/<name>/.well-known/agent-card.json``.
The server runs in a thread of the test process; what the agents saw (cancel requests, inputs)
is recorded on ``PeerServers`` for the tests to check.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import uvicorn
from a2a.helpers import new_task_from_user_message, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Role,
    TaskState,
)
from starlette.applications import Starlette
from starlette.routing import Mount

from tests.waiting import wait_for

__all__ = ["AGENTS", "ANSWER_DELAY_S", "POINTER_URL", "PeerServers", "free_port"]


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Agent(AgentExecutor):
    """Common start of every agent: the task exists (new or resumed) and has an updater."""

    def __init__(self, record: PeerServers) -> None:
        self.record = record

    async def begin(self, context: RequestContext, queue: EventQueue) -> TaskUpdater:
        task = context.current_task
        if task is None:
            assert context.message is not None
            task = new_task_from_user_message(context.message)
            await queue.enqueue_event(task)
        self.record.inputs.append(context.get_user_input())
        return TaskUpdater(queue, task.id, task.context_id)

    def say(self, updater: TaskUpdater, text: str):  # type: ignore[no-untyped-def]
        return new_text_message(
            text, task_id=updater.task_id, context_id=updater.context_id, role=Role.ROLE_AGENT
        )

    async def cancel(self, context: RequestContext, queue: EventQueue) -> None:
        self.record.cancelled.append(str(context.task_id))
        assert context.task_id and context.context_id
        await TaskUpdater(queue, context.task_id, context.context_id).cancel()


class Echo(_Agent):
    """Works a moment, then completes with one artifact (a peer that cannot stream)."""

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        updater = await self.begin(context, queue)
        await updater.start_work(self.say(updater, "thinking"))
        await asyncio.sleep(0.3)
        text = f"echo: {context.get_user_input()}"
        await updater.add_artifact([new_text_part(text)], name="answer", last_chunk=True)
        await updater.complete(self.say(updater, "done"))


class Streamer(_Agent):
    """Three steps, each a status update with progress and a chunk of one artifact."""

    steps = 3

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        updater = await self.begin(context, queue)
        for step in range(1, self.steps + 1):
            await updater.update_status(
                TaskState.TASK_STATE_WORKING,
                self.say(updater, f"step {step}/{self.steps}"),
                metadata={"progress": step / self.steps},
            )
            await updater.add_artifact(
                [new_text_part(f"part {step}. ")],
                artifact_id="report-1",
                name="report",
                append=step > 1,
                last_chunk=step == self.steps,
            )
            await asyncio.sleep(0.25)
        await updater.complete(self.say(updater, "report written"))


class Asker(_Agent):
    """Asks which city first; completes once resumed with the answer."""

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        resumed = context.current_task is not None
        updater = await self.begin(context, queue)
        if not resumed:
            await updater.requires_input(self.say(updater, "Which city?"))
            return
        city = context.get_user_input()
        await updater.add_artifact([new_text_part(f"sunny in {city}")], name="forecast")
        await updater.complete()


class Failer(_Agent):
    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        updater = await self.begin(context, queue)
        await updater.start_work()
        await updater.failed(self.say(updater, "cannot do that: the model is down"))


class Hanger(_Agent):
    """Starts, then works forever; only a cancel ends it."""

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        updater = await self.begin(context, queue)
        await updater.start_work(self.say(updater, "started, this takes a while"))
        self.record.started.append(updater.task_id)
        await asyncio.sleep(3600)


class Slowpoke(_Agent):
    """Starts its task at once (it exists on the peer before any answer), but sends its first
    answer, the one that names the task, only after ``ANSWER_DELAY_S``; then works forever."""

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        self.record.started.append(str(context.task_id))
        await asyncio.sleep(ANSWER_DELAY_S)
        updater = await self.begin(context, queue)
        await updater.start_work(self.say(updater, "started a while ago"))
        await asyncio.sleep(3600)


#: How long ``Slowpoke`` keeps its first answer back.
ANSWER_DELAY_S = 2.0


class Replier(_Agent):
    """Answers at once with a message: no task at all."""

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        self.record.inputs.append(context.get_user_input())
        await queue.enqueue_event(new_text_message("pong", role=Role.ROLE_AGENT))


#: name -> (agent class, whether its card says it can stream)
AGENTS: dict[str, tuple[type[_Agent], bool]] = {
    "echo": (Echo, False),
    "streamer": (Streamer, True),
    "asker": (Asker, True),
    "failer": (Failer, True),
    "hanger": (Hanger, True),
    "replier": (Replier, False),
    "slowpoke": (Slowpoke, True),
    "slowpoke_polled": (Slowpoke, False),
    "pointer": (Echo, True),  # its card sends clients to cloud metadata (POINTER_URL)
}
#: Where the ``pointer`` agent's card says its endpoint is: a client must refuse to go there.
POINTER_URL = "http://169.254.169.254/latest/rpc"


def agent_card(name: str, url: str, streaming: bool) -> AgentCard:
    return AgentCard(
        name=name,
        description=f"test agent {name}",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id=name, name=name, description=f"{name} things", tags=[name])],
    )


class _SeenHeaders:
    """ASGI middleware: note the ``X-Peer-Token`` of each request (headers a peer is given)."""

    def __init__(self, app: Any, record: PeerServers) -> None:
        self.app, self.record = app, record

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            for key, value in scope["headers"]:
                if key == b"x-peer-token":
                    self.record.tokens.append(value.decode())
        await self.app(scope, receive, send)


class PeerServers:
    """Every agent of ``AGENTS`` behind one uvicorn server on 127.0.0.1; a context manager."""

    def __init__(self) -> None:
        self.port = free_port()
        self.cancelled: list[str] = []
        self.started: list[str] = []
        self.inputs: list[str] = []
        self.tokens: list[str] = []  # every X-Peer-Token header a request carried
        self.cards: dict[str, AgentCard] = {}
        mounts = []
        for name, (agent_class, streaming) in AGENTS.items():
            endpoint = POINTER_URL if name == "pointer" else f"{self.url(name)}/rpc"
            card = agent_card(name, endpoint, streaming)
            self.cards[name] = card
            handler = DefaultRequestHandler(
                agent_executor=agent_class(self), task_store=InMemoryTaskStore(), agent_card=card
            )
            routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, "/rpc")
            mounts.append(Mount(f"/{name}", routes=routes))
        app = Starlette(routes=mounts)
        app.add_middleware(_SeenHeaders, record=self)
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="a2a-peers", daemon=True)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def __enter__(self) -> PeerServers:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the A2A test server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)

    def wait_for(self, condition: Callable[[], bool], seconds: float = 10.0) -> bool:
        return wait_for(condition, seconds)
