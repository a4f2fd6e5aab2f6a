"""The attack harness: every case goes through ``Attacker.attack``, which checks the invariants
the suite promises for *every* attack, whatever the case asserts on top:

* the call returns within its timeout plus ``GRACE_S``;
* no process the call started is left (every descendant of the zygote is an idle worker);
* nothing outside the attacking session's workspace changed: another session's workspace,
  canary files the suite owns in the host's ``/tmp`` and home directory (writable by anyone, so
  that only the sandbox keeps an attack off them), the files attacks aim at, anything named like
  an attack's file in the places attacks write to, and this repository;
* the engine still answers the next call.

Only paths that this suite owns or attacks aim at are compared, never a whole shared directory:
other programs on the machine create and remove files in ``/tmp`` all the time.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import site
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from a2e._client import A2EClient
from a2e.caps.tools._client import ToolAPI
from a2e.caps.tools._models import ToolResult
from a2e_engine.engine import Engine

GRACE_S = 3.0
REPO = Path(__file__).resolve().parents[2]
#: Files that attacks create are named so; nothing else on a machine is.
ATTACK_NAMES = ("a2e-attack", "a2e_attack")
#: Where attacks try to create files (``ATTACK_NAMES``), beside the targets they name.
ATTACKED_DIRS = (
    "/tmp",
    "/etc",
    os.path.expanduser("~"),
    os.path.dirname(os.__file__),
    *site.getsitepackages(),
    str(REPO / "a2e"),
)
#: Existing files attacks try to change.
ATTACKED_FILES = (
    "/proc/sys/kernel/core_pattern",
    "/sys/fs/cgroup/pids/release_agent",
    os.path.join(os.path.expanduser("~"), ".bashrc"),
)

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


class Canaries:
    """Directories of files the suite owns, in the host's ``/tmp`` and home directory: made
    writable by anyone, so that nothing but the sandbox stands between an attack and them."""

    FILES = ("canary.txt", "nested/canary.txt")

    def __init__(self) -> None:
        self.dirs: list[str] = []
        for parent in ("/tmp", os.path.expanduser("~")):
            try:
                directory = tempfile.mkdtemp(prefix="a2e-canary-", dir=parent)
            except OSError:
                continue  # not ours to write to (a home directory of another user)
            for name in self.FILES:
                path = os.path.join(directory, name)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as fh:
                    fh.write(f"canary {name}\n")
                os.chmod(path, 0o666)
            for folder in (directory, os.path.join(directory, "nested")):
                os.chmod(folder, 0o777)
            self.dirs.append(directory)

    @property
    def files(self) -> list[str]:
        return [os.path.join(d, name) for d in self.dirs for name in self.FILES]

    def remove(self) -> None:
        for directory in self.dirs:
            shutil.rmtree(directory, ignore_errors=True)


@dataclass
class Sandbox:
    """One engine of the suite, in one mode, with a victim session that attacks must not touch."""

    engine: Engine
    mode: str
    victim: ToolAPI
    victim_file: str
    canaries: Canaries

    def has(self, layer: str) -> bool:
        return self.engine.layers.active(layer)

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


def _fingerprint(path: str) -> str:
    """Type, mode, size, modification time and (for a small regular file) content."""
    info = os.lstat(path)
    mark = f"{info.st_mode:o}:{info.st_size}:{info.st_mtime_ns}"
    if os.path.isfile(path) and info.st_size <= 1 << 16 and not path.startswith("/proc/"):
        with open(path, "rb") as fh:
            mark += ":" + hashlib.sha256(fh.read()).hexdigest()[:16]
    return mark


def _under(root: str) -> list[str]:
    found = [root]
    for directory, dirs, files in os.walk(root):
        found += [os.path.join(directory, name) for name in (*dirs, *files)]
    return found


def outside_view(sandbox: Sandbox) -> dict[str, str]:
    """A fingerprint of every watched path that exists (see the module's docstring)."""
    victim_dir = os.path.dirname(sandbox.victim_file)
    paths = [*_under(victim_dir), *ATTACKED_FILES]
    for canary in sandbox.canaries.dirs:
        paths += _under(canary)
    for directory in ATTACKED_DIRS:
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        paths += [os.path.join(directory, n) for n in names if n.startswith(ATTACK_NAMES)]
    view: dict[str, str] = {}
    for path in dict.fromkeys(paths):
        try:
            view[path] = _fingerprint(path)
        except OSError:
            continue  # not there: its appearance is a change
    view["repository"] = _tree_digest(str(REPO / "a2e")) + _tree_digest(str(REPO / "tests"))
    return view


def changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """What was added, removed or changed between two views, one line each."""
    lines = [f"added {p}" for p in after if p not in before]
    lines += [f"removed {p}" for p in before if p not in after]
    lines += [f"changed {p}" for p in before if p in after and before[p] != after[p]]
    return lines


def leftover_processes(engine: Engine, wait_s: float = 5.0) -> list[psutil.Process]:
    """Descendants of every zygote (each plugin's) that are not idle pre-forked workers nor
    their clean templates (``sandbox._template``: forked before any job), after up to
    ``wait_s`` for the call's worker to be reaped (workers that sent their result exit off the
    call's path) and for a worker being forked to become idle."""
    deadline = time.monotonic() + wait_s
    while True:
        assert engine.pool is not None
        zygotes = [z["pid"] for z in engine.zygotes if z["started"]]
        assert zygotes, "no zygote runs"
        idle = engine.pool.idle_worker_pids()
        left = []
        for pid in zygotes:
            try:
                descendants = psutil.Process(pid).children(recursive=True)
            except psutil.NoSuchProcess:
                continue
            left += [p for p in descendants if p.pid not in idle and _parent(p) not in idle]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def _parent(process: psutil.Process) -> int | None:
    try:
        return process.ppid()
    except psutil.NoSuchProcess:
        return None


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
        changed = changes(before, outside_view(self.sandbox))
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
