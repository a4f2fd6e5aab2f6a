"""RayEngine on a real multi-node Ray cluster on this machine (``ray.cluster_utils.Cluster``),
on loopback (``conftest`` has Ray stay there before anything imports it).

Every node is a raylet of its own with its own resources, on loopback; each gets an engine
actor with its own supervisor, zygote and workers. The tests run in order on one cluster: the
last ones add a node and then take one away.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import ray
from e2b import SandboxException, SandboxNotFoundException
from e2b_code_interpreter import Sandbox
from ray.cluster_utils import Cluster

from a2e._client import A2EClient
from a2e.caps.tools._client import ToolAPI
from a2e.caps.tools._models import ToolEvent
from a2e.transports import WebSocketTransport
from a2e_engine.benchmarks._ray_system import ray_system
from a2e_engine.benchmarks._resources import CpuMeter
from a2e_engine.benchmarks._workloads import WORKLOADS
from a2e_engine.engine import EngineConfig, RayEngine
from a2e_engine.engine.cluster._loopback import is_loopback_address
from a2e_engine.sandbox._paths import under
from a2e_engine.sandbox._quota import mount_points
from tests.e2b_helpers import sdk_opts
from tests.service_process import ServiceProcess

#: What ``stay_on_loopback`` sets (``conftest`` does, for every process the tests start).
LOOPBACK_SETTINGS = ("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "RAY_USAGE_STATS_ENABLED")
E2B_KEY = "cluster-e2b-key-0123456789abcdef"
OTHER_KEY = "cluster-e2b-other-0123456789abcdef"
NODE_ARGS: dict[str, Any] = {
    "num_cpus": 1,
    "node_ip_address": "127.0.0.1",
    "object_store_memory": 80 * 1024 * 1024,
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    running = Cluster(
        initialize_head=True,
        head_node_args={**NODE_ARGS, "include_dashboard": False, "resources": {"head": 1}},
    )
    running.add_node(**NODE_ARGS, resources={"second": 1})
    ray.init(address=running.address, log_to_driver=False)
    try:
        yield running
    finally:
        ray.shutdown()
        running.shutdown()


@pytest.fixture(scope="module")
def ray_engine(cluster: Cluster) -> Iterator[RayEngine]:
    config = EngineConfig(prefork=1, max_workers=2, max_timeout=60)
    with RayEngine(config=config, watch_s=0.5) as engine:
        yield engine


def _node_ids(cluster: Cluster) -> set[str]:
    return {node["NodeID"] for node in ray.nodes() if node["Alive"]}


def _processes_with(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if marker in " ".join(process.info["cmdline"] or ()):
            found.append(process)
    return found


def _wait_until(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.2)


def test_every_node_gets_an_engine_and_reports_its_load(
    cluster: Cluster, ray_engine: RayEngine
) -> None:
    nodes = ray_engine.nodes()
    assert {node.node_id for node in nodes} == _node_ids(cluster)
    assert len({node.pid for node in nodes}) == len(nodes)  # an actor process each
    assert all(node.address == "127.0.0.1" for node in nodes)
    assert all(node.channel.startswith("127.0.0.1:") for node in nodes)  # the node's address


def test_spread_calls_land_on_every_node(cluster: Cluster, ray_engine: RayEngine) -> None:
    client = ray_engine.connect(spread=True)
    tools = ToolAPI(client)
    ran_on = []
    for _ in range(16):
        result = tools.call(tool_name="python_eval", arguments={"code": "6 * 7"})
        assert result.success and result.data["value"] == 42, result
        assert result.usage is not None
        ran_on.append(result.usage.node_id)
    assert set(ran_on) == _node_ids(cluster)
    client.close()


def test_a_session_stays_on_its_node_with_its_workspace(ray_engine: RayEngine) -> None:
    client = ray_engine.connect()
    tools = ToolAPI(client)
    wrote = tools.call(
        tool_name="python_eval", arguments={"code": "open('kept.txt', 'w').write('on one node')"}
    )
    read = tools.call(tool_name="read_file", arguments={"path": "kept.txt"})
    assert wrote.success and read.success, (wrote, read)
    assert read.data["content"] == "on one node"
    assert wrote.usage and read.usage and wrote.usage.node_id == read.usage.node_id
    client.close()


def test_a_python_session_keeps_its_state_on_its_node(ray_engine: RayEngine) -> None:
    """The stateful tool through the cluster: the session's worker lives on its node, from
    call to call, and another session sees none of it."""
    with ray_engine.connect() as mine, ray_engine.connect() as theirs:
        cells = [
            ToolAPI(mine).call(tool_name="python_session", arguments={"code": code}, timeout=30)
            for code in ("total = 40", "total + 2")
        ]
        assert all(cell.success for cell in cells), cells
        assert cells[1].data["display"] == [{"text/plain": "42"}]
        assert cells[0].usage and cells[1].usage
        assert cells[0].usage.node_id == cells[1].usage.node_id
        other = ToolAPI(theirs).call(
            tool_name="python_session", arguments={"code": "total"}, timeout=30
        )
        assert other.success and other.data["error"][0]["ename"] == "NameError"


def test_streaming_events_arrive_while_the_remote_call_runs(ray_engine: RayEngine) -> None:
    client = ray_engine.connect()
    tools = ToolAPI(client)
    arrivals: list[tuple[float, str]] = []

    def on_event(event: ToolEvent) -> None:
        arrivals.append((time.monotonic(), str(event.data.get("chunk", ""))))

    code = "import time\nfor i in range(3):\n    print('line', i, flush=True)\n    time.sleep(0.6)"
    result = tools.call(
        tool_name="python_eval", arguments={"code": code}, streaming=True, on_event=on_event
    )
    done = time.monotonic()
    assert result.success, result
    texts = "".join(text for _, text in arrivals)
    assert texts.index("line 0") < texts.index("line 1") < texts.index("line 2")
    # The first line came while the program still slept between the next two.
    assert done - arrivals[0][0] > 1.0
    client.close()


def test_a_timeout_kills_the_remote_worker(ray_engine: RayEngine) -> None:
    client = ray_engine.connect()
    tools = ToolAPI(client)
    result = tools.call(tool_name="run_shell", arguments={"command": "sleep 987.125"}, timeout=2)
    assert not result.success and "time" in (result.error or "").lower(), result
    _wait_until(lambda: not _processes_with("sleep 987.125"), 10, "the timed-out sleep is gone")
    client.close()


def test_a_cancel_kills_the_remote_worker(ray_engine: RayEngine) -> None:
    client = ray_engine.connect()
    tools = ToolAPI(client)
    pending = tools.start(tool_name="run_shell", arguments={"command": "sleep 986.25"}, timeout=30)
    _wait_until(lambda: bool(_processes_with("sleep 986.25")), 20, "the sleep started")
    tools.cancel(pending.req_id)
    result = pending.result()
    assert not result.success and "cancel" in (result.error or "").lower(), result
    _wait_until(lambda: not _processes_with("sleep 986.25"), 10, "the cancelled sleep is gone")
    client.close()


def test_a_request_too_large_is_refused_and_loses_no_node(ray_engine: RayEngine) -> None:
    """What a client sends can fail its request, never its node."""
    before = {node.node_id: node.pid for node in ray_engine.nodes()}
    client = ray_engine.connect()
    tools = ToolAPI(client)
    huge = tools.call(tool_name="python_eval", arguments={"code": "#" + "x" * (17 << 20)})
    assert not huge.success and "exceeds the limit" in (huge.error or ""), huge.error
    assert tools.call(tool_name="python_eval", arguments={"code": "1"}).success
    assert {node.node_id: node.pid for node in ray_engine.nodes()} == before
    client.close()


def test_ray_errors_are_said_in_one_line_by_what_was_raised() -> None:
    """A task's error by its cause, the object the remote code raised (no text to parse); an
    actor that died in its creation task, which Ray keeps as text only, by the traceback's
    last line."""
    from ray.exceptions import RayActorError, RayTaskError

    from a2e_engine.engine.cluster._links import one_line

    remote = 'Traceback (most recent call last):\n  File "node.py", line 3\nValueError: bad'
    task = RayTaskError("start", remote, ValueError("bad value\nsecond line"))
    assert one_line(task) == "ValueError: bad value"
    died = RayActorError(
        error_msg="The actor died because of an error raised in its creation task, "
        "\x1b[36mray::EngineNode.__init__()\x1b[39m\n"
        + remote.replace("ValueError: bad", "")
        + "OSError: cannot open the audit log /x: No such file or directory\n"
    )
    assert one_line(died) == (
        "RayActorError: OSError: cannot open the audit log /x: No such file or directory"
    )


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("127.0.0.1:6379", True),
        ("localhost:6379", True),
        ("[::1]:6379", True),
        ("ray://127.0.0.2:10001", True),
        ("10.0.0.5:6379", False),
        ("head-node:6379", False),
        ("auto", False),
    ],
)
def test_a_cluster_on_loopback_is_told_by_its_address(address: str, loopback: bool) -> None:
    assert is_loopback_address(address) is loopback


def test_engines_that_cannot_start_say_why_and_are_not_retried_at_once(
    cluster: Cluster, ray_engine: RayEngine
) -> None:
    """Every node's engine fails (its audit log cannot be opened): ``start`` says why in one
    line, and the nodes are left alone for a while rather than restarted every round."""
    broken = RayEngine(config=EngineConfig(prefork=1, audit_path="/nonexistent/dir/audit.jsonl"))
    with pytest.raises(RuntimeError) as failed:
        broken.start()
    message = str(failed.value)
    assert "no node of the Ray cluster could start an engine" in message, message
    assert "cannot open the audit log" in message and "\n" not in message, message
    assert set(broken._failed) == _node_ids(cluster)
    assert all(failure.retry_at > time.monotonic() + 1 for failure in broken._failed.values())
    assert len(ray_engine.nodes()) == len(_node_ids(cluster))  # the working engine is untouched


def test_the_bench_system_on_ray(cluster: Cluster) -> None:
    """``a2e bench``'s "engine on Ray (1 node)", on this cluster's head node: its calls
    succeed, and its CPU figures name the driver."""
    trivial = next(w for w in WORKLOADS if w.key == "trivial")
    payloads = trivial.payloads()
    with ray_system(resource="head")(trivial, payloads) as opened:
        roles = opened.processes()
        meter = CpuMeter(roles)
        meter.start()
        answers = [opened.call() for _ in range(10)]
        cpu = meter.per_call_ms(len(answers))
    assert {"driver", "supervisor", "zygote"} <= set(roles)
    assert {"driver_cpu_ms", "supervisor_cpu_ms", "workers_cpu_ms"} <= set(cpu)
    assert [index for index, _ in answers] == [0] * 10  # each call raises unless it succeeded


def test_the_http_service_serves_the_cluster(cluster: Cluster) -> None:
    """``a2e serve --http --ray``: a service in front of the cluster (here its head node),
    driven over REST and over WebSocket; each answer names the node that ran it."""
    assert cluster.head_node is not None
    head = cluster.head_node.node_id
    server = ServiceProcess(
        "--token", "t0ken", "--ray", cluster.address, "--ray-resource", "head",
        "--no-entry-points",
        env=dict.fromkeys(LOOPBACK_SETTINGS),  # a user's shell: the address alone keeps it there
    )  # fmt: skip
    try:
        reply = httpx.post(
            f"{server.url}/v1/tools/python_eval",
            json={"arguments": {"code": "6 * 7"}},
            headers={"Authorization": "Bearer t0ken"},
            timeout=60,
        )
        assert reply.status_code == 200, reply.text
        assert reply.json()["data"]["value"] == 42
        assert reply.json()["usage"]["node_id"] == head
        refused = httpx.post(
            f"{server.url}/v1/tools/python_eval", json={"arguments": {"code": "1"}}, timeout=10
        )
        assert refused.status_code == 401
        client = A2EClient(WebSocketTransport(server.ws_url, token="t0ken"))
        tools = ToolAPI(client)
        chunks: list[str] = []
        result = tools.call(
            tool_name="python_eval",
            arguments={"code": "print('streamed', flush=True)\n2 + 2"},
            streaming=True,
            on_event=lambda event: chunks.append(str(event.data.get("chunk", ""))),
        )
        assert result.success and result.data["value"] == 4, result
        assert result.usage is not None and result.usage.node_id == head
        assert "streamed" in "".join(chunks)
        ready = httpx.get(f"{server.url}/readyz", headers={"Authorization": "Bearer t0ken"})
        assert ready.status_code == 200, ready.text
        client.close()
    finally:
        assert server.stop() == 0, "".join(server.stderr)


def test_a_node_added_later_gets_an_engine_and_calls(
    cluster: Cluster, ray_engine: RayEngine
) -> None:
    added = cluster.add_node(**NODE_ARGS, resources={"third": 1})
    _wait_until(
        lambda: added.node_id in {node.node_id for node in ray_engine.nodes()},
        60,
        "the new node's engine is up",
    )
    tools = ToolAPI(ray_engine.connect(spread=True))
    ran_on = set()
    for _ in range(30):
        result = tools.call(tool_name="python_eval", arguments={"code": "1"})
        assert result.success and result.usage is not None, result
        ran_on.add(result.usage.node_id)
        if added.node_id in ran_on:
            break
    assert added.node_id in ran_on
    tools.client.close()


def _node_running(pid: int) -> str:
    """The Ray node whose raylet ``pid`` descends from (its engine actor's worker process
    is one of the raylet's), by the raylet's ``--node_id``."""
    for parent in psutil.Process(pid).parents():
        for arg in parent.cmdline():
            if arg.startswith(("--node_id=", "--node-id=")):
                return arg.split("=", 1)[1]
    raise AssertionError(f"process {pid} runs under no raylet")


def _node_named(sandbox: Sandbox) -> str:
    """The node a sandbox's id names (``NodeSession.node_tag``)."""
    [node] = [n for n in _node_ids_alive() if n.startswith(sandbox.sandbox_id[:8])]
    return node


def _node_ids_alive() -> set[str]:
    return {node["NodeID"] for node in ray.nodes() if node["Alive"]}


def _ran_on(sandbox: Sandbox) -> str:
    """The node where the sandbox's commands run: a command started in it, found on this
    machine, and the raylet it runs under."""
    marker = f"{600 + secrets.randbelow(10**6) / 10**7:.7f}"
    sandbox.commands.run(f"sleep {marker}", background=True)
    _wait_until(lambda: bool(_processes_with(f"sleep {marker}")), 20, "the command runs")
    [process] = [p for p in _processes_with(f"sleep {marker}") if p.name() == "sleep"]
    node = _node_running(process.pid)
    process.kill()
    return node


def test_e2b_sandboxes_across_the_cluster(cluster: Cluster, tmp_path: Path) -> None:
    """``a2e serve --http --ray``: E2B's SDK reaches every node behind one address. Sandboxes
    go where memory is freest, each id names its node, and every call for one runs there; a
    fork, a snapshot and a sandbox made from it stay on their parent's node; pause and resume
    reach it there. A node removed ends its sandboxes with an error that says so, and the
    others go on."""
    config = tmp_path / "engine.toml"
    config.write_text("[engine.admission]\nsandbox_memory_mb = 3072\n")
    keys = tmp_path / "keys"
    keys.write_text(f"{E2B_KEY}\n{OTHER_KEY}\n")
    server = ServiceProcess(
        "--api-key-file", str(keys), "--max-timeout", "300", "--config", str(config),
        "--ray", cluster.address, "--no-entry-points", start_s=240,
    )  # fmt: skip
    opts = sdk_opts(server, E2B_KEY)
    made: list[Sandbox] = []
    try:
        nodes = _node_ids_alive()
        assert len(nodes) >= 2
        spread = [Sandbox.create(timeout=240, **opts) for _ in nodes]
        made += spread
        assert {_node_named(sandbox) for sandbox in spread} == nodes  # one on each
        for index, sandbox in enumerate(spread):
            assert sandbox.run_code(f"mine = {index}; mine").text == str(index)
            assert _ran_on(sandbox) == _node_named(sandbox)

        heavy = spread[0]
        heavy.run_code("held = bytearray(300 << 20); held[::4096] = b'x' * len(held[::4096])")
        time.sleep(3)  # the service's watcher hears each node's memory every second
        later = [Sandbox.create(timeout=240, **opts) for _ in range(2)]
        made += later
        assert _node_named(heavy) not in {_node_named(sandbox) for sandbox in later}

        parent = spread[1]
        parent.files.write("/home/user/branch.txt", "at the branch\n")
        children = parent.fork(count=2)
        made += children
        snapshot = parent.create_snapshot()
        restored = Sandbox.create(template=snapshot.snapshot_id, timeout=240, **opts)
        made.append(restored)
        for copy in (*children, restored):
            assert _node_named(copy) == _node_named(parent)
            assert copy.run_code("mine").text == "1"
            assert copy.files.read("/home/user/branch.txt") == "at the branch\n"
        assert _ran_on(children[0]) == _node_named(parent)
        children[0].run_code("mine = 'child'")
        assert parent.run_code("mine").text == "1"

        assert parent.pause() is True
        with pytest.raises(SandboxException, match="paused"):
            parent.run_code("mine")
        resumed = Sandbox.connect(parent.sandbox_id, **opts)
        assert resumed.run_code("mine").text == "1"

        added = cluster.add_node(**NODE_ARGS, resources={"doomed": 1})
        doomed = None
        for _ in range(20):  # the new node's engine: the most room, once it is up
            sandbox = Sandbox.create(timeout=240, **opts)
            made.append(sandbox)
            if _node_named(sandbox) == added.node_id:
                doomed = sandbox
                break
            time.sleep(1)
        assert doomed is not None, "no sandbox went to the node added"
        doomed.run_code("x = 1")
        cluster.remove_node(added, allow_graceful=False)
        with pytest.raises(SandboxException) as ended:
            for _ in range(30):  # until the service has heard that the node is gone
                doomed.run_code("x")
                time.sleep(1)
        told = f"its node {added.node_id[:8]} of the cluster was lost"
        assert told in str(ended.value), ended.value
        assert added.node_id not in str(ended.value)  # the tag, not Ray's own account
        with pytest.raises(SandboxNotFoundException):  # the SDK says this in its own words
            Sandbox.connect(doomed.sandbox_id, **opts)
        url = f"{server.url}/sandboxes/{doomed.sandbox_id}"
        mine = httpx.get(url, headers={"X-API-Key": E2B_KEY}, timeout=30)
        assert mine.status_code == 404 and told in mine.json()["message"], mine.text
        theirs = httpx.get(url, headers={"X-API-Key": OTHER_KEY}, timeout=30)
        assert theirs.status_code == 404 and "lost" not in theirs.text, theirs.text
        side = httpx.get(
            f"{server.url}/health",
            headers={"E2b-Sandbox-Id": doomed.sandbox_id, "X-Access-Token": "not-its-token"},
            timeout=30,
        )
        assert side.status_code == 502 and "lost" not in side.text, side.text
        for sandbox in (*spread[1:], *later):
            assert sandbox.run_code("1 + 1").text == "2"
        assert heavy.run_code("len(held) >> 20").text == "300"
    finally:
        for sandbox in made:
            with contextlib.suppress(Exception):
                sandbox.kill()
        assert server.stop() == 0, "".join(server.stderr)


def test_a_killed_engine_actor_is_replaced_and_leaves_nothing(ray_engine: RayEngine) -> None:
    """What Ray does to an actor (a node removed, an actor killed): its process dies at once.
    Its engine's zygote and workers, its state directory with the sessions' tmpfs mounts, and
    its cgroups do not stay; the node gets a new engine."""
    client = ray_engine.connect()
    tools = ToolAPI(client)
    wrote = tools.call(tool_name="python_eval", arguments={"code": "open('f', 'w').write('x')"})
    assert wrote.success and wrote.usage is not None, wrote
    old = next(node for node in ray_engine.nodes() if node.node_id == wrote.usage.node_id)
    assert old.zygote_pid and old.cgroups and os.path.isdir(old.state_dir)
    assert any(under(point, old.state_dir) for point in mount_points())  # the session's tmpfs
    engine_processes = psutil.Process(old.pid).children(recursive=True)

    os.kill(old.pid, signal.SIGKILL)

    def replaced() -> bool:
        now = [node for node in ray_engine.nodes() if node.node_id == old.node_id]
        return bool(now) and now[0].pid != old.pid

    _wait_until(replaced, 60, "the node has a new engine")
    _wait_until(
        lambda: not any(process.is_running() for process in engine_processes),
        30,
        "the old engine's zygote and workers are gone",
    )
    assert not os.path.exists(old.state_dir)
    assert not any(under(point, old.state_dir) for point in mount_points())
    assert not any(os.path.exists(path) for path in old.cgroups)
    after = tools.call(tool_name="python_eval", arguments={"code": "1"})
    assert not after.success and old.node_id in (after.error or ""), after
    fresh = ToolAPI(ray_engine.connect())
    assert fresh.call(tool_name="python_eval", arguments={"code": "1"}).success
    fresh.client.close()


def test_losing_a_node_mid_run(cluster: Cluster, ray_engine: RayEngine) -> None:
    """Idempotent calls running there complete elsewhere; the others fail with tool_error
    naming the node; a session pinned there is reported lost; nothing hangs; nothing of the
    node's engine is left running."""
    victim = next(node for node in cluster.worker_nodes if node.node_id in _node_ids(cluster))
    info = next(node for node in ray_engine.nodes() if node.node_id == victim.node_id)
    engine_processes = psutil.Process(info.pid).children(recursive=True)
    assert engine_processes  # its zygote and waiting workers

    pinned = None
    for _ in range(20):  # a session that lives on the victim
        client = ray_engine.connect()
        probe = ToolAPI(client).call(tool_name="python_eval", arguments={"code": "1"})
        if probe.usage and probe.usage.node_id == victim.node_id:
            pinned = ToolAPI(client)
            break
        client.close()
    assert pinned is not None, "no session landed on the node to remove"

    spread = ToolAPI(ray_engine.connect(spread=True))
    retried = []
    script = "sleep 3; echo ran"
    on_victim = 0
    for _ in range(12):  # until at least one idempotent call runs on the victim
        retried.append(
            spread.start(tool_name="run_code", arguments={"language": "bash", "code": script})
        )
        time.sleep(0.05)
        on_victim = next(n for n in ray_engine.nodes() if n.node_id == victim.node_id).in_flight
        if on_victim >= 1:
            break
    assert on_victim >= 1, "no idempotent call went to the node to remove"
    lost_call = pinned.start(
        tool_name="run_shell", arguments={"command": "sleep 985.5"}, timeout=30
    )
    _wait_until(lambda: bool(_processes_with("sleep 985.5")), 20, "the pinned call runs")

    cluster.remove_node(victim, allow_graceful=False)

    outcome = lost_call.result()
    assert not outcome.success and outcome.error_code == "tool_error", outcome
    assert victim.node_id in (outcome.error or "")
    for pending in retried:
        result = pending.result()
        assert result.success and result.data["status"] == "Success", result
        assert result.data["run_result"]["stdout"] == "ran\n"
        assert result.usage is not None and result.usage.node_id != victim.node_id
    after = pinned.call(tool_name="python_eval", arguments={"code": "1"})
    assert not after.success and victim.node_id in (after.error or ""), after

    _wait_until(
        lambda: victim.node_id not in {node.node_id for node in ray_engine.nodes()},
        30,
        "the lost node is given up",
    )
    _wait_until(
        lambda: not any(process.is_running() for process in engine_processes),
        30,
        "the lost node's zygote and workers are gone",
    )
    assert not _processes_with("sleep 985.5")
    spread.client.close()


def test_calls_keep_working_after_the_loss(ray_engine: RayEngine) -> None:
    tools = ToolAPI(ray_engine.connect(spread=True))
    results = []

    def call() -> None:
        results.append(tools.call(tool_name="python_eval", arguments={"code": "2 + 2"}))

    threads = [threading.Thread(target=call) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(results) == 6 and all(r.success and r.data["value"] == 4 for r in results)
    tools.client.close()
