"""The engine run by an unprivileged user: it starts, runs calls, and says which layers it lacks.

The test process is root; a forked child gives up root for ``nobody`` and runs the engine in a
fresh interpreter. The Python installation may live under a directory ``nobody`` may not enter
(pyenv under ``/root``): the child first opens the way in a mount namespace of its own, as the
sandbox does for its workers (``sandbox.identity``).
"""

from __future__ import annotations

import json
import os
import site
import sys
from pathlib import Path

import pytest

from sandbox import syscalls
from sandbox.identity import closed_ancestors, open_the_way

REPO = Path(__file__).resolve().parents[1]
NOBODY = 65534

ENGINE_RUN = r"""
import json, os
from a2e.caps.tools.client import ToolAPI
from engine import Engine, EngineConfig
with Engine(config=EngineConfig(landlock=os.environ["LANDLOCK"] == "on")) as engine:
    tools = ToolAPI(engine.connect())
    code = (
        "import os\n"
        f"try:\n    open('/proc/{os.getpid()}/environ', 'rb').read()\n    leak = True\n"
        "except OSError:\n    leak = False\n"
        "[os.getuid(), leak, 6 * 7]"
    )
    result = tools.call(tool_name="python_eval", arguments={"code": code})
    print(json.dumps({"layers": engine.layers, "success": result.success,
                      "value": (result.data or {}).get("value"), "error": result.error}))
"""


def run_as_nobody(code: str, landlock: bool) -> dict[str, object]:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child execs or exits
        try:
            os.close(read_end)
            os.dup2(write_end, 1)
            syscalls.unshare(syscalls.CLONE_NEWNS)
            syscalls.mount("none", "/", None, syscalls.MS_REC | syscalls.MS_PRIVATE)
            paths = [sys.prefix, sys.base_prefix, *site.getsitepackages(), str(REPO)]
            open_the_way(closed_ancestors(paths))
            os.setgroups([])
            os.setresgid(NOBODY, NOBODY, NOBODY)
            os.setresuid(NOBODY, NOBODY, NOBODY)
            os.chdir("/tmp")
            env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANDLOCK": "on" if landlock else "off"}
            os.execve(sys.executable, [sys.executable, "-c", code], env)
        finally:
            os._exit(99)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        out = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out[-2000:]
    return json.loads(out.splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become nobody")
@pytest.mark.parametrize("landlock", [True, False], ids=["landlock", "no-landlock"])
def test_an_unprivileged_engine_runs_calls_and_says_what_it_lacks(landlock: bool) -> None:
    report = run_as_nobody(ENGINE_RUN, landlock)
    assert report["success"], report["error"]
    uid, leaked, value = report["value"]  # type: ignore[misc]
    assert (uid, value) == (NOBODY, 42)
    # The worker has our uid and sees our /proc entry; Landlock forbids reading it across its
    # domain, and without Landlock the engine made itself non-dumpable.
    assert leaked is False
    layers = report["layers"]
    assert isinstance(layers, dict)
    for always in ("seccomp", "rlimits", "subreaper", "no_capabilities"):
        assert layers[always]["active"], always
    assert layers["landlock"]["active"] is landlock
    for needs_root in ("identity", "disk_quota", "pids_cgroup"):
        assert not layers[needs_root]["active"] and layers[needs_root]["reason"], needs_root
