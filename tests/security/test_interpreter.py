"""Interpreter-level attacks: the worker's own pipe, its fds, its death, its environment."""

from __future__ import annotations

import os
import time

import pytest

from tests.conftest import SECRET
from tests.security.harness import FIND_PIPES, Attacker, Sandbox, attack

FRAMES = "frame checks: length-framed JSON, capped, validated, never unpickled"


def _pipe_attack(write: str) -> str:
    return (
        FIND_PIPES
        + f"\nfor fd in pipes:\n    try:\n        os.write(fd, {write})\n"
        + ("    except OSError:\n        pass\n")
    )


def _framed(body: str) -> str:
    return f"(lambda b: struct.pack('>I', len(b)) + b)({body})"


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        ("b'\\xff\\xff\\xff\\xff' + b'x' * 100", "exceeds the limit"),
        ("struct.pack('>I', 7) + b'garbage'", "not valid UTF-8 JSON"),
        (
            "struct.pack('>I', 20) + b'\\x80\\x04\\x95' + b'cos\\nsystem\\n.' + b'\\x00' * 5",
            "not valid UTF-8 JSON",
        ),
        ("struct.pack('>I', 2) + b'[]'", "must hold a JSON object"),
        (_framed('b\'{"t": "event", "kind": "progress", "data": {"pct": 500}}\''), "invalid event"),
        (_framed('b\'{"t": "shell"}\''), "unknown type"),
        ("struct.pack('>I', 100_000) + b'{\"t\"'", "cut short"),
        ("struct.pack('>I', 100_000) + b'[' * 100_000", "nested too deeply"),
    ],
    ids=[
        "oversized",
        "garbage",
        "pickle",
        "not-an-object",
        "bad-event",
        "unknown-type",
        "cut-short",
        "deep-nesting",
    ],
)
@attack("hostile frames on the worker's pipe", full=FRAMES, reduced=FRAMES)
def test_hostile_frames(attacker: Attacker, payload: str, why: str) -> None:
    result = attacker.attack(_pipe_attack(payload))
    assert not result.success and result.error_code == "tool_error"
    assert why in (result.error or ""), result.error
    # Too large a frame is a cap the worker broke; any other is a break of the protocol.
    broke = "output_limit" if why == "exceeds the limit" else "worker_violation"
    assert result.reason == broke, result


@attack(
    "a forged result, then a second one (for another call)",
    full=FRAMES + "; anything after a result fails the call",
    reduced=FRAMES,
)
def test_forged_results(attacker: Attacker) -> None:
    forged = _framed('b\'{"t": "result", "ok": true, "data": {"forged": true}}\'')
    result = attacker.attack(_pipe_attack(f"{forged} + {forged}"))
    assert not result.success and "after its result" in (result.error or ""), result.error
    assert "forged" not in str(result.data)


@attack(
    "closing or replacing the pipe fds",
    full="the supervisor reads its own end: EOF without a result fails the call",
    reduced="the same",
)
def test_closing_or_replacing_the_pipe(attacker: Attacker) -> None:
    result = attacker.attack("import os\nos.closerange(3, 1 << 20)")
    assert not result.success and "before sending a result" in (result.error or "")
    replace = (
        "import os\nr, w = os.pipe()\nfor fd in os.listdir('/proc/self/fd'):\n"
        "    if int(fd) > 2 and int(fd) not in (r, w):\n"
        "        try: os.dup2(r, int(fd))\n        except OSError: pass"
    )
    result = attacker.attack(replace)
    assert not result.success and "before sending a result" in (result.error or "")


@attack(
    "hide the pipe and hang",
    full="EOF without exit: killed after a short grace",
    reduced="the same",
)
def test_hide_the_pipe_and_hang(attacker: Attacker) -> None:
    started = time.monotonic()
    result = attacker.attack("import os, time\nos.closerange(3, 1 << 20)\ntime.sleep(60)")
    assert time.monotonic() - started < 3
    assert "without sending a result and did not exit" in (result.error or "")


@pytest.mark.parametrize(
    ("code", "why"),
    [
        ("import ctypes\nctypes.string_at(0)", "segmentation fault (SIGSEGV)"),
        ("import os\nos._exit(3)", "exited with code 3 before sending a result"),
        ("import ctypes\nctypes.memset(0x10000, 0xff, 1 << 20)", "(SIG"),
        ("import os\nos.abort()", "(SIG"),
    ],
    ids=["segfault", "os._exit", "write-garbage", "abort"],
)
@attack(
    "the worker dies (segfault, os._exit, garbage in memory, abort)",
    full="one process per call: only that call fails, clearly",
    reduced="the same",
)
def test_worker_deaths(attacker: Attacker, code: str, why: str) -> None:
    result = attacker.attack(code)
    assert not result.success and why in (result.error or ""), result.error


