"""Resource attacks: CPU, memory, processes, threads, disk, files, fds, output, events, signals."""

from __future__ import annotations

import time
import uuid

import pytest

from a2e.caps.tools._client import ToolAPI
from tests.security.harness import FIND_PIPES, Attacker, Sandbox, attack

DEADLINE = "wall-clock deadline (SIGKILL)"


@attack("CPU spin", full=DEADLINE, reduced=DEADLINE)
def test_cpu_spin(attacker: Attacker) -> None:
    started = time.monotonic()
    result = attacker.attack("while True: pass", timeout=1)
    assert time.monotonic() - started >= 0.9
    assert not result.success and "timed out after 1 s" in (result.error or "")
    assert result.usage is not None and result.usage.signal == "SIGKILL"


@attack("sleep forever", full=DEADLINE, reduced=DEADLINE)
def test_sleep(attacker: Attacker) -> None:
    result = attacker.attack("print('so far')\nimport time\ntime.sleep(600)", timeout=1)
    assert not result.success and "timed out" in (result.error or "")
    assert result.data == {"stdout": "so far\n"}  # partial output kept


@attack("SIGTERM ignored", full=DEADLINE, reduced=DEADLINE)
def test_sigterm_ignored(attacker: Attacker) -> None:
    code = "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: pass"
    result = attacker.attack(code, timeout=1)
    assert not result.success and result.usage is not None and result.usage.signal == "SIGKILL"


@attack(
    "the worker stops itself (SIGSTOP)",
    full="PID namespace: pid 1 ignores its own SIGSTOP, the call goes on",
    reduced="the worker stops; the deadline's SIGKILL still ends it",
)
def test_worker_stops_itself(sandbox: Sandbox, attacker: Attacker) -> None:
    code = "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)\nprint('resumed')"
    result = attacker.attack(code, timeout=2)
    if sandbox.has("pid_namespace"):
        assert result.success and result.data["stdout"] == "resumed\n"
    else:
        assert not result.success and "timed out" in (result.error or "")


@attack(
    "stopped and SIGTERM-ignoring children",
    full="PID namespace (they die with the worker)",
    reduced="zygote as subreaper kills the orphans",
)
def test_stopped_and_stubborn_children(attacker: Attacker) -> None:
    result = attacker.attack(tool="stubborn_children", marker=uuid.uuid4().hex[:8], timeout=2)
    assert not result.success and "timed out" in (result.error or "")


@pytest.mark.parametrize(
    "code",
    [
        "x = bytearray(8 * 1024**3)",
        "chunks = []\nwhile True:\n    chunks.append(bytearray(10 * 1024**2))",
        "chunks = []\nwhile True:\n    chunks.append('x' * 100000)",
    ],
    ids=["one-big-allocation", "many-10MiB", "many-small"],
)
@attack("memory bomb", full="RLIMIT_AS (MemoryError)", reduced="RLIMIT_AS (MemoryError)")
def test_memory_bomb(attacker: Attacker, code: str) -> None:
    result = attacker.attack(code, timeout=20)
    assert not result.success and result.error == "out of memory (MemoryError)"
    assert result.reason == "out_of_memory", result
    peak = result.usage.peak_rss_kb if result.usage else None
    assert peak is not None and 0 < peak < 1100 * 1024


@attack(
    "memory outside RLIMIT_AS (memfd pages)",
    full="memory cgroup: OOM kill, reported as out of memory",
    reduced="NOT capped: held until the call ends, then freed",
)
def test_memory_outside_the_address_space_limit(sandbox: Sandbox, attacker: Attacker) -> None:
    limit = sandbox.engine.config.limits.call_memory_mb
    result = attacker.attack(tool="hold_memory", mb=limit + 512, timeout=30)
    if sandbox.has("memory_cgroup"):
        assert not result.success
        assert f"went past its {limit} MiB memory limit" in (result.error or ""), result.error
        assert result.reason == "out_of_memory", result
    else:
        assert result.success, result.error


@attack("fork bomb in python_eval", full="seccomp compute profile", reduced="seccomp")
def test_fork_bomb_in_python_eval(attacker: Attacker) -> None:
    result = attacker.attack("import os\nwhile True:\n    os.fork()", timeout=5)
    assert not result.success and "PermissionError" in (result.error or "")
    result = attacker.attack("import subprocess\nsubprocess.run(['true'])", timeout=5)
    assert not result.success and "PermissionError" in (result.error or "")


