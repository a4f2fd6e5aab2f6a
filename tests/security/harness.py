"""The attack harness: every case goes through ``Attacker.attack``, which checks the invariants
the suite promises for *every* attack, whatever the case asserts on top:

* the call returns within its timeout plus ``GRACE_S``;
* no process the call started is left (every descendant of the zygote is an idle worker);
* nothing outside the attacking session's workspace changed (another session's workspace, the
  host's ``/tmp`` and ``/root``, ``/etc``, this repository);
* the engine still answers the next call.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from a2e.caps.tools.client import ToolAPI
from a2e.caps.tools.models import ToolResult
from a2e.client import A2EClient
from a2e_engine.engine import Engine

GRACE_S = 3.0
NOISY_TMP_NAMES = ("pytest-", "pip-", "tmp", "a2e-engine-")  # the last: other engines' state
REPO = Path(__file__).resolve().parents[2]

#: Python source run inside a worker: ``pipes`` = the pipe fds it holds (its result pipe).
FIND_PIPES = """
import os, struct
pipes = []
for fd in os.listdir('/proc/self/fd'):
    try:
        if int(fd) > 2 and os.readlink(f'/proc/self/fd/{fd}').startswith('pipe:'):
            pipes.append(int(fd))
    except OSError:
        pass  # listdir's own descriptor, already closed
"""


def attack(name: str, *, full: str, reduced: str) -> pytest.MarkDecorator:
    """Names a case, the layer that stops it with every layer on (``full``), and what still
    stops it, or what is then possible, with the optional layers off (``reduced``)."""
    return pytest.mark.attack(name=name, full=full, reduced=reduced)


@dataclass
class Sandbox:
    """One engine of the suite, in one mode, with a victim session that attacks must not touch."""

    engine: Engine
    mode: str
    victim: ToolAPI
    victim_file: str

    def has(self, layer: str) -> bool:
        return bool(self.engine.layers.get(layer, {}).get("active"))

    def layer(self, layer: str) -> dict[str, Any]:
        return dict(self.engine.layers.get(layer, {}))


def _tree_digest(root: str, limit: int = 2000) -> str:
    """Names, sizes and mtimes under ``root`` (bounded), to notice any change there."""
    digest = hashlib.sha256()
    seen = 0
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in {".git", "__pycache__", ".pytest_cache"})
        for name in sorted(files):
            path = os.path.join(directory, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            digest.update(f"{path}:{info.st_size}:{info.st_mtime_ns}".encode())
            seen += 1
            if seen >= limit:
                return digest.hexdigest()
    return digest.hexdigest()


def outside_view(sandbox: Sandbox) -> dict[str, Any]:
    victim_dir = os.path.dirname(sandbox.victim_file)
    return {
        "victim": (sorted(os.listdir(victim_dir)), Path(sandbox.victim_file).read_bytes()),
        # Names other processes on a shared machine create all the time are left out.
        "host_tmp": sorted(n for n in os.listdir("/tmp") if not n.startswith(NOISY_TMP_NAMES)),
        "root": sorted(os.listdir("/root")),
        "etc": (os.stat("/etc").st_mtime_ns, sorted(os.listdir("/etc"))),
        "repo": _tree_digest(str(REPO / "a2e")) + _tree_digest(str(REPO / "tests")),
    }


def leftover_processes(engine: Engine, wait_s: float = 5.0) -> list[psutil.Process]:
    """Descendants of the zygote that are not idle pre-forked workers, after up to ``wait_s``
    for the call's worker to be reaped (workers that sent their result exit off the call's
    path) and for a worker being forked to become idle."""
    deadline = time.monotonic() + wait_s
    while True:
        assert engine.pool is not None and engine.pool.zygote_pid is not None
        try:
            zygote = psutil.Process(engine.pool.zygote_pid)
            idle = engine.pool.idle_worker_pids()
            left = [p for p in zygote.children(recursive=True) if p.pid not in idle]
        except psutil.NoSuchProcess:
            left = []
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


@dataclass
class Attacker:
    """A session of its own, attacking through tool calls."""

    sandbox: Sandbox
    client: A2EClient
    tools: ToolAPI = field(init=False)

    def __post_init__(self) -> None:
        self.tools = ToolAPI(self.client)

    def call(
        self,
        code: str | None = None,
        *,
        tool: str = "python_eval",
        timeout: float = 10,
        **args: Any,
    ) -> ToolResult:
        """A call without the invariant checks (set-up steps and follow-ups)."""
        arguments = {"code": code, **args} if code is not None else args
        return self.tools.call(tool_name=tool, arguments=arguments, timeout=timeout)

    def attack(
        self,
        code: str | None = None,
        *,
        tool: str = "python_eval",
        timeout: float = 10,
        **args: Any,
    ) -> ToolResult:
        before = outside_view(self.sandbox)
        started = time.monotonic()
        result = self.call(code, tool=tool, timeout=timeout, **args)
        elapsed = time.monotonic() - started
        assert elapsed < timeout + GRACE_S, f"the call took {elapsed:.1f} s (timeout {timeout})"
        left = leftover_processes(self.sandbox.engine)
        assert left == [], f"processes of the call survived it: {left}"
        after = outside_view(self.sandbox)
        changed = {key: (before[key], after[key]) for key in before if before[key] != after[key]}
        assert not changed, f"something outside the workspace changed: {changed}"
        self.still_serving()
        return result

    def still_serving(self) -> None:
        result = self.call("21 * 2")
        assert result.success and result.data["value"] == 42, result.error

    def workspace(self) -> str:
        result = self.call("import os\nos.getcwd()")
        assert result.success, result.error
        return str(result.data["value"])
