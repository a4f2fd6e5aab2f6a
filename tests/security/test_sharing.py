"""What calls share, attacked through the real service by one tenant against another.

``a2e serve --http`` runs as a subprocess on 127.0.0.1 with every layer this host has; each
case is a hostile client (a WebSocket session, REST requests, ``/run_code`` requests as
SandboxFusion's clients send them) against another client's session or against what every
session shares: the compile cache and its precompiled headers, pooled sessions and their
uids, the warm interpreter every Python program forks from, the network namespace a zygote's
workers share, the mount table, the CPU between a resident session's calls, and the memory the
whole sandbox holds (docs/isolation.md, "What calls share"). Every case here succeeded on the
engine before these defences, and must fail now.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import textwrap
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import psutil
import pytest

from a2e import A2EClient
from a2e.caps.tools import ToolAPI
from a2e.transports import WebSocketTransport
from a2e_engine.tools._compile_cache import CompileCache
from a2e_engine.tools._languages import LANGUAGES
from tests.security.harness import attack
from tests.service_process import ServiceProcess

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="every layer needs root here")

TOKEN = "s3cret-sharing"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

#: Run as a /run_code Python program (a fork of the run_code worker): the compile cache's
#: directories, found in the worker's frames beneath the program's own.
FIND_CACHE = """
import sys
frame = sys._getframe()
while frame is not None and not hasattr(frame.f_locals.get("self"), "plugin_dirs"):
    frame = frame.f_back
ENTRIES, PCH = frame.f_locals["self"].plugin_dirs
"""


@pytest.fixture(scope="module")
def service() -> Iterator[ServiceProcess]:
    server = ServiceProcess("--token", TOKEN, "--max-workers", "4", "--call-timeout-s", "60")
    yield server
    server.stop()


def _run_code(service: ServiceProcess, code: str, language: str = "python", **more: Any) -> Any:
    """One ``POST /run_code``, as SandboxFusion's clients send it: a session of its own."""
    body = {"language": language, "code": code, "run_timeout": 20, **more}
    answer = httpx.post(f"{service.url}/run_code", json=body, headers=AUTH, timeout=90)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _printed(result: Any) -> str:
    run = result["run_result"] or {}
    return str(run.get("stdout", "")) + str(run.get("stderr", ""))


def _rest(service: ServiceProcess, tool: str, arguments: dict[str, Any]) -> Any:
    answer = httpx.post(
        f"{service.url}/v1/tools/{tool}",
        json={"arguments": arguments, "timeout": 30},
        headers=AUTH,
        timeout=90,
    )
    return answer.json()


def _session(service: ServiceProcess) -> ToolAPI:
    """A WebSocket session of its own, with the project's own client."""
    return ToolAPI(A2EClient(WebSocketTransport(service.ws_url, token=TOKEN)))


def _victim_source(mark: str) -> str:
    return f'#include <stdio.h>\nint main() {{ puts("{mark}"); return 0; }}\n'


def _entry_key(source: str) -> str:
    return CompileCache.key(LANGUAGES["c"], source, {})


def _victims_program(service: ServiceProcess, mark: str) -> tuple[str, str]:
    """A C program a victim's request compiles, so that the cache holds it; and its key."""
    source = _victim_source(mark)
    assert _printed(_run_code(service, source, language="c")).strip() == mark
    return source, _entry_key(source)


def _assert_genuine_hit(service: ServiceProcess, source: str, mark: str) -> None:
    """The same program, sent again, is a hit, and runs the binary its own compile made."""
    again = _run_code(service, source, language="c")
    assert again["compile_result"]["cached"] is True and _printed(again).strip() == mark, again


#: An entry an attacker would plant: a shell script named like the C program's binary, and a
#: manifest that vouches for it.
PLANTED = b"#!/bin/sh\necho PLANTED-BY-ANOTHER-TENANT\n"
MANIFEST = json.dumps(
    {
        "format": 1,
        "result": {"status": "Finished", "return_code": 0, "stdout": "", "stderr": ""},
        "outputs": {
            "main": {
                "size": len(PLANTED),
                "sha256": hashlib.sha256(PLANTED).hexdigest(),
                "mode": 0o755,
            }
        },
    }
).encode()

