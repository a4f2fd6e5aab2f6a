"""An engine killed together with its zygote leaves its state directory (with the sessions'
tmpfs mounts) and its cgroups behind; the next engine to start clears them, and nothing else."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from a2e_engine.sandbox._cgroups import own_path
from a2e_engine.sandbox._leftovers import (
    BOOT_FILE,
    INITIAL_PID_NS,
    boot_id,
    dead_owners,
    mark_boot,
    sweep_state_dirs,
)
from a2e_engine.sandbox._paths import under
from a2e_engine.sandbox._quota import mount_points

pytestmark = pytest.mark.skipif(
    os.stat("/proc/self/ns/pid").st_ino != INITIAL_PID_NS,
    reason="leftovers are only cleared from the initial PID namespace, which sees every owner",
)

#: Run first in each engine process of a test: it joins the cgroups given as its first argument
#: (where its zygote then makes its own), and the state directories go beneath the second.
JOIN = textwrap.dedent(
    """
    import json, os, sys
    for group in json.loads(sys.argv[1]):
        with open(os.path.join(group, "cgroup.procs"), "w") as fh:
            fh.write(str(os.getpid()))
    STATE = sys.argv[2] or None
    """
)

DOOMED = JOIN + textwrap.dedent(
    """
    import json, threading, time
    from a2e.caps.tools._client import ToolAPI
    from a2e_engine.engine import Engine, EngineConfig
    engine = Engine(config=EngineConfig(prefork=1, state_dir=STATE)).start()
    tools = ToolAPI(engine.connect(client_name="doomed"))
    kept = tools.call(tool_name="python_eval", arguments={"code": "open('kept', 'w').write('x')"})
    assert kept.success, kept.error
    # A worker in the middle of its job (it runs as the session's uid by now) ...
    tools.start(tool_name="run_shell", arguments={"command": "sleep 984.75"}, timeout=600)
    # ... and one whose tool cleared its own parent-death signal, to outlive the zygote.
    cleared = threading.Event()
    tools.start(
        tool_name="python_eval",
        arguments={"code": STUBBORN},
        streaming=True,
        on_event=lambda event: cleared.set(),
        timeout=600,
    )
    assert cleared.wait(60)
    layers = engine.pool.layers
    cgroups = [layers[n]["path"] for n in ("pids_cgroup", "memory_cgroup") if layers[n]["active"]]
    print(json.dumps({"state_dir": engine.state_dir, "zygote": engine.pool.zygote_pid,
                      "cgroups": cgroups}), flush=True)
    time.sleep(600)
    """
)


#: Clears the parent-death signal of the worker it runs in, then waits to be killed.
STUBBORN = "import ctypes, time\nctypes.CDLL(None).prctl(1, 0, 0, 0, 0)\nprint('cleared')\n" + (
    "time.sleep(600)"
)
DOOMED = DOOMED.replace("STUBBORN", repr(STUBBORN))

#: The next engine, in the same cgroups and state directory: once started, the leftovers it
#: cleared (or not), then it stops.
NEXT = JOIN + textwrap.dedent(
    """
    import time
    from a2e_engine.engine import Engine, EngineConfig
    from a2e_engine.sandbox._leftovers import owner_tag
    from a2e_engine.sandbox._paths import under
    from a2e_engine.sandbox._quota import mount_points
    left = json.loads(sys.argv[3])
    with Engine(config=EngineConfig(prefork=1, state_dir=STATE)) as fresh:
        deadline = time.monotonic() + 5  # slots empty as the killed workers are reaped
        while any(os.path.exists(p) for p in left["cgroups"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        print(json.dumps({
            "mounted": any(under(point, left["state_dir"]) for point in mount_points()),
            "state_dir": os.path.exists(left["state_dir"]),
            "cgroups": [p for p in left["cgroups"] if os.path.exists(p)],
            "own_state_dir": os.path.isdir(fresh.state_dir)
                and owner_tag() in os.path.basename(fresh.state_dir),
        }), flush=True)
    """
)


@contextlib.contextmanager
def _cgroups_of_its_own() -> Iterator[list[str]]:
    """A pids and a memory cgroup (v1) made for one test, beneath this process's own, removed
    after it: engines started in them make their sandbox's groups there, where no other
    engine on the machine (another test run, say) sweeps them as a dead engine's leftovers."""
    made = []
    name = f"a2e-leftovers-test-{os.getpid()}-{time.monotonic_ns()}"
    for controller in ("pids", "memory"):
        base = f"/sys/fs/cgroup/{controller}"
        if not os.path.isfile(os.path.join(base, "cgroup.procs")):
            continue
        group = os.path.join(base, own_path(controller).lstrip("/"), name)
        os.mkdir(group)
        made.append(group)
    try:
        yield made
    finally:
        for group in made:
            for _ in range(50):  # empty once the engines' processes are reaped
                try:
                    for child in os.scandir(group):
                        if child.is_dir():
                            os.rmdir(child.path)
                    os.rmdir(group)
                    break
                except OSError:
                    time.sleep(0.1)


def _members(groups: list[str]) -> set[int]:
    """Every process in the sandbox groups' slots."""
    pids: set[int] = set()
    for group in groups:
        for root, _dirs, files in os.walk(group):
            if "cgroup.procs" in files:
                with open(os.path.join(root, "cgroup.procs")) as procs:
                    pids.update(int(line) for line in procs if line.strip())
    return pids


def _commands() -> list[str]:
    """The command line of every process on the machine that has one now (a zombie, or one
    that ends meanwhile, has none)."""
    return [" ".join(process.info["cmdline"] or ()) for process in psutil.process_iter(["cmdline"])]


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def _kill_at_once(supervisor_group: int, zygote: int) -> None:
    """SIGKILL the supervisor's process group and the zygote (a session of its own) with
    neither able to act on the other's death first: both stopped, then both killed."""
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        os.killpg(supervisor_group, sig)
        os.killpg(zygote, sig)


def _doomed_engine(
    cgroups: list[str] | None = None, state: str = ""
) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """An engine in a process group of its own (in ``cgroups``, its state directory beneath
    ``state``), with sessions, a worker mid-job and a worker that cleared its parent-death
    signal; what it made, as it printed it."""
    doomed = subprocess.Popen(
        [sys.executable, "-c", DOOMED, json.dumps(cgroups or []), state],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        text=True,
    )
    assert doomed.stdout is not None
    try:
        return doomed, json.loads(doomed.stdout.readline())
    except BaseException:
        os.killpg(doomed.pid, signal.SIGKILL)
        doomed.wait()
        raise


@pytest.mark.skipif(os.geteuid() != 0, reason="session quotas and cgroups need root")
def test_a_supervisor_killed_with_its_process_group_is_cleared_by_its_zygote() -> None:
    """What Ray's raylet does to an actor that died, and a terminal's Ctrl-C to a foreground
    job: its whole process group is signalled. The zygote, a session of its own, outlives it,
    sees its control socket close, and clears the workers, the cgroups and the state directory
    with its session mounts before it exits, with no other engine to start."""
    doomed, left = _doomed_engine()
    zygote = psutil.Process(left["zygote"])
    tree = [zygote, *zygote.children(recursive=True)]
    assert os.getpgid(zygote.pid) != doomed.pid
    os.killpg(doomed.pid, signal.SIGKILL)
    doomed.wait()
    _gone, alive = psutil.wait_procs(tree, timeout=20)
    assert not alive, alive
    assert not any("sleep 984.75" in command for command in _commands())
    assert not any(under(point, left["state_dir"]) for point in mount_points())
    assert not os.path.exists(left["state_dir"])
    assert not any(os.path.exists(path) for path in left["cgroups"]), left["cgroups"]


@pytest.mark.skipif(os.geteuid() != 0, reason="session quotas and cgroups need root")
def test_an_engine_killed_with_its_zygote_is_cleared_by_the_next(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    with _cgroups_of_its_own() as cgroups:
        doomed, left = _doomed_engine(cgroups, state)
        try:
            zygote = psutil.Process(left["zygote"])
            tree = [zygote, *zygote.children(recursive=True)]
        finally:
            _kill_at_once(doomed.pid, left["zygote"])
            doomed.wait()
        _gone, alive = psutil.wait_procs(tree, timeout=10)
        # The worker whose tool cleared its parent-death signal outlived the kill, and only
        # it: the one in the middle of its job died with its zygote, its sleep too.
        assert len(alive) == 1, alive
        stubborn = alive[0]
        assert _members(left["cgroups"]) == {stubborn.pid}
        assert not any("sleep 984.75" in command for command in _commands())
        # What nobody was left to clear: the sessions' files, still mounted, and the cgroups.
        assert any(under(point, left["state_dir"]) for point in mount_points())
        assert all(os.path.isdir(path) for path in left["cgroups"])
        nxt = subprocess.run(
            [sys.executable, "-c", NEXT, json.dumps(cgroups), state, json.dumps(left)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert nxt.returncode == 0, nxt.stderr[-2000:]
        cleared = json.loads(nxt.stdout)
        assert cleared == {
            "mounted": False,
            "state_dir": False,
            "cgroups": [],
            "own_state_dir": True,
        }, cleared
        # Killed by the next engine, with its cgroups (a zombie until init reaps it).
        assert not stubborn.is_running() or stubborn.status() == psutil.STATUS_ZOMBIE


def test_only_what_certainly_belongs_to_a_dead_owner_is_taken(tmp_path: Path) -> None:
    dead, alive = _dead_pid(), os.getpid()
    names = {
        f"a2e-engine-{INITIAL_PID_NS}-{dead}-x1": True,
        f"a2e-engine-{INITIAL_PID_NS}-{dead}": True,
        f"a2e-engine-{INITIAL_PID_NS}-{alive}-x2": False,  # alive (or a reused pid)
        f"a2e-engine-4026532000-{dead}-x3": False,  # another PID namespace: cannot know
        f"a2e-engine-{INITIAL_PID_NS}-{dead}x4": False,  # not our name
        f"other-{INITIAL_PID_NS}-{dead}-x5": False,
    }
    for name in names:
        (tmp_path / name).mkdir()
    (tmp_path / f"a2e-engine-{INITIAL_PID_NS}-{dead}-file").write_text("")  # not a directory
    found = {entry.name for entry in dead_owners(str(tmp_path), "a2e-engine-")}
    assert found == {name for name, taken in names.items() if taken}


def test_a_directory_from_an_earlier_boot_is_taken(tmp_path: Path) -> None:
    """Its pid may belong to anyone now: /var/tmp, where state directories live, outlives a
    reboot."""
    assert boot_id()
    names = {
        f"a2e-engine-{INITIAL_PID_NS}-{os.getpid()}-earlier": True,
        f"a2e-engine-4026532000-{os.getpid()}-earlier": True,  # any PID namespace
        f"a2e-engine-{INITIAL_PID_NS}-{os.getpid()}-this": False,
        f"a2e-engine-{INITIAL_PID_NS}-{os.getpid()}-unmarked": False,
    }
    for name in names:
        (tmp_path / name).mkdir()
        if name.endswith("-this"):
            mark_boot(str(tmp_path / name))
        elif name.endswith("-earlier"):
            (tmp_path / name / BOOT_FILE).write_text("an-earlier-boot\n")
    found = {entry.name for entry in dead_owners(str(tmp_path), "a2e-engine-")}
    assert found == {name for name, taken in names.items() if taken}


@pytest.mark.skipif(os.geteuid() != 0, reason="needs a directory of another uid")
def test_a_dead_owners_directory_of_another_uid_is_left_alone(tmp_path: Path) -> None:
    dead = _dead_pid()
    ours = tmp_path / f"a2e-engine-{INITIAL_PID_NS}-{dead}-ours"
    theirs = tmp_path / f"a2e-engine-{INITIAL_PID_NS}-{dead}-theirs"
    for path in (ours, theirs):
        (path / "session").mkdir(parents=True)
        (path / "session" / "file").write_text("data")
    os.chown(theirs, 65534, 65534)
    assert sweep_state_dirs(str(tmp_path), "a2e-engine-") == [str(ours)]
    assert not ours.exists() and (theirs / "session" / "file").read_text() == "data"