@attack(
    "fork bomb in a process tool",
    full="pids cgroup (and RLIMIT_NPROC of the session uid): fork fails with EAGAIN",
    reduced="NOT capped per call: bounded by the deadline; the subreaper kills every child",
)
def test_fork_bomb_in_a_process_tool(sandbox: Sandbox, attacker: Attacker) -> None:
    marker = uuid.uuid4().hex[:8]
    if sandbox.has("pids_cgroup"):
        result = attacker.attack(
            tool="fork_storm", count=10_000, hold=False, marker=marker, timeout=30
        )
        assert result.success, result.error
        assert result.data["children"] < sandbox.layer("pids_cgroup")["per_call"]
        assert "Resource temporarily unavailable" in result.data["refused"]
    else:  # a bounded storm: without a cap, 10,000 would reach the host
        result = attacker.attack(tool="fork_storm", count=200, marker=marker, timeout=3)
        assert not result.success and "timed out" in (result.error or "")


@attack(
    "thread bomb",
    full="RLIMIT_AS (thread stacks), pids cgroup",
    reduced="RLIMIT_AS (thread stacks)",
)
def test_thread_bomb(attacker: Attacker) -> None:
    code = (
        "import threading, time\nthreads = []\n"
        "while True:\n    t = threading.Thread(target=time.sleep, args=(30,), daemon=True)\n"
        "    t.start()\n    threads.append(t)"
    )
    result = attacker.attack(code, timeout=10)
    assert not result.success and "can't start new thread" in (result.error or "")


@attack(
    "thread bomb with tiny stacks, beside another session",
    full="pids cgroup per call: the bomb stops at its own cap, the bystander runs",
    reduced="not run: without a pids cgroup only RLIMIT_AS bounds it (tens of thousands)",
)
def test_thread_bomb_does_not_starve_others(sandbox: Sandbox, attacker: Attacker) -> None:
    if not sandbox.has("pids_cgroup"):
        pytest.skip("no per-call process cap without the pids cgroup: " + sandbox.mode)
    bomb = (
        "import ctypes, threading, time\nctypes.CDLL(None).mallopt(-8, 1)\n"
        "threading.stack_size(64 * 1024)\nn = 0\n"
        "try:\n    while True:\n"
        "        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
        "        n += 1\nexcept RuntimeError:\n    pass\nprint(n, flush=True)\ntime.sleep(30)"
    )
    pending = attacker.tools.start(tool_name="python_eval", arguments={"code": bomb}, timeout=4)
    time.sleep(1.0)
    bystander = ToolAPI(sandbox.engine.connect(client_name="bystander"))
    code = "import threading\nt = threading.Thread(target=print)\nt.start()\nt.join()\n'fine'"
    result = bystander.call(tool_name="python_eval", arguments={"code": code})
    assert result.success and result.data["value"] == "fine", result.error
    bombed = pending.result()
    assert not bombed.success and "timed out" in (bombed.error or "")
    assert int(bombed.data["stdout"]) < sandbox.layer("pids_cgroup")["per_call"]
    bystander.client.close()
    attacker.still_serving()


FILL = """
import errno, os
total, err = 0, None
chunk = b'x' * (1 << 20)
try:
    with open(os.path.join({where}, 'fill'), 'wb') as fh:
        while total < {cap_mb} * 2 * (1 << 20):
            fh.write(chunk)
            fh.flush()
            total += len(chunk)
except OSError as exc:
    err = errno.errorcode[exc.errno]
[total >> 20, err]
"""


@attack(
    "disk fill in tmp",
    full="private /tmp: a size-capped tmpfs, ENOSPC",
    reduced="RLIMIT_FSIZE: EFBIG at the file size limit (per file only)",
)
def test_disk_fill_in_tmp(sandbox: Sandbox, attacker: Attacker) -> None:
    limits = sandbox.engine.config.limits
    cap = max(limits.tmp_mb, limits.file_size_mb)
    result = attacker.attack(FILL.format(where="os.environ['TMPDIR']", cap_mb=cap), timeout=30)
    assert result.success, result.error
    written_mb, err = result.data["value"]
    if sandbox.has("private_tmp"):
        assert err == "ENOSPC" and written_mb <= limits.tmp_mb
    else:
        assert err == "EFBIG" and written_mb == limits.file_size_mb


