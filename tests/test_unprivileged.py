"""The engine run by an unprivileged user: it starts, runs calls, and says which layers it lacks.

The test process is root; a forked child gives up root for ``nobody`` and runs the engine in a
fresh interpreter. The Python installation may live under a directory ``nobody`` may not enter
(pyenv under ``/root``): the child first opens the way in a mount namespace of its own, as the
sandbox does for its workers (``sandbox._identity``).
"""

from __future__ import annotations

import json
import os
import resource
import site
import sys
from pathlib import Path

import pytest

from a2e_engine.sandbox import _syscalls as syscalls
from a2e_engine.sandbox._identity import closed_ancestors, open_the_way

REPO = Path(__file__).resolve().parents[1]
NOBODY = 65534

ENGINE_RUN = r"""
import json, os, signal, time
from a2e.caps.tools._client import ToolAPI
from a2e.caps.tools._models import ToolDefinition
from a2e.caps.tools._plugin import SandboxProfile, ToolPlugin
from a2e_engine.engine import Engine, EngineConfig, Isolation


class Escaper(ToolPlugin):
    name = "escaper"
    sandbox_profile = SandboxProfile.PROCESS

    def _list_tools(self):
        return [ToolDefinition(name="escape", description="daemonise a heartbeat")]

    def _execute_tool(self, tool_name, arguments):
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                while True:
                    with open("beat", "w") as fh:
                        fh.write(repr(time.time()))
                    time.sleep(0.05)
            os._exit(0)
        time.sleep(0.3)
        return {}


def run(tools, code):
    result = tools.call(tool_name="python_eval", arguments={"code": code})
    return result.data.get("value") if result.success else result.error


config = EngineConfig(isolation=Isolation(landlock=os.environ["LANDLOCK"] == "on"))
with Engine(plugins=[Escaper()], config=config) as engine:
    tools = ToolAPI(engine.connect())
    checks = {
        "uid": run(tools, "import os\nos.getuid()"),
        "environ": run(tools, f"open('/proc/{os.getpid()}/environ', 'rb').read()"),
        "etc": run(tools, "open('/etc/a2e-attack', 'w')"),
        "mnt": run(tools, "open('/mnt/a2e-attack', 'w').write('layer')\nopen('/mnt/a2e-attack').read()"),
        "pids": run(tools, "import os\nsorted(p for p in os.listdir('/proc') if p.isdigit())"),
    }
    workspace = run(tools, "import os\nos.getcwd()")
    assert tools.call(tool_name="escape", arguments={}).success
    time.sleep(0.3)
    before = open(os.path.join(workspace, "beat")).read()
    time.sleep(0.3)
    checks["escaper_alive"] = open(os.path.join(workspace, "beat")).read() != before
    print(json.dumps({"layers": engine.layers, "checks": checks}))
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


def user_namespaces_allowed() -> bool:
    try:
        with open("/proc/sys/user/max_user_namespaces") as fh:
            return int(fh.read()) > 0
    except OSError:
        return False


NAMESPACE_LAYERS = (
    "pid_namespace",
    "private_proc",
    "ipc_namespace",
    "minimal_dev",
    "private_tmp",
    "readonly_filesystem",
    "network_namespace",
)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become nobody")
@pytest.mark.parametrize("landlock", [True, False], ids=["landlock", "no-landlock"])
def test_an_unprivileged_engine_isolates_calls(landlock: bool) -> None:
    report = run_as_nobody(ENGINE_RUN, landlock)
    layers, checks = report["layers"], report["checks"]
    assert isinstance(layers, dict) and isinstance(checks, dict)
    for always in ("seccomp", "rlimits", "subreaper", "no_capabilities"):
        assert layers[always]["active"], always
    assert layers["landlock"]["active"] is landlock
    for needs_root in ("identity", "disk_quota", "pids_cgroup"):
        assert not layers[needs_root]["active"] and layers[needs_root]["reason"], needs_root
    # The worker has our uid. Landlock forbids reading our /proc entry across its domain, a
    # private /proc hides it, and without either the engine made itself non-dumpable.
    assert "Permission denied" in checks["environ"] or "No such file" in checks["environ"]
    assert checks["escaper_alive"] is False
    # Without CAP_SYS_NICE a worker could not come back from idle priority: prepared at normal
    # priority instead, and the report says why (sandbox._forking).
    fresh = layers["fresh_process"]
    assert isinstance(fresh, dict) and fresh["fork"] == "libc fork (single-threaded)"
    if resource.getrlimit(resource.RLIMIT_NICE)[0] == 0:
        assert fresh["prepared_at_idle_priority"] is False
        assert "CAP_SYS_NICE" in fresh["idle_priority_reason"]
    if not user_namespaces_allowed():
        assert not layers["user_namespace"]["active"]
        return
    assert layers["user_namespace"]["active"], layers["user_namespace"]
    for name in NAMESPACE_LAYERS:
        assert layers[name]["active"], (name, layers[name])
    assert checks["uid"] == 0  # root of the user namespace, our uid outside, no capabilities
    assert checks["pids"] == ["1"]
    # Root of the user namespace, yet the system's directories are read-only; what it writes
    # elsewhere lands in its own run layer, gone with it.
    assert "Read-only file system" in checks["etc"]
    assert layers["writable_root"]["active"], layers["writable_root"]
    assert checks["mnt"] == "layer" and not os.path.exists("/mnt/a2e-attack")
