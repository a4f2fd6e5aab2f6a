"""``RayEngine``: an engine actor on every node of a Ray cluster, and clients that reach them.

Started inside a Ray program (``ray.init`` done, or done here with ``address``), it keeps one
``NodeEngine`` actor on each alive node (or each node with ``resource``), pinned there, each
owning that node's supervisor, zygote and workers. A watcher thread keeps the set current:
a node that joins gets an actor, a lost actor is given up and replaced once its node is back
(the new engine clears what the old one left: ``sandbox._leftovers``). Ray's own retries stay
off (``max_restarts=0``, ``max_task_retries=0``): re-running a tool is a decision about the
tool, taken by ``ClusterTransport`` for idempotent ones only.

Placement: a call, or a session for one request, to the less loaded of two random nodes
(``NodeLink.load``); a session that keeps state, to the node whose memory is freest. Engines
that share a machine (nodes of ``ray.cluster_utils.Cluster`` on one host, or several drivers'
engines on one node) keep their session uids apart as any engines on one machine do
(``engine._uid_blocks``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import threading
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from a2e._client import A2EClient
from a2e.caps.tools._plugin import ToolPlugin
from a2e_engine.engine._config import EngineConfig
from a2e_engine.engine._host import HostSession, HostStatus, Send
from a2e_engine.engine._policy import Policy, PolicyFunction, as_policy
from a2e_engine.engine.cluster._channel import NodeChannel
from a2e_engine.engine.cluster._host import ClusterHost
from a2e_engine.engine.cluster._links import NodeInfo, NodeLink, one_line
from a2e_engine.engine.cluster._node import NodeEngine
from a2e_engine.engine.cluster._transport import ClusterTransport
from a2e_engine.sandbox.layers import LayerReports

__all__ = ["NodeInfo", "RayEngine"]

log = logging.getLogger("a2e.cluster")
T = TypeVar("T")

#: How long a new node's engine may take to start.
START_TIMEOUT_S = 120.0
#: After a node fails to start an engine, how long before the watcher tries it again (the
#: first time; it doubles with each failure in a row, up to ``RETRY_START_MAX_S``).
RETRY_START_S = 5.0
RETRY_START_MAX_S = 300.0


class RayEngine:
    """The engine on a Ray cluster (docs/cluster.md)."""

    def __init__(
        self,
        plugins: Sequence[ToolPlugin] = (),
        config: EngineConfig | None = None,
        *,
        builtin_tools: bool = True,
        resource: str | None = None,
        address: str | None = None,
        watch_s: float = 1.0,
        policy: Policy | PolicyFunction | None = None,
    ) -> None:
        self.config = config or EngineConfig()
        self.policy = policy
        self.plugins = list(plugins)
        self.builtin_tools = builtin_tools
        self.resource = resource
        self.address = address
        self.watch_s = watch_s
        self._links: dict[str, NodeLink] = {}  # node id -> its live actor
        self._starting: dict[str, tuple[NodeLink, Any]] = {}  # node id -> (link, describe ref)
        self._failed: dict[str, _StartFailure] = {}  # node id -> its last failures to start
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._watcher: threading.Thread | None = None
        self._actor_class: Any = None
        self._host = ClusterHost(self)

    # -- lifecycle --

    def start(self) -> RayEngine:
        import ray

        if not ray.is_initialized():
            ray.init(address=self.address, include_dashboard=False, log_to_driver=False)
        self._actor_class = ray.remote(NodeEngine)
        self._reconcile()
        self._wait_for_starting(START_TIMEOUT_S)
        if not self._links:
            self.stop()
            why = next((f"; {failure.why}" for failure in self._failed.values()), "")
            raise RuntimeError(
                "no node of the Ray cluster could start an engine"
                + (f" (nodes with resource {self.resource!r})" if self.resource else "")
                + why
            )
        self._watcher = threading.Thread(target=self._watch, name="a2e-ray-watch", daemon=True)
        self._watcher.start()
        self._host.start()
        return self

    def stop(self) -> None:
        import ray

        self._stopping.set()
        self._host.stop()
        if self._watcher is not None:
            self._watcher.join(timeout=10)
        with self._lock:
            links = list(self._links.values())
            starting = [link for link, _ in self._starting.values()]
            self._links.clear()
            self._starting.clear()
        stops = []
        for link in links:
            with contextlib.suppress(Exception):
                stops.append(link.actor.stop.remote())
        with contextlib.suppress(Exception):
            ray.wait(stops, num_returns=len(stops), timeout=30)
        # An actor still starting may be on a node that just left: a stop would wait for
        # Ray to declare the node dead. Killed, it leaves what ``sandbox._leftovers`` clears.
        for link in links + starting:
            if link.channel is not None:
                link.channel.close()
            with contextlib.suppress(Exception):
                ray.kill(link.actor)

    def __enter__(self) -> RayEngine:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- clients --

    def connect(
        self,
        *,
        spread: bool = False,
        capabilities: Sequence[str] = ("tools",),
        client_name: str = "ray",
        token: str | None = None,
        policy: Policy | PolicyFunction | None = None,
    ) -> A2EClient:
        """An ``A2EClient`` with its handshake done. Its session lives on one node (the least
        loaded of two); with ``spread``, each call goes to the node placement picks (for
        stateless calls: a workspace is per node)."""
        pinned = None if spread else self.pick()
        if not spread and pinned is None:
            raise RuntimeError("no node of the cluster has a running engine")
        transport = ClusterTransport(self, pinned, as_policy(policy) if policy else None)
        return A2EClient(transport, client_name=client_name, capabilities=capabilities, token=token)

    # -- the host protocol (engine.host.Host), for a2e serve --http --ray --

    def open_connection(
        self, send: Send, *, policy: Policy | None = None, name: str = "", tenant: str = ""
    ) -> Any:
        """A host connection whose session lives on one node (``cluster.host``)."""
        return self._host.open_connection(send, policy=policy, name=name, tenant=tenant)

    async def open_session(
        self,
        client: str,
        *,
        policy: Policy | None = None,
        stateless: bool = False,
        tenant: str = "",
        lasting: bool = False,
        home: str = "",
    ) -> HostSession:
        """A session on one node, over a host connection (``cluster.host``)."""
        return await self._host.open_session(
            client,
            policy=policy,
            stateless=stateless,
            tenant=tenant,
            lasting=lasting,
            home=home,
        )

    async def fork_session(self, session: HostSession, count: int) -> list[HostSession]:
        return await self._host.fork_session(session, count)

    async def pause_session(self, session: HostSession, paused: bool) -> str:
        return await self._host.pause_session(session, paused)

    def status(self) -> HostStatus:
        return self._host.status()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run a coroutine on the host loop (where services run) and wait for its result."""
        return self._host.run(coro, timeout)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._host.loop

    @property
    def layers(self) -> LayerReports:
        """The isolation layers of a node's engine (each node reports its own in ``nodes``)."""
        with self._lock:
            links = sorted(self._links.values(), key=lambda link: link.node_id)
        return LayerReports(links[0].described.get("layers", {}) if links else {})

    def nodes(self) -> list[NodeInfo]:
        with self._lock:
            links = list(self._links.values())
        return [
            NodeInfo(
                node_id=link.node_id,
                address=link.address,
                pid=link.pid,
                channel=":".join(map(str, link.channel.address)) if link.channel else "",
                in_flight=link.in_flight,
                calls_pending=int(link.reported.get("calls_pending", 0)),
                calls_running=int(link.reported.get("calls_running", 0)),
                workers_waiting=int(link.reported.get("workers_waiting", 0)),
                memory_free_mb=int(link.reported.get("memory_free_mb", 0)),
                state_dir=str(link.described.get("state_dir", "")),
                zygote_pid=link.described.get("zygote_pid"),
                zygote_pids=tuple(link.reported.get("zygote_pids", ())),
                cgroups=tuple(link.described.get("cgroups", ())),
            )
            for link in sorted(links, key=lambda link: link.node_id)
        ]

    # -- placement (``transport.Nodes``) --

    def pick(self, exclude: frozenset[str] = frozenset()) -> NodeLink | None:
        with self._lock:
            links = [link for link in self._links.values() if link.node_id not in exclude]
        if not links:
            return None
        if len(links) == 1:
            return links[0]
        first, second = random.sample(links, 2)
        return first if first.load() <= second.load() else second

    def place(self, by_memory: bool, exclude: frozenset[str] = frozenset()) -> NodeLink | None:
        """The node for a new session: for one that keeps state, the one with the most room
        for it (``NodeLink.room_mb``), ties broken by load, then at random; else ``pick``."""
        if not by_memory:
            return self.pick(exclude)
        with self._lock:
            links = [link for link in self._links.values() if link.node_id not in exclude]
        if not links:
            return None
        best = max(links, key=lambda link: (link.room_mb(), -link.load(), random.random()))
        best.place_session()
        return best

    def report_lost(self, link: NodeLink, why: str) -> None:
        with self._lock:
            if self._links.get(link.node_id) is not link:
                return
            del self._links[link.node_id]
        link.lost = why
        log.warning("node %s lost: %s", link.node_id, why)
        if link.channel is not None:
            link.channel.fail(why)
        with contextlib.suppress(Exception):
            import ray

            ray.kill(link.actor)

    # -- the watcher --

    def _watch(self) -> None:
        while not self._stopping.wait(self.watch_s):
            try:
                self._reconcile()
                self._wait_for_starting(0)
                self._refresh_load()
            except Exception:  # one bad round must not end the watching
                log.exception("watching the Ray cluster")

    def _wanted_nodes(self) -> dict[str, str]:
        """Alive nodes that should have an engine: node id -> address."""
        import ray

        wanted = {}
        for node in ray.nodes():
            if not node.get("Alive"):
                continue
            if self.resource and not node.get("Resources", {}).get(self.resource):
                continue
            wanted[node["NodeID"]] = node.get("NodeManagerAddress", "")
        return wanted

    def _reconcile(self) -> None:
        wanted = self._wanted_nodes()
        now = time.monotonic()
        with self._lock:
            gone = [link for node_id, link in self._links.items() if node_id not in wanted]
            missing = [
                (node_id, address)
                for node_id, address in wanted.items()
                if node_id not in self._links
                and node_id not in self._starting
                and now >= self._failed.get(node_id, _StartFailure()).retry_at
            ]
        for link in gone:
            self.report_lost(link, "the node left the cluster")
        for node_id, address in missing:
            self._start_actor(node_id, address)

    def _start_actor(self, node_id: str, address: str) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        actor = self._actor_class.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            num_cpus=0,
            max_restarts=0,
            max_task_retries=0,
            max_concurrency=1000,
        ).remote(self.plugins, self.config, self.builtin_tools, node_id, address, self.policy)
        link = NodeLink(node_id=node_id, address=address, actor=actor)
        with self._lock:
            self._starting[node_id] = (link, actor.describe.remote())

    def _wait_for_starting(self, timeout: float) -> None:
        import ray

        with self._lock:
            starting = dict(self._starting)
        if not starting:
            return
        refs = {ref: node_id for node_id, (_, ref) in starting.items()}
        ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=timeout)
        for ref in ready:
            node_id = refs[ref]
            with self._lock:
                link, _ = self._starting.pop(node_id)
            try:
                described = ray.get(ref)
                link.channel = self._open_channel(link, described.pop("channel"))
            except Exception as exc:
                with self._lock:
                    failure = self._failed.get(node_id, _StartFailure()).again(one_line(exc))
                    self._failed[node_id] = failure
                log.warning(
                    "node %s could not start an engine (trying again in %.0f s): %s",
                    node_id,
                    failure.retry_at - time.monotonic(),
                    failure.why,
                )
                with contextlib.suppress(Exception):
                    ray.kill(link.actor)
                continue
            with self._lock:
                self._failed.pop(node_id, None)
            link.pid = int(described["pid"])
            link.described = described
            link.idempotent = dict(described["idempotent"])
            with self._lock:
                self._links[node_id] = link

    def _open_channel(self, link: NodeLink, channel: dict[str, Any]) -> NodeChannel:
        """The driver's channel to the actor's relay; a failure of it gives the node up."""
        host, port = channel["address"]
        token = bytes.fromhex(channel["token"])
        return NodeChannel(
            link.node_id, (host, port), token, lambda why: self.report_lost(link, why)
        ).open()

    def _refresh_load(self) -> None:
        import ray

        with self._lock:
            links = list(self._links.values())
        for link in links:
            link.asking()
        refs = {link.actor.load.remote(): link for link in links}
        ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=self.watch_s)
        for ref in ready:
            link = refs[ref]
            try:
                link.report(ray.get(ref))
            except Exception as exc:
                self.report_lost(link, one_line(exc))


@dataclass(frozen=True)
class _StartFailure:
    """A node's failures to start an engine in a row: when to try again, and the last why."""

    count: int = 0
    retry_at: float = 0.0
    why: str = ""

    def again(self, why: str) -> _StartFailure:
        wait = min(RETRY_START_MAX_S, RETRY_START_S * 2**self.count)
        return _StartFailure(self.count + 1, time.monotonic() + wait, why)