@attack(
    "disk fill in the workspace",
    full="workspace quota (tmpfs per session): ENOSPC",
    reduced="RLIMIT_FSIZE: EFBIG at the file size limit (per file only)",
)
def test_disk_fill_in_the_workspace(sandbox: Sandbox, attacker: Attacker) -> None:
    limits = sandbox.engine.config.limits
    quota = sandbox.layer("disk_quota").get("workspace_mb", 0)
    cap = max(quota, limits.file_size_mb)
    result = attacker.attack(FILL.format(where="'.'", cap_mb=cap), timeout=60)
    assert result.success, result.error
    written_mb, err = result.data["value"]
    if sandbox.has("disk_quota"):
        assert err == "ENOSPC" and written_mb <= quota
    else:
        assert err == "EFBIG" and written_mb == limits.file_size_mb
    assert attacker.call("import os\nos.remove('fill')").success


MANY_FILES = """
import errno, os
os.makedirs({where}, exist_ok=True)
made, err = 0, None
try:
    while made < {count}:
        open(os.path.join({where}, str(made)), 'w').close()
        made += 1
except OSError as exc:
    err = errno.errorcode[exc.errno]
[made, err]
"""


@attack(
    "many small files in tmp",
    full="private /tmp: inode cap of the tmpfs, ENOSPC",
    reduced="NOT capped (host inodes); removed with the call's tmp directory",
)
def test_many_small_files(sandbox: Sandbox, attacker: Attacker) -> None:
    code = MANY_FILES.format(where="os.environ['TMPDIR'] + '/many'", count=10_000)
    result = attacker.attack(code, timeout=60)
    assert result.success, result.error
    made, err = result.data["value"]
    if sandbox.has("private_tmp"):
        assert err == "ENOSPC" and made < 10_000
    else:
        assert (made, err) == (10_000, None)


@attack("fd exhaustion", full="RLIMIT_NOFILE: EMFILE", reduced="RLIMIT_NOFILE: EMFILE")
def test_fd_exhaustion(sandbox: Sandbox, attacker: Attacker) -> None:
    code = (
        "import errno, os\nfds = []\ntry:\n    while True:\n"
        "        fds.append(os.open('/dev/null', os.O_RDONLY))\n"
        "except OSError as exc:\n    err = errno.errorcode[exc.errno]\n[len(fds), err]"
    )
    result = attacker.attack(code)
    opened, err = result.data["value"]
    assert err == "EMFILE" and opened < sandbox.engine.config.limits.open_files


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
@attack(
    "output flood (print)",
    full="python_eval keeps 1,000,000 characters per stream, marks the result truncated",
    reduced="the same",
)
def test_output_flood(attacker: Attacker, stream: str) -> None:
    code = f"import sys\nfor _ in range(400):\n    sys.{stream}.write('x' * 65536)"
    result = attacker.attack(code, timeout=30)
    assert result.success and result.truncated
    assert len(result.data[stream]) < 1_001_000 and "omitted" in result.data[stream]


@attack(
    "output flood on the raw pipe",
    full="the pool's output cap per call: the worker is killed",
    reduced="the same",
)
def test_raw_output_flood(sandbox: Sandbox, attacker: Attacker) -> None:
    code = (
        FIND_PIPES
        + """
import json
body = json.dumps({"t": "event", "kind": "artifact",
                   "data": {"name": "x", "chunk": "x" * 500_000}}).encode()
while True:
    os.write(pipes[0], struct.pack('>I', len(body)) + body)
"""
    )
    result = attacker.attack(code, timeout=30)
    cap = sandbox.engine.config.output.max_output_bytes
    assert not result.success and f"more than {cap} bytes of output" in (result.error or "")
    assert result.reason == "output_limit", result


@attack(
    "event flood",
    full="events past the cap are dropped; ten times the cap and the worker is killed",
    reduced="the same",
)
def test_event_flood(sandbox: Sandbox, attacker: Attacker) -> None:
    cap = sandbox.engine.config.output.max_events
    code = (
        FIND_PIPES
        + """
body = b'{"t":"event","kind":"log","data":{"level":"info","message":"x"}}'
frame = struct.pack('>I', len(body)) + body
while True:
    os.write(pipes[0], frame * 100)
"""
    )
    result = attacker.attack(code, timeout=30)
    assert not result.success and f"times the {cap}-event cap" in (result.error or ""), result.error
    assert result.reason == "output_limit", result