#: Run in a ``run_shell`` of the attacker's session: once ``run_code`` makes its run directory
#: in the workspace and starts writing the first of its files (every path checked by then),
#: put a link to ``TARGET`` where the next ones go.
LINK_WHILE_WRITING = """
import ctypes, os, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)
watch = libc.inotify_init()
libc.inotify_add_watch(watch, os.getcwd().encode(), 0x100)
print("armed", flush=True)
run, deadline = None, time.monotonic() + 25
while time.monotonic() < deadline:
    data = os.read(watch, 65536)
    at = 0
    while at < len(data):
        _, _, _, size = struct.unpack_from("iIII", data, at)
        name = data[at + 16 : at + 16 + size].rstrip(b"\\0").decode()
        at += 16 + size
        if run is None and name.startswith("run-"):
            run = name
            libc.inotify_add_watch(watch, os.path.join(os.getcwd(), run).encode(), 0x100)
        elif run is not None and name == "pad":
            os.symlink(TARGET, os.path.join(os.getcwd(), run, "d"))
            print("linked", flush=True)
            sys.exit(0)
"""


def _encoded(data: bytes) -> str:
    return base64.b64encode(data).decode()


@attack(
    "plant a compile cache entry through files that follow a link",
    full="the supervisor alone writes the cache; files are written beneath the run directory "
    "without following links",
    reduced="not run: the service runs with every layer",
)
def test_files_cannot_plant_an_entry_in_the_cache_through_a_link(service: ServiceProcess) -> None:
    mark = f"honest-{os.urandom(4).hex()}"
    source = _victim_source(mark)
    found = _run_code(service, FIND_CACHE + "print(ENTRIES)")
    entries = _printed(found).strip()
    assert "entries-" in entries, found
    key = _entry_key(source)
    attacker = _session(service)
    try:
        script = f"TARGET = {entries!r}\n" + LINK_WHILE_WRITING
        shell = attacker.start(
            "run_shell", {"command": f"python3 - <<'EOF'\n{script}\nEOF"}, timeout=30
        )
        time.sleep(1.5)  # the watcher arms
        files = {
            "pad": _encoded(os.urandom(5 << 20)),  # written first: the link goes in meanwhile
            f"d/{key}/main": _encoded(PLANTED),
            f"d/{key}/compile_result.json": _encoded(MANIFEST),
        }
        attacker.call(
            "run_code", {"language": "python", "code": "print(1)", "files": files}, timeout=60
        )
        linked = shell.result(timeout=40)
        assert "armed" in str(linked.data), linked
    finally:
        attacker.client.close()
    victim = _run_code(service, source, language="c")
    assert victim["compile_result"]["cached"] is False, victim
    assert _printed(victim).strip() == mark, victim


@attack(
    "list, read, change or plant in the compile cache whose paths a warm fork learns",
    full="landlock (files by name only) and the cache's owner and modes (0711, 0444)",
    reduced="not run: the service runs with every layer",
)
def test_a_program_that_learns_where_the_cache_is_can_change_nothing(
    service: ServiceProcess,
) -> None:
    secret = f"victims-secret-{os.urandom(4).hex()}"
    source, key = _victims_program(service, secret)
    fake = "f" * 64
    program = FIND_CACHE + textwrap.dedent(
        f"""
        import os
        entry = os.path.join(ENTRIES, {key!r})
        attempts = {{
            "list": lambda: os.listdir(ENTRIES),
            "list pch": lambda: os.listdir(PCH),
            "plant": lambda: os.mkdir(os.path.join(ENTRIES, {fake!r})),
            "write": lambda: open(os.path.join(entry, "main"), "r+b").write(b"x"),
            "chmod": lambda: os.chmod(os.path.join(entry, "main"), 0o666),
            "chmod entry": lambda: os.chmod(entry, 0o777),
            "rename": lambda: os.rename(entry, os.path.join(ENTRIES, "aside")),
            "pch": lambda: open(os.path.join(PCH, "planted"), "w").write("x"),
        }}
        for name, act in attempts.items():
            try:
                act()
                print("DONE", name)
            except OSError as exc:
                print("refused", name, type(exc).__name__)
        """
    )
    printed = _printed(_run_code(service, program))
    assert "DONE" not in printed and printed.count("refused") == 8, printed
    _assert_genuine_hit(service, source, secret)


@attack(
    "chmod what an earlier request left in the cache, from the pooled uid that stored it",
    full="the supervisor writes every entry as the engine's uid",
    reduced="not run: the service runs with every layer",
)
def test_a_pooled_uid_cannot_change_what_an_earlier_request_left_in_the_cache(
    service: ServiceProcess,
) -> None:
    mark = f"pooled-{os.urandom(4).hex()}"
    source, key = _victims_program(service, mark)
    program = FIND_CACHE + textwrap.dedent(
        f"""
        import os
        entry = os.path.join(ENTRIES, {key!r})
        try:
            os.chmod(os.path.join(entry, "main"), 0o666)
            os.chmod(os.path.join(entry, "compile_result.json"), 0o666)
            print("CHANGED by uid", os.getuid())
        except OSError as exc:
            print("refused", type(exc).__name__)
        """
    )
    # Each request gets a pooled session in turn, one of them the uid of the first request.
    for _ in range(6):
        assert "CHANGED" not in _printed(_run_code(service, program))
    _assert_genuine_hit(service, source, mark)