@attack(
    "deep recursion",
    full="RecursionError, MemoryError or a crash: contained to the call",
    reduced="the same",
)
def test_deep_recursion(attacker: Attacker) -> None:
    code = "import sys\nsys.setrecursionlimit(10**7)\ndef f(n): return f(n + 1)\nf(0)"
    # It recurses for as long as it is let (20 s, a GiB of frames): 5 s shows it contained.
    assert not attacker.attack(code, timeout=5).success


@attack(
    "the supervisor's environment",
    full="scrubbed environment, zeroed environ block; private /proc shows only the call",
    reduced="scrubbed environment, zeroed environ block; no capabilities: the host's "
    "/proc/<pid>/environ needs CAP_SYS_PTRACE from a worker with fewer capabilities",
)
def test_the_supervisors_environment(sandbox: Sandbox, attacker: Attacker) -> None:
    assert os.environ["A2E_TEST_SECRET"] == SECRET
    own = (  # a session uid may not even read its own environ block: it is not dumpable
        f"import os\nfound = [k for k, v in os.environ.items() if {SECRET!r} in v]\n"
        "try:\n    block = open('/proc/self/environ', 'rb').read()\n"
        "except PermissionError:\n    block = b''\n"
        f"found += ['self'] if {SECRET!r}.encode() in block else []\nfound"
    )
    assert attacker.attack(own).data["value"] == []
    host = f"{SECRET!r}.encode() in open('/proc/{os.getpid()}/environ', 'rb').read()"
    result = attacker.attack(host)
    if sandbox.has("private_proc"):
        assert not result.success and "No such file" in (result.error or "")
        pids = attacker.attack(
            "import os\nsorted(int(p) for p in os.listdir('/proc') if p.isdigit())"
        )
        assert pids.data["value"] == [1]
    else:
        assert not result.success and "PermissionError" in (result.error or ""), result.error


@attack(
    "inherited fds, the host's argv and authkey",
    full="fds closed in the worker; the zygote is started clean (a fresh interpreter, no fork)",
    reduced="the same",
)
def test_nothing_inherited(attacker: Attacker) -> None:
    """multiprocessing's authkey is random per interpreter and inherited across fork: a worker
    that had the supervisor's could talk to any of its multiprocessing listeners."""
    import multiprocessing

    result = attacker.attack(
        "import os, sys, multiprocessing\n[sorted(int(fd) for fd in os.listdir('/proc/self/fd')),"
        " sys.argv, multiprocessing.current_process().authkey.hex()]"
    )
    fds, argv, authkey = result.data["value"]
    assert fds[:3] == [0, 1, 2] and len(fds) <= 5, fds
    assert argv == ["a2e-zygote"]
    assert authkey != bytes(multiprocessing.current_process().authkey).hex()


@attack(
    "SysV shared memory and memfd (memory outside RLIMIT_AS)",
    full="seccomp compute profile; IPC namespace per worker",
    reduced="seccomp compute profile",
)
def test_ipc_and_memfd(attacker: Attacker) -> None:
    code = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "assert libc.shmget(0x5A2E, 1 << 20, 0o1666) == -1\nctypes.get_errno()"
    )
    assert attacker.attack(code).data["value"] == 1
    result = attacker.attack("import os\nos.memfd_create('x')")
    assert not result.success and "PermissionError" in (result.error or "")


@attack(
    "read other processes' memory through /proc/<pid>/mem (zygote, supervisor, another call)",
    full="private /proc: no other process is visible",
    reduced="no capabilities and non-dumpable workers and zygote: /proc/<pid>/mem needs "
    "CAP_SYS_PTRACE",
)
def test_other_processes_memory(sandbox: Sandbox, attacker: Attacker) -> None:
    other = sandbox.victim.start(tool_name="sleep", arguments={"seconds": 2}, timeout=20)
    time.sleep(0.5)
    code = (
        "import os\nopened, seen = [], 0\n"
        "for pid in (p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()):\n"
        "    seen += 1\n"
        "    try:\n        open(f'/proc/{pid}/mem', 'rb').close()\n        opened.append(pid)\n"
        "    except OSError:\n        pass\n[seen, opened]"
    )
    result = attacker.attack(code)
    assert result.success, result.error
    seen, opened = result.data["value"]
    assert opened == []
    if sandbox.has("private_proc"):
        assert seen == 0
    else:
        assert seen > 10  # the whole host, and still nothing opened
    other.cancel()
