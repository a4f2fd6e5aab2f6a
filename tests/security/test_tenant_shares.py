"""What one tenant's calls can take from another's running in the same sandbox: processes and
CPU (``sandbox._cgroups``: ``pids_cgroup``, ``cpu_cgroup``). The victim's correct program must
get its correct verdict while the attacker does its worst."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from a2e.caps.tools._client import ToolAPI
from a2e_engine.engine import Engine, EngineConfig
from a2e_engine.sandbox._limits import Limits
from tests.security.harness import Attacker, Sandbox, attack

A_PLUS_B = "#include <iostream>\nint main(){long a, b; std::cin >> a >> b; std::cout << a + b;}\n"


def _victim_ran(tools: ToolAPI) -> dict[str, Any]:
    """The victim's C++ program, compiled and run by the tool the attacker uses (one zygote,
    one sandbox cap between them)."""
    result = tools.call(
        tool_name="run_code",
        arguments={"language": "cpp", "code": A_PLUS_B, "stdin": "40 2"},
        timeout=60,
    )
    assert result.success, result.error
    return dict(result.data)


@pytest.fixture(scope="module")
def roomy() -> Iterator[Engine]:
    """An engine that runs ten calls at once, each allowed 512 processes and threads: more
    together than a sandbox cap of 4,096."""
    config = EngineConfig(max_workers=10, prefork=1, max_timeout=60, limits=Limits(processes=512))
    with Engine(config=config) as engine:
        yield engine


#: Threads that sleep: as many as a call may have, nearly.
THREADS = (
    "import threading, time\n"
    "started = []\n"
    "for _ in range(500):\n"
    "    try:\n"
    "        threading.Thread(target=time.sleep, args=(8,), daemon=True).start()\n"
    "        started.append(1)\n"
    "    except RuntimeError:\n"
    "        break\n"
    "print(len(started))\n"
    "time.sleep(8)\n"
)


@attack(
    "7. every call at its process cap, together past the sandbox's",
    full="the sandbox's pids cap is every call's own together",
    reduced="no pids cgroup: RLIMIT_NPROC per session uid is off without the uid drop",
)
def test_a_tenant_at_its_process_caps_leaves_others_theirs(roomy: Engine) -> None:
    if not roomy.layers.active("pids_cgroup"):
        pytest.skip(f"no pids cgroup: {roomy.layers.reason('pids_cgroup')}")
    clients = [roomy.connect(client_name=f"attacker-{n}") for n in range(9)]
    calls = [
        ToolAPI(client).start(
            tool_name="run_code", arguments={"language": "python", "code": THREADS}, timeout=30
        )
        for client in clients
    ]
    try:
        time.sleep(3)  # every one of them holds its threads
        victim = ToolAPI(roomy.connect(client_name="victim"))
        ran = _victim_ran(victim)
        assert ran["status"] == "Success" and ran["run_result"]["stdout"] == "42", ran
    finally:
        for call in calls:
            call.cancel()
        for client in clients:
            client.close()


#: Sixty-four processes that compute, each in a session of its own.
SESSIONS_THAT_COMPUTE = (
    "import os, time\n"
    "for _ in range(64):\n"
    "    if os.fork() == 0:\n"
    "        os.setsid()\n"
    "        end = time.monotonic() + 12\n"
    "        while time.monotonic() < end:\n"
    "            pass\n"
    "        os._exit(0)\n"
    "time.sleep(12)\n"
)
#: About 0.4 s of CPU, then the sum.
NEEDS_CPU = (
    "#include <iostream>\n"
    "int main(){long a, b; std::cin >> a >> b; volatile unsigned long x = 0;\n"
    "for (unsigned long i = 0; i < 400000000UL; i++) x += i;\n"
    "std::cout << a + b;}\n"
)


@attack(
    "10. one call computing in sixty-four sessions",
    full="each call's processes share one weight of the CPU",
    reduced="no cpu cgroup: the kernel's autogroup gives each session a share",
)
def test_a_call_of_many_sessions_gets_one_share_of_the_cpu(
    sandbox: Sandbox, attacker: Attacker
) -> None:
    hog = attacker.tools.start(
        tool_name="run_code",
        arguments={"language": "python", "code": SESSIONS_THAT_COMPUTE, "run_timeout": 20},
        timeout=30,
    )
    try:
        time.sleep(1.5)
        result = sandbox.victim.call(
            tool_name="code_eval",
            arguments={
                "language": "cpp",
                "program": NEEDS_CPU,
                "test_cases": [{"input": "1 2", "output": "3"}] * 3,
                "cpu_time_limit": 1,
            },
            timeout=60,
        )
        assert result.success, result.error
        if sandbox.has("pids_cgroup"):  # the cgroups are on: the CPU's too, on this host
            assert sandbox.has("cpu_cgroup"), sandbox.layer("cpu_cgroup")
            assert result.data["verdict"] == "AC", result.data["tests"]
    finally:
        hog.cancel()


def test_the_sandbox_cap_holds_every_call_at_its_own(roomy: Engine) -> None:
    layer = roomy.layers["pids_cgroup"]
    if not layer["active"]:
        pytest.skip(layer["reason"])
    assert layer["total"] >= layer["per_call"] * 10


@pytest.fixture(scope="module")
def one_slot() -> Iterator[Engine]:
    """An engine that runs one call at a time: every other waits for its turn."""
    with Engine(config=EngineConfig(max_workers=1, prefork=1, max_timeout=60)) as engine:
        yield engine


@attack(
    "12. a tenant queues many calls ahead of another's",
    full="turns at the worker slots go to the tenant holding the fewest",
    reduced="(the same in every mode)",
)
def test_a_queue_of_one_tenant_does_not_hold_up_another(one_slot: Engine) -> None:
    hog = ToolAPI(one_slot.connect(client_name="hog"))
    sleeper = {"code": "import time\ntime.sleep(1)"}
    queued = [hog.start(tool_name="python_eval", arguments=sleeper, timeout=60) for _ in range(12)]
    try:
        time.sleep(0.5)  # the hog's first call runs, the others wait
        victim = ToolAPI(one_slot.connect(client_name="victim"))
        started = time.monotonic()
        result = victim.call(tool_name="python_eval", arguments={"code": "6 * 7"}, timeout=8)
        assert result.success and result.data["value"] == 42, result
        assert time.monotonic() - started < 4, "it waited behind the hog's queue"
    finally:
        for call in queued:
            call.cancel()
