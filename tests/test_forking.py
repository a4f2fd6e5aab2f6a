"""How workers are forked (``sandbox._forking``): the libc fork must leave each worker a sound,
independent interpreter, and preparation at idle priority must not follow the call's code."""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any

import pytest

from a2e.caps.tools._client import ToolAPI
from a2e.caps.tools._models import ToolDefinition
from a2e.caps.tools._plugin import ToolPlugin
from a2e_engine.engine import Engine, EngineConfig


def _eval(tools: ToolAPI, code: str) -> Any:
    result = tools.call(tool_name="python_eval", arguments={"code": code}, timeout=30)
    assert result.success, result.error
    return json.loads(result.data["stdout"])


def test_the_zygote_reports_how_it_forks(engine: Engine) -> None:
    facts = engine.layers["fresh_process"]
    assert facts["active"]
    assert facts["fork"] == "libc fork (single-threaded)"
    if os.geteuid() == 0:
        assert facts["prepared_at_idle_priority"], facts["idle_priority_reason"]


def test_every_worker_draws_its_own_random_numbers(tools: ToolAPI) -> None:
    # The zygote imported random; without the reseed every worker would repeat its state.
    code = "import json, random\nprint(json.dumps(random.getrandbits(64)))"
    drawn = {_eval(tools, code) for _ in range(4)}
    assert len(drawn) == 4


def test_threads_and_processes_work_in_a_worker(tools: ToolAPI) -> None:
    code = (
        "import json, threading\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "with ThreadPoolExecutor(4) as pool:\n"
        "    squares = list(pool.map(lambda n: n * n, range(8)))\n"
        "seen = []\n"
        "t = threading.Thread(target=lambda: seen.append(threading.current_thread().name))\n"
        "t.start(); t.join()\n"
        "print(json.dumps([squares, seen, threading.main_thread().is_alive()]))"
    )
    squares, seen, main_alive = _eval(tools, code)
    assert squares == [n * n for n in range(8)]
    assert seen and main_alive
    # The worker itself forks (subprocess), and so does the program it runs.
    forks = (
        "import os\npid = os.fork()\nos._exit(7) if pid == 0 else print(os.waitpid(pid, 0)[1] >> 8)"
    )
    ran = tools.call(tool_name="run_program", arguments={"argv": [sys.executable, "-c", forks]})
    assert ran.success and ran.data["stdout"].strip() == "7", (ran.error, ran.data)


@pytest.mark.skipif(
    os.geteuid() != 0, reason="idle priority is only used where a worker can leave it"
)
def test_tool_code_runs_at_normal_priority_and_cannot_raise_it(tools: ToolAPI) -> None:
    code = (
        "import json, os\n"
        "tried = []\n"
        "for attempt in (lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1)),\n"
        "                lambda: os.setpriority(os.PRIO_PROCESS, 0, -5)):\n"
        "    try:\n"
        "        attempt(); tried.append('raised')\n"
        "    except PermissionError:\n"
        "        tried.append('refused')\n"
        "print(json.dumps([os.sched_getscheduler(0) == os.SCHED_OTHER,\n"
        "                  os.getpriority(os.PRIO_PROCESS, 0), tried]))"
    )
    normal, nice, tried = _eval(tools, code)
    assert normal and nice == 0
    assert tried == ["refused", "refused"]


class ThreadedPreload(ToolPlugin):
    """A plugin whose preload leaves a thread running in the zygote (as a C library might)."""

    def _list_tools(self) -> list[ToolDefinition]:
        return [ToolDefinition(name="ping", description="Answers pong.", input_parameters=[])]

    def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"pong": True, "threads": threading.active_count()}

    def preload(self) -> None:
        stop = threading.Event()
        threading.Thread(target=stop.wait, daemon=True, name="preloaded").start()


def test_a_zygote_with_threads_falls_back_to_os_fork() -> None:
    config = EngineConfig(max_workers=2, prefork=1, max_timeout=30)
    # Its zygote first (the one whose layers the engine reports): no built-in before it.
    with Engine(plugins=[ThreadedPreload()], builtin_tools=False, config=config) as engine:
        assert engine.layers["fresh_process"]["fork"] == "os.fork (2 threads)"
        client = engine.connect(client_name="pytest")
        try:
            result = ToolAPI(client).call(tool_name="ping", arguments={}, timeout=30)
        finally:
            client.close()
    assert result.success, result.error
    assert result.data == {"pong": True, "threads": 1}  # os.fork kept only the calling thread
