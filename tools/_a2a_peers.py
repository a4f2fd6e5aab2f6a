"""``use_a2a_agent``: one tool that hands a task to any of the A2A peer agents the engine knows.

Peers are homogeneous (each takes a text instruction and returns artifacts), so one tool covers
them all, its ``name`` argument an enum of the registered peers. A peer parked in
input-required is resumed by calling again with its ``task_id``; the tool keeps no state
between calls (the caller holds the task id) and no client either: each call opens its own and
closes it.

Configured per engine (``[tools.a2a]`` or ``tool_settings={"a2a": {...}}``)::

    [tools.a2a]
    allow = ["127.0.0.1"]                 # the network policy: peers on internal addresses
    [tools.a2a.peers.weather]
    url = "http://127.0.0.1:9999/weather" # card at <url>/.well-known/agent-card.json
    description = "forecasts"             # shown to the model in the tool's description
    headers = { Authorization = "Bearer ..." }
    timeout = 120                         # seconds the peer may take; then its task is cancelled

A peer may be given by its ``card`` (the card's JSON) instead of ``url``. Headers are treated as
credentials: they never enter the zygote that all workers share, only the job of a call to that
peer (``ToolPlugin.secrets_for``).

Every failure (an unknown peer, a refused or unreachable address, a bad card, an unknown task
id, a timeout, a task that ends failed, cancelled or rejected) is a ``tool_error`` whose error is
the JSON ``{"error_type", "a2a_agent", "message"}``, the same object in its data, with the task
id and state when there is one: a caller can re-plan on it. The work is in ``tools._a2a_dispatch``.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from a2e.caps.tools._models import ToolDefinition, ToolParameter
from a2e.caps.tools._plugin import SandboxProfile, ToolExecutionError, ToolPlugin
from a2e_engine.tools._destinations import Destinations

__all__ = ["A2APeers", "PeerSpec"]

TOOL_NAME = "use_a2a_agent"
PEER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
SDK_MODULE = "a2e_engine.tools._a2a_dispatch"


class PeerSpec(BaseModel):
    """One registered peer. ``url`` or ``card``, not both."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str | None = None
    card: dict[str, Any] | None = None
    card_path: str = ""
    description: str = ""
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: float = Field(default=300.0, gt=0, le=86400)