RECEIVE_A_DESCRIPTOR = """
import array, ctypes, os, socket
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
try:
    a.bind(b"\\0" + NAME.encode())
    ctypes.CDLL(None).connect(a.fileno(), ctypes.create_string_buffer(16), 16)  # AF_UNSPEC
    a.settimeout(6)
    message, extra, _, _ = a.recvmsg(4096, socket.CMSG_SPACE(8))
    fds = [fd for level, kind, data in extra for fd in array.array("i", data)]
    print("RECEIVED", len(fds), "descriptors:", os.listdir(fds[0]) if fds else [])
except OSError as exc:
    print("receiver refused", type(exc).__name__, exc)
"""

SEND_MY_WORKSPACE = """
import array, os, socket, time
open("secret.txt", "w").write("mine")
workspace = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
s, t = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
for _ in range(20):
    try:
        s.sendmsg([b"here"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [workspace]))],
                  0, b"\\0" + NAME.encode())
        print("SENT")
        break
    except OSError as exc:
        why = exc
        time.sleep(0.2)
else:
    print("sender refused", type(why).__name__)
"""


@attack(
    "pass another session a descriptor of one's workspace through an abstract unix socket",
    full="seccomp (no bind, connect or SO_PASSCRED without the network profile) and "
    "scoped_ipc (Landlock scopes abstract sockets to each worker)",
    reduced="not run: the service runs with every layer",
)
@pytest.mark.parametrize("pair", ["run_code to run_code", "python_session to python_eval"])
def test_no_abstract_socket_between_sessions(service: ServiceProcess, pair: str) -> None:
    name = f"a2e-attack-{os.urandom(4).hex()}"
    receiver, sender = (
        f"NAME = {name!r}\n" + RECEIVE_A_DESCRIPTOR,
        f"NAME = {name!r}\n" + SEND_MY_WORKSPACE,
    )
    heard: dict[str, str] = {}

    def receive() -> None:
        if pair == "run_code to run_code":
            heard["out"] = _printed(_run_code(service, receiver))
        else:
            heard["out"] = json.dumps(_rest(service, "python_eval", {"code": receiver}))

    listening = threading.Thread(target=receive)
    listening.start()
    time.sleep(1.5)
    if pair == "run_code to run_code":
        _run_code(service, sender)
    else:
        other = _session(service)
        try:
            other.call("python_session", {"code": sender}, timeout=30)
        finally:
            other.client.close()
    listening.join(timeout=60)
    assert "RECEIVED" not in heard["out"] and "refused" in heard["out"], heard


@attack(
    "read which sessions are open, their ids and uids, in /proc/self/mountinfo",
    full="session directories named apart from session ids; tmpfs mounted without an owner",
    reduced="not run: the service runs with every layer",
)
def test_the_mount_table_names_no_other_session(service: ServiceProcess) -> None:
    victim = _session(service)
    try:
        mine = victim.call("python_session", {"code": "import os\nos.getuid()"}, timeout=30)
        uid = int(mine.data["display"][0]["text/plain"])
        session_id = victim.client.session_id
        table = _printed(_run_code(service, "print(open('/proc/self/mountinfo').read())"))
        assert "tmpfs" in table, table[:500]
        assert session_id not in table and f"uid={uid}" not in table, table
    finally:
        victim.client.close()


#: Run in /run_code: every other session's tmpfs the mount table lists, and what statfs tells
#: of it (how full it is: a channel, if another session can change it and this one read it).
STATFS_OTHERS = """
import os
cwd = os.getcwd()
state = cwd
while os.path.basename(state) != "workspace":
    state = os.path.dirname(state)
state = os.path.dirname(os.path.dirname(os.path.dirname(state)))  # <state>/<guard>/session
others = []
with open("/proc/self/mountinfo") as table:
    for line in table:
        point = line.split()[4]
        if point.startswith(state + "/") and not cwd.startswith(point + "/"):
            others.append(point)
print("OTHERS", len(others))
for point in others:
    try:
        fs = os.statvfs(point)
        print("READ", point, (fs.f_blocks - fs.f_bfree) * fs.f_frsize)
    except OSError as exc:
        print("refused", type(exc).__name__)
"""


