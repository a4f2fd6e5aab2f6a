"""The engine on Ray (``RayEngine``, one node) as a benchmark system: what the Ray path costs
against the in-process engine (the ``x in-process`` column).

Inside a Ray program already (``ray.init`` done), it uses that cluster; otherwise it starts a
single-node one on loopback for the run. ``resource`` keeps the engine to the nodes that have it
(one node, on a cluster of several). CPU per call is reported for the driver (this process,
where the client and its channels run), the node's supervisor (the engine actor) and its zygote
and workers.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

from a2e_engine.benchmarks._calling import Opened, engine_call
from a2e_engine.benchmarks._shared_servers import kept
from a2e_engine.benchmarks._workloads import Payload, Workload

__all__ = ["engine_on_ray", "ray_system"]


def ray_system(resource: str | None = None) -> Callable[[Workload, list[Payload]], Any]:
    @contextlib.contextmanager
    def opener(workload: Workload, payloads: list[Payload]) -> Iterator[Any]:
        from a2e.caps.tools._client import ToolAPI

        with kept(("ray", resource), lambda: _ray_engine(resource)) as engine:
            client = engine.connect(spread=True, client_name="a2e-bench")

            def processes() -> dict[str, list[int]]:
                node = engine.nodes()[0]
                roles = {"driver": [os.getpid()], "supervisor": [node.pid]}
                zygotes = list(node.zygote_pids) or ([node.zygote_pid] if node.zygote_pid else [])
                if zygotes:
                    roles["zygote"] = zygotes
                return roles

            try:
                yield Opened(engine_call(ToolAPI(client), workload, payloads), processes)
            finally:
                client.close()

    return opener


engine_on_ray = ray_system()


@contextlib.contextmanager
def _ray_engine(resource: str | None) -> Iterator[Any]:
    from a2e_engine.engine.cluster._loopback import stay_on_loopback

    stay_on_loopback()  # before Ray is imported
    import ray

    from a2e_engine.benchmarks._workloads import BenchTools
    from a2e_engine.engine import EngineConfig, RayEngine

    started = not ray.is_initialized()
    if started:
        ray.init(include_dashboard=False, log_to_driver=False)
    try:
        config = EngineConfig(prefork=4, max_workers=8)
        with RayEngine(plugins=[BenchTools()], config=config, resource=resource) as engine:
            if len(engine.nodes()) != 1:
                raise RuntimeError(
                    f"the Ray system measures one node; {len(engine.nodes())} have an engine "
                    "(give a resource that one node has)"
                )
            yield engine
    finally:
        if started:
            ray.shutdown()