class A2APeers(ToolPlugin):
    name = "a2a"
    sandbox_profile = SandboxProfile.NETWORK
    #: Time to send the A2A cancel for the remote task when the call is cancelled or times out.
    cancel_grace_s = 5.0

    def __init__(
        self,
        peers: Mapping[str, Mapping[str, Any]] | None = None,
        allow: Iterable[str] = (),
        max_result_bytes: int = 1024 * 1024,
    ) -> None:
        super().__init__()
        self.destinations = Destinations(allow)
        if not isinstance(max_result_bytes, int) or max_result_bytes < 1024:
            raise ValueError("max_result_bytes must be an integer of at least 1024")
        self.max_result_bytes = max_result_bytes
        if not isinstance(peers, Mapping | None):
            raise ValueError("peers must be a table of peer name -> settings")
        self.peers: dict[str, PeerSpec] = {}
        for peer, settings in (peers or {}).items():
            self.peers[peer] = self._checked_peer(peer, settings)
        # Credentials stay in the supervisor: see __getstate__ and secrets_for.
        self._headers = {peer: dict(spec.headers) for peer, spec in self.peers.items()}
        self.peers = {p: spec.model_copy(update={"headers": {}}) for p, spec in self.peers.items()}
        if self.peers:
            self._sdk()  # a missing SDK is a configuration error, said at start

    def _checked_peer(self, peer: Any, settings: Any) -> PeerSpec:
        where = f"peers.{peer}"
        if not isinstance(peer, str) or not PEER_NAME.fullmatch(peer):
            raise ValueError(f"{where}: a peer name is 1-64 letters, digits, '_', '.' or '-'")
        try:
            spec = PeerSpec.model_validate(settings)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = "".join(f".{part}" for part in first["loc"])
            raise ValueError(f"{where}{field}: {first['msg']}") from None
        if (spec.url is None) == (spec.card is None):
            raise ValueError(f"{where}: give url or card (exactly one)")
        urls = [spec.url] if spec.url is not None else self._card_urls(where, spec.card or {})
        for url in urls:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"{where}: {url!r} is not an http(s) URL with a host")
            refusal = self.destinations.literal_refusal(parts.hostname)
            if refusal:
                raise ValueError(f"{where}: {refusal}")
        return spec

    def _card_urls(self, where: str, card: dict[str, Any]) -> list[str]:
        try:
            parsed = self._sdk().parse_card(card)
        except Exception as exc:
            raise ValueError(f"{where}.card: not an agent card ({exc})") from None
        urls = [interface.url for interface in parsed.supported_interfaces]
        if not urls:
            raise ValueError(f"{where}.card: the card names no interface URL")
        return urls

    @staticmethod
    def _sdk() -> Any:
        try:
            return importlib.import_module(SDK_MODULE)
        except ImportError as exc:
            raise ValueError(
                f"A2A peers need the A2A SDK: pip install 'a2e-engine[a2a]' ({exc})"
            ) from None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_headers"] = {}  # the zygote, and so every worker, never holds them
        return state

    # -- the plugin contract --

    def preload(self) -> None:
        if self.peers:
            self._sdk()

    def secrets_for(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, str]:
        return dict(self._headers.get(str(arguments.get("name")), {}))

    def invalid_arguments(
        self, tool_name: str, arguments: dict[str, Any], problems: list[str]
    ) -> ToolExecutionError:
        peer = arguments.get("name")
        if isinstance(peer, str) and peer not in self.peers:
            return self._not_found(peer)
        return _failure("InvalidArguments", str(peer or ""), "; ".join(problems))

    def _list_tools(self) -> list[ToolDefinition]:
        if not self.peers:
            return []
        names = sorted(self.peers)
        catalog = "; ".join(
            f"{n}: {self.peers[n].description}" if self.peers[n].description else n for n in names
        )
        return [
            ToolDefinition(
                name=TOOL_NAME,
                description="Dispatch a task to a named A2A peer agent and return its result "
                f"(its artifacts). Peers: {catalog}. If the result's state is input-required, "
                "call again with its task_id and the requested information as task.",
                input_parameters=[
                    ToolParameter(
                        name="name",
                        type="string",
                        description="Name of the A2A peer agent to dispatch the task to.",
                        required=True,
                        enum=names,
                    ),
                    ToolParameter(
                        name="task",
                        type="string",
                        description="The task instruction for the peer agent, or the "
                        "requested information when resuming a task that returned "
                        "input-required.",
                        required=True,
                    ),
                    ToolParameter(
                        name="task_id",
                        type="string",
                        description="Remote task id to resume, from a prior input-required "
                        "result. Omit to start a new task.",
                    ),
                ],
                output_parameters=[
                    ToolParameter(
                        name="state",
                        type="string",
                        description="completed, input-required or replied",
                    ),
                    ToolParameter(name="text", type="string", description="the peer's answer"),
                    ToolParameter(name="task_id", type="string", description="the remote task"),
                    ToolParameter(name="artifacts", type="array", description="the artifacts"),
                ],
                streaming=True,
                idempotent=False,  # a second dispatch is a second task on the peer
                tags=["a2a", "agents", "delegate", "network"],
                toolkit="a2a",
            )
        ]

    def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        peer = str(arguments.get("name"))
        spec = self.peers.get(peer)
        if spec is None:
            raise self._not_found(peer)
        task = arguments.get("task")
        if not isinstance(task, str) or not task.strip():
            raise _failure("InvalidArguments", peer, "task must be a non-empty instruction")
        task_id = arguments.get("task_id") or ""
        if not isinstance(task_id, str):
            raise _failure("InvalidArguments", peer, "task_id must be a string")
        sdk = self._sdk()
        context = self.context
        call = sdk.PeerCall(
            peer=peer,
            agent=spec.url if spec.url is not None else spec.card,
            task=task,
            task_id=task_id,
            card_path=spec.card_path,
            timeout=spec.timeout,
            destinations=self.destinations,
            headers=dict(context.secrets) if context else {},
            emit=self.emit if context and context.streaming else None,
            cancel_budget_s=max(0.5, self.cancel_grace_s - 1.5),
            max_result_bytes=self.max_result_bytes,
        )
        try:
            result: dict[str, Any] = sdk.dispatch(call)
        except sdk.PeerFailure as failure:
            raise _failure(
                failure.error_type, peer, failure.message, failure.task_id, failure.state
            ) from None
        return result

    def _not_found(self, peer: str) -> ToolExecutionError:
        known = ", ".join(sorted(self.peers)) or "none"
        return _failure(
            "A2AAgentNotFoundError", peer, f"A2A agent {peer!r} not found; known: {known}"
        )


def _failure(
    error_type: str, peer: str, message: str, task_id: str = "", state: str = ""
) -> ToolExecutionError:
    """The one failure shape: the error is the JSON object, the data the same plus the task."""
    content = {"error_type": error_type, "a2a_agent": peer, "message": message}
    data: dict[str, Any] = dict(content)
    if task_id:
        data["task_id"] = task_id
    if state:
        data["state"] = state
    return ToolExecutionError(json.dumps(content), data, retryable=False)