@attack(
    "read how full another session's workspace is, as it changes (statfs of its mount point)",
    full="identity: each session's tmpfs lies behind a directory of its own uid, mode 0700",
    reduced="not run: the service runs with every layer",
)
def test_no_session_can_reach_another_sessions_mount_point(service: ServiceProcess) -> None:
    victim = _session(service)
    try:
        wrote = victim.call(
            "python_session", {"code": "open('big', 'wb').write(b'x' * (8 << 20))"}, timeout=30
        )
        assert wrote.success, wrote.error
        printed = _printed(_run_code(service, STATFS_OTHERS))
        assert int(printed.split("OTHERS")[1].split()[0]) >= 1, printed
        assert "READ" not in printed and "refused PermissionError" in printed, printed
    finally:
        victim.client.close()


@attack(
    "burn CPU between a resident session's calls",
    full="the resident worker is stopped between its session's calls",
    reduced="not run: the service runs with every layer",
)
def test_a_resident_session_takes_no_cpu_between_its_calls(service: ServiceProcess) -> None:
    spinner = (
        "import os, threading\ndef spin():\n    while True:\n        pass\n"
        "threading.Thread(target=spin, daemon=True).start()\nos.getuid()"
    )
    session = _session(service)
    try:
        started = session.call("python_session", {"code": spinner}, timeout=30)
        assert started.success, started.error
        uid = int(started.data["display"][0]["text/plain"])
        time.sleep(0.3)
        spent = _cpu_of_uid(uid, seconds=1.5)
        assert spent < 0.15, f"the session's processes spent {spent:.2f} s between calls"
        assert session.call("python_session", {"code": "1"}, timeout=30).success
    finally:
        session.client.close()


def _cpu_of_uid(uid: int, seconds: float) -> float:
    """CPU seconds the processes of ``uid`` spend in ``seconds`` of wall time."""

    def total() -> float:
        spent = 0.0
        for process in psutil.process_iter(["uids", "cpu_times"]):
            uids, times = process.info["uids"], process.info["cpu_times"]
            if uids is not None and times is not None and uids.real == uid:
                spent += times.user + times.system
        return spent

    before = total()
    time.sleep(seconds)
    return total() - before


#: Run in python_eval, which runs the code in its own worker: a share frame written on every
#: pipe it holds (its result pipe among them), offering a planted entry.
FORGE_AN_OFFER = """
import json, os, struct
frame = json.dumps({"t": "share", "what": "entry", "data": {"key": "0" * 64}}).encode()
for fd in range(3, 64):
    try:
        os.write(fd, struct.pack(">I", len(frame)) + frame)
    except OSError:
        pass
"""


@attack(
    "offer something to the shared cache from a tool that owns none",
    full="frames: a share frame from any plugin but the store's owner is a violation",
    reduced="not run: the service runs with every layer",
)
def test_only_the_caches_own_tool_may_offer_to_it(service: ServiceProcess) -> None:
    answer = _rest(service, "python_eval", {"code": FORGE_AN_OFFER})
    assert answer["success"] is False, answer
    assert "offered to share, and its tool shares nothing" in answer["error"], answer


@attack(
    "find another call's data in the memory a warm fork inherits",
    full="fresh_process: jobs go to workers, never through the zygote every fork copies",
    reduced="not run: the service runs with every layer",
)
def test_a_warm_fork_finds_nothing_of_another_call_in_its_memory(service: ServiceProcess) -> None:
    secret = f"SECRET-{os.urandom(6).hex()}"
    assert _rest(service, "python_eval", {"code": f"s = {secret!r}"})["success"]
    _run_code(service, f"print({secret!r})", stdin=secret)
    half = len(secret) // 2
    # Every object the fork holds (its worker's frames, jobs and modules, the zygote's), and
    # each string or bytes they hold, searched for the secret, made here from two halves so
    # that the search's own source does not hold it whole.
    search = textwrap.dedent(
        f"""
        import gc, sys
        wanted = {secret[:half]!r} + {secret[half:]!r}
        found = []
        def look(value):
            if value is not wanted and isinstance(value, (str, bytes)):
                text = value if isinstance(value, str) else value.decode("latin-1")
                if wanted in text:
                    found.append(text[:80])
        frame = sys._getframe()
        while frame is not None:
            for value in list(frame.f_locals.values()):
                look(value)
            frame = frame.f_back
        for holder in gc.get_objects():
            for value in gc.get_referents(holder):
                look(value)
        print("FOUND", len(found), found[:3])
        """
    )
    printed = _printed(_run_code(service, search))
    assert "FOUND 0" in printed, printed
