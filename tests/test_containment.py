"""Attacks through the public interface. Each asserts what "contained" means for it, that the
call returned within its timeout plus a grace, and that the engine still answers afterwards."""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest

from a2e.caps.tools.client import ToolAPI
from a2e.caps.tools.models import ToolResult
from engine import Engine
from tests.conftest import FIND_PIPES, SECRET, processes_in, workspace_of

GRACE_S = 3.0


def run(tools: ToolAPI, code: str, timeout: float = 10) -> ToolResult:
    started = time.monotonic()
    result = tools.call(tool_name="python_eval", arguments={"code": code}, timeout=timeout)
    assert time.monotonic() - started < timeout + GRACE_S
    return result


def still_serving(tools: ToolAPI) -> None:
    result = tools.call(tool_name="python_eval", arguments={"code": "21 * 2"})
    assert result.success and result.data["value"] == 42, result.error


@pytest.mark.parametrize("code", ["while True: pass", "import time\ntime.sleep(60)"])
def test_spin_and_sleep_are_killed_at_the_deadline(tools: ToolAPI, code: str) -> None:
    started = time.monotonic()
    result = run(tools, code, timeout=1)
    assert time.monotonic() - started >= 0.9
    assert not result.success and result.error_code == "tool_error"
    assert "timed out after 1 s" in (result.error or "")
    assert result.usage is not None and result.usage.signal == "SIGKILL"
    still_serving(tools)


def test_partial_output_survives_a_timeout(tools: ToolAPI) -> None:
    result = run(tools, "print('so far, so good')\nwhile True: pass", timeout=1)
    assert not result.success and result.data == {"stdout": "so far, so good\n"}


def test_double_fork_setsid_escaper_is_dead_after_the_call(engine: Engine, tools: ToolAPI) -> None:
    marker = f"escaper-{uuid.uuid4().hex[:8]}"
    workspace = workspace_of(engine, tools)
    result = tools.call(tool_name="escape_double_fork", arguments={"marker": marker}, timeout=10)
    assert result.success, result.error
    assert processes_in(os.path.join(workspace, marker)) == []
    still_serving(tools)


def test_stopped_and_sigterm_ignoring_children_die_with_the_call(
    engine: Engine, tools: ToolAPI
) -> None:
    marker = f"stubborn-{uuid.uuid4().hex[:8]}"
    workspace = workspace_of(engine, tools)
    result = tools.call(tool_name="stubborn_children", arguments={"marker": marker}, timeout=2)
    assert not result.success and "timed out" in (result.error or "")
    assert processes_in(os.path.join(workspace, marker)) == []


def test_fork_storm_is_killed_whole_at_the_deadline(engine: Engine, tools: ToolAPI) -> None:
    marker = f"storm-{uuid.uuid4().hex[:8]}"
    workspace = workspace_of(engine, tools)
    started = time.monotonic()
    result = tools.call(
        tool_name="fork_storm", arguments={"count": 50, "marker": marker}, timeout=2
    )
    assert time.monotonic() - started < 2 + GRACE_S
    assert not result.success and "timed out" in (result.error or "")
    assert processes_in(os.path.join(workspace, marker)) == []  # the 50 children are gone
    still_serving(tools)


def test_fork_bomb_hits_the_sandbox_process_cap(engine: Engine, tools: ToolAPI) -> None:
    cgroup = engine.layers["pids_cgroup"]
    if not cgroup["active"]:
        pytest.skip(f"no pids cgroup here: {cgroup['reason']}")
    marker = f"bomb-{uuid.uuid4().hex[:8]}"
    workspace = workspace_of(engine, tools)
    result = tools.call(
        tool_name="fork_storm",
        arguments={"count": 10_000, "hold": False, "marker": marker},
        timeout=30,
    )
    assert result.success, result.error
    assert result.data["children"] < cgroup["per_call"]
    assert "Resource temporarily unavailable" in result.data["refused"]
    assert processes_in(os.path.join(workspace, marker)) == []
    still_serving(tools)


def test_a_thread_bomb_in_one_call_does_not_starve_another(engine: Engine, tools: ToolAPI) -> None:
    if not engine.layers["pids_cgroup"]["active"]:
        pytest.skip("no pids cgroup here")
    bomb = (
        "import ctypes, threading, time\nctypes.CDLL(None).mallopt(-8, 1)\n"
        "threading.stack_size(64 * 1024)\nn = 0\n"
        "try:\n    while True:\n"
        "        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
        "        n += 1\nexcept RuntimeError:\n    pass\nprint(n, flush=True)\ntime.sleep(30)"
    )
    pending = tools.start(tool_name="python_eval", arguments={"code": bomb}, timeout=4)
    time.sleep(1.0)
    other = ToolAPI(engine.connect(client_name="bystander"))
    result = other.call(
        tool_name="python_eval",
        arguments={
            "code": "import threading\nt = threading.Thread(target=print)"
            "\nt.start()\nt.join()\n'fine'"
        },
    )
    assert result.success and result.data["value"] == "fine", result.error
    bombed = pending.result()
    assert not bombed.success and "timed out" in (bombed.error or "")
    assert int(bombed.data["stdout"]) < engine.layers["pids_cgroup"]["per_call"]
    other.client.close()


def test_fork_bomb_in_python_eval_is_refused(tools: ToolAPI) -> None:
    result = run(tools, "import os\nwhile True:\n    os.fork()", timeout=5)
    assert not result.success and "PermissionError" in (result.error or "")
    result = run(tools, "import subprocess\nsubprocess.run(['true'])", timeout=5)
    assert not result.success and "PermissionError" in (result.error or "")


def test_thread_bomb_hits_the_memory_limit_not_the_host(tools: ToolAPI) -> None:
    code = (
        "import threading, time\nthreads = []\n"
        "while True:\n    t = threading.Thread(target=time.sleep, args=(30,), daemon=True)\n"
        "    t.start()\n    threads.append(t)"
    )
    result = run(tools, code, timeout=10)
    assert not result.success and "can't start new thread" in (result.error or "")
    still_serving(tools)


@pytest.mark.parametrize(
    "code",
    [
        "x = bytearray(8 * 1024**3)",
        "chunks = []\nwhile True:\n    chunks.append(bytearray(10 * 1024**2))",
        "chunks = []\nwhile True:\n    chunks.append('x' * 100000)",
    ],
)
def test_memory_bombs_get_a_memory_error(tools: ToolAPI, code: str) -> None:
    result = run(tools, code, timeout=20)
    assert not result.success and result.error == "out of memory (MemoryError)"
    assert result.usage is not None and result.usage.peak_rss_kb
    assert result.usage.peak_rss_kb < 1100 * 1024  # never past the 1 GiB cap
    still_serving(tools)


@pytest.mark.parametrize(
    "code",
    [
        "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_STREAM)",
        "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_DGRAM)",
        "import socket\nsocket.socket(socket.AF_UNIX)",
        "import socket\nsocket.getaddrinfo('example.com', 80)",  # DNS needs a socket
        "import urllib.request\nurllib.request.urlopen('http://127.0.0.1:1')",
    ],
)
def test_no_sockets_for_python_eval(tools: ToolAPI, code: str) -> None:
    result = run(tools, code)
    assert not result.success
    assert any(
        word in (result.error or "")
        for word in ("PermissionError", "Operation not permitted", "gaierror")
    ), result.error


def test_the_supervisors_environment_is_out_of_reach(tools: ToolAPI) -> None:
    assert os.environ["A2E_TEST_SECRET"] == SECRET
    code = f"""
import os, glob
found = [k for k, v in os.environ.items() if {SECRET!r} in v]
for path in glob.glob('/proc/*/environ') + ['/proc/self/environ']:
    try:
        if {SECRET!r}.encode() in open(path, 'rb').read():
            found.append(path)
    except OSError:
        pass
pids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
(found, pids, os.path.exists('/proc/{os.getpid()}/environ'))
"""
    result = run(tools, code)
    assert result.success, result.error
    found, pids, supervisor_visible = result.data["value"]
    assert found == []
    assert pids == [1]  # only the worker itself is visible
    assert supervisor_visible is False


def _pipe_attack(write: str) -> str:
    return (
        FIND_PIPES
        + f"""
for fd in pipes:
    try:
        os.write(fd, {write})
    except OSError:
        pass
"""
    )


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
        (
            '(lambda b: struct.pack(\'>I\', len(b)) + b)(b\'{"t": "event", "kind": "progress", '
            '"data": {"pct": 500}}\')',
            "invalid event",
        ),
        ("(lambda b: struct.pack('>I', len(b)) + b)(b'{\"t\": \"shell\"}')", "unknown type"),
        (
            '(lambda b: struct.pack(\'>I\', len(b)) + b)(b\'{"t": "result", "ok": true, '
            '"data": {"forged": true}}\')',
            "after its result",
        ),
        ("struct.pack('>I', 100_000) + b'{\"t\"'", "cut short"),
        ("struct.pack('>I', 100_000) + b'[' * 100_000", "nested too deeply"),
    ],
)
def test_hostile_frames_on_the_workers_pipe_fail_only_that_call(
    tools: ToolAPI, payload: str, why: str
) -> None:
    result = run(tools, _pipe_attack(payload))
    assert not result.success and result.error_code == "tool_error"
    assert why in (result.error or ""), result.error
    assert result.data is None or "forged" not in str(result.data)
    still_serving(tools)


def test_closing_or_replacing_the_pipe_fds(tools: ToolAPI) -> None:
    close_all = "import os\nos.closerange(3, 1 << 20)"
    result = run(tools, close_all)
    assert not result.success and "before sending a result" in (result.error or "")
    replace = (
        "import os\nr, w = os.pipe()\nfor fd in os.listdir('/proc/self/fd'):\n"
        "    if int(fd) > 2 and int(fd) not in (r, w):\n"
        "        try: os.dup2(r, int(fd))\n        except OSError: pass"
    )
    result = run(tools, replace)
    assert not result.success and "before sending a result" in (result.error or "")
    still_serving(tools)


@pytest.mark.parametrize(
    ("code", "why"),
    [
        ("import ctypes\nctypes.string_at(0)", "segmentation fault (SIGSEGV)"),
        ("import os\nos._exit(3)", "exited with code 3 before sending a result"),
        # pid 1 of a PID namespace ignores signals it sends itself; glibc's abort() then faults.
        ("import os\nos.abort()", "(SIG"),
        ("import ctypes\nctypes.CDLL(None).syscall(246, 0, 0, 0, 0)", "seccomp"),  # kexec_load
        ("import ctypes\nctypes.CDLL(None).syscall(175, 0, 0, 0)", "seccomp"),  # init_module
    ],
)
def test_worker_deaths_are_reported_clearly(tools: ToolAPI, code: str, why: str) -> None:
    result = run(tools, code)
    assert not result.success and why in (result.error or ""), result.error
    still_serving(tools)


def test_32_bit_syscalls_kill_the_worker(tools: ToolAPI) -> None:
    code = """
import ctypes, mmap
# mov eax, 20 (getpid on i386); int 0x80; ret
machine = b"\\xb8\\x14\\x00\\x00\\x00\\xcd\\x80\\xc3"
page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(machine)
address = ctypes.addressof(ctypes.c_char.from_buffer(page))
ctypes.CFUNCTYPE(ctypes.c_int)(address)()
"""
    result = run(tools, code)
    assert not result.success and "seccomp" in (result.error or ""), result.error
    assert result.usage is not None and result.usage.signal == "SIGSYS"


def test_deep_recursion_is_contained(tools: ToolAPI) -> None:
    result = run(tools, "import sys\nsys.setrecursionlimit(10**7)\ndef f(n): return f(n + 1)\nf(0)")
    assert not result.success  # RecursionError, MemoryError or SIGSEGV: all contained
    still_serving(tools)


#: (what, libc call) pairs; each must fail with EPERM (1). Without the filter, root would get
#: success or a different errno for every one of them.
DENIED_CALLS = [
    ("ptrace", "libc.ptrace(0, 0, 0, 0)"),
    ("unshare(CLONE_NEWUSER)", "libc.unshare(0x10000000)"),
    ("mount", "libc.mount(b'none', b'/mnt', b'tmpfs', 0, None)"),
    ("setns", "libc.setns(os.open('/proc/self/ns/net', 0), 0)"),
    ("clone(CLONE_NEWUSER)", "libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0)"),
    ("io_uring_setup", "libc.syscall(425, 8, 0)"),
    ("userfaultfd", "libc.syscall(323, 0)"),
    ("bpf", "libc.syscall(321, 0, 0, 0)"),
    ("perf_event_open", "libc.syscall(298, 0, 0, -1, -1, 0)"),
    ("keyctl", "libc.syscall(250, 0, 0, 0)"),
    ("mknod a block device", "libc.mknod(b'disk', 0o60600, 0x0801)"),
    ("ioctl TIOCSTI", "libc.ioctl(0, 0x5412, b'x')"),
    ("prctl PR_SET_MM", "libc.prctl(35, 15, ctypes.byref(ctypes.c_uint()), 0, 0)"),
    ("ioctl TIOCSTI with high bits", "libc.ioctl(0, ctypes.c_ulong(0x1_0000_5412), b'x')"),
    ("kill(-1)", "libc.kill(-1, 0)"),
    ("fcntl F_SETPIPE_SZ", "libc.fcntl(1, 1031, 1 << 20)"),
    ("sched_setscheduler FIFO", "libc.sched_setscheduler(0, 1, ctypes.byref(ctypes.c_int(1)))"),
]


@pytest.mark.parametrize(("what", "call"), DENIED_CALLS, ids=[w for w, _ in DENIED_CALLS])
def test_dangerous_syscalls_fail_with_eperm(tools: ToolAPI, what: str, call: str) -> None:
    code = f"import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nassert {call} == -1\nctypes.get_errno()"
    result = run(tools, code)
    assert result.success, f"{what}: {result.error}"
    assert result.data["value"] == 1, what  # EPERM


def test_rlimits_cannot_be_raised_back(tools: ToolAPI) -> None:
    code = (
        "import resource\nsoft, hard = resource.getrlimit(resource.RLIMIT_AS)\n"
        "resource.setrlimit(resource.RLIMIT_AS, (hard, hard))\n"
        "resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))"
    )
    result = run(tools, code)
    assert not result.success and "not allowed to raise" in (result.error or ""), result.error
    raw = run(
        tools,
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "new = (ctypes.c_uint64 * 2)(2**62, 2**62)\n"
        "assert libc.prlimit(0, 9, new, None) == -1\nctypes.get_errno()",
    )
    assert raw.data["value"] == 1  # EPERM from the seccomp filter
    limits = run(tools, "import resource\nresource.getrlimit(resource.RLIMIT_AS)")
    assert limits.data["value"] == [1024 * 1024**2, 1024 * 1024**2]


def test_no_core_dumps_and_capped_file_size(tools: ToolAPI) -> None:
    result = run(
        tools,
        "import resource\n[resource.getrlimit(resource.RLIMIT_CORE), "
        "resource.getrlimit(resource.RLIMIT_FSIZE)[0]]",
    )
    assert result.data["value"] == [[0, 0], 256 * 1024**2]


def test_inherited_fds_are_closed(tools: ToolAPI) -> None:
    result = run(tools, "import os\nsorted(int(fd) for fd in os.listdir('/proc/self/fd'))")
    fds = result.data["value"]
    assert fds[:3] == [0, 1, 2] and len(fds) <= 5, fds  # stdio, the result pipe, listdir's own fd


def test_the_zygote_restarts_and_in_flight_calls_fail_cleanly(
    engine: Engine, tools: ToolAPI
) -> None:
    assert engine.pool is not None
    pending = tools.start(tool_name="sleep", arguments={"seconds": 20}, timeout=30)
    time.sleep(0.5)
    old = engine.pool.zygote_pid
    assert old is not None
    os.kill(old, signal.SIGKILL)
    result = pending.result()
    assert not result.success and "zygote died" in (result.error or ""), result.error
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if engine.pool.zygote_pid not in (None, old):
            break
        time.sleep(0.1)
    assert engine.pool.zygote_pid not in (None, old)
    still_serving(tools)


def test_without_namespaces_the_layers_say_so_and_the_tree_still_dies() -> None:
    from engine import EngineConfig
    from tests.hostile_plugin import HostileTools

    with Engine(
        plugins=[HostileTools()], config=EngineConfig(namespaces=False, landlock=False, prefork=1)
    ) as eng:
        assert eng.layers["pid_namespace"] == {
            "active": False,
            "reason": "disabled by configuration",
        }
        assert eng.layers["subreaper"]["active"] is True
        assert eng.layers["landlock"]["reason"] == "disabled by configuration"
        tools = ToolAPI(eng.connect())
        workspace = workspace_of(eng, tools)
        marker = f"escaper-{uuid.uuid4().hex[:8]}"
        result = tools.call(tool_name="escape_double_fork", arguments={"marker": marker})
        assert result.success, result.error
        assert processes_in(os.path.join(workspace, marker)) == []
        marker = f"stubborn-{uuid.uuid4().hex[:8]}"
        result = tools.call(tool_name="stubborn_children", arguments={"marker": marker}, timeout=2)
        assert "timed out" in (result.error or "")
        assert processes_in(os.path.join(workspace, marker)) == []


WRITE_TARGETS = [
    "/proc/sys/kernel/core_pattern",  # would run a program as root on the next crash
    "/sys/fs/cgroup/pids/release_agent",  # the same, through cgroup v1
    "/etc/a2e-attack",
    "/root/.bashrc",
]


@pytest.mark.parametrize("target", WRITE_TARGETS)
def test_the_host_filesystem_is_read_only(tools: ToolAPI, target: str) -> None:
    result = run(tools, f"open({target!r}, 'a').write('pwned')")
    assert not result.success
    assert "Read-only file system" in (result.error or ""), result.error
    assert not os.path.exists("/etc/a2e-attack")


def test_site_packages_and_sources_cannot_be_planted(tools: ToolAPI) -> None:
    import pyseccomp

    for directory in (
        os.path.dirname(os.__file__),
        os.path.dirname(pyseccomp.__file__),
        os.path.dirname(os.path.dirname(__file__)),
    ):
        result = run(tools, f"open({directory!r} + '/a2e_attack.pth', 'w').write('import os')")
        assert not result.success and "Read-only file system" in (result.error or "")
        assert not os.path.exists(os.path.join(directory, "a2e_attack.pth"))
    assert run(tools, "open('mine.txt', 'w').write('the workspace stays writable')").success


def test_workers_hold_no_capabilities(tools: ToolAPI) -> None:
    result = run(tools, "[l.split()[1] for l in open('/proc/self/status') if l.startswith('Cap')]")
    assert result.data["value"] == ["0000000000000000"] * 5


def test_the_zygote_inherits_nothing_of_the_hosts_command_line(tools: ToolAPI) -> None:
    import multiprocess

    result = run(
        tools, "import sys, multiprocess\n[sys.argv, multiprocess.current_process().authkey.hex()]"
    )
    argv, authkey = result.data["value"]
    assert argv == ["a2e-zygote"]
    assert authkey != bytes(multiprocess.current_process().authkey).hex()


def test_threads_writing_output_at_once_do_not_corrupt_frames(tools: ToolAPI) -> None:
    code = (
        "import sys, threading\n"
        "def noise():\n"
        "    for _ in range(2000): sys.stderr.write('e' * 300 + '\\n')\n"
        "t = threading.Thread(target=noise); t.start()\n"
        "for _ in range(2000): print('o' * 300)\n"
        "t.join()"
    )
    for _ in range(3):
        result = run(tools, code)
        assert result.success, result.error
        assert result.data["stdout"].count("\n") == 2000


def test_a_worker_that_hides_its_pipe_and_hangs_is_killed_quickly(tools: ToolAPI) -> None:
    started = time.monotonic()
    result = run(tools, "import os, time\nos.closerange(3, 1 << 20)\ntime.sleep(60)", timeout=10)
    assert time.monotonic() - started < 3
    assert not result.success and "without sending a result and did not exit" in (
        result.error or ""
    )


@pytest.mark.parametrize(
    "device",
    [
        "/dev/loop0",
        "/dev/kvm",
        "/dev/kmsg",
        "/dev/console",
        "/dev/userfaultfd",
        "/dev/tty1",
        "/dev/vda",
        "/dev/sda",
    ],
)
def test_host_devices_do_not_exist_in_workers(tools: ToolAPI, device: str) -> None:
    result = run(tools, f"import os\nos.open({device!r}, os.O_RDWR)")
    assert not result.success and "No such file or directory" in (result.error or "")


def test_the_few_devices_workers_get_work(tools: ToolAPI) -> None:
    code = (
        "import os\n[sorted(os.listdir('/dev')), open('/dev/null', 'w').write('x'), "
        "len(open('/dev/urandom', 'rb').read(8)), open('/dev/zero', 'rb').read(2).hex()]"
    )
    result = run(tools, code)
    assert result.success, result.error
    names, written, random_bytes, _ = result.data["value"]
    assert {"null", "zero", "urandom", "random", "fd"} <= set(names) and len(names) <= 10
    assert (written, random_bytes) == (1, 8)


def test_ipc_objects_are_private_to_the_call(tools: ToolAPI) -> None:
    code = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "assert libc.shmget(0x5A2E, 1 << 20, 0o1666) == -1\nctypes.get_errno()"
    )
    assert run(tools, code).data["value"] == 1  # refused under the compute profile
    ipc = run(tools, "import os\nos.readlink('/proc/self/ns/ipc')").data["value"]
    assert ipc != os.readlink("/proc/self/ns/ipc")


def test_memfd_cannot_hold_memory_outside_the_limit(tools: ToolAPI) -> None:
    result = run(tools, "import os\nos.memfd_create('x')")
    assert not result.success and "PermissionError" in (result.error or "")


def test_setuid_bits_cannot_be_set(tools: ToolAPI) -> None:
    result = run(tools, "import os\nopen('suid', 'w').close()\nos.chmod('suid', 0o4755)")
    assert not result.success and "PermissionError" in (result.error or "")
    assert run(tools, "import os\nos.chmod('suid', 0o755)").success


@pytest.mark.parametrize("tool", ["python_eval", "network_view"])
def test_tools_without_the_network_profile_have_no_network(
    engine: Engine, tools: ToolAPI, tool: str
) -> None:
    if not engine.layers["network_namespace"]["active"]:
        pytest.skip(engine.layers["network_namespace"]["reason"])
    if tool == "python_eval":
        code = (
            "import os\nwith open('/proc/net/dev') as fh:\n"
            "    names = [l.split(':')[0].strip() for l in fh.readlines()[2:]]\n"
            "{'netns': os.readlink('/proc/self/ns/net'), 'interfaces': names}"
        )
        result = run(tools, code)
        view = result.data["value"]
    else:  # the process profile: fork and exec allowed, sockets refused, no network either
        result = tools.call(tool_name=tool, arguments={})
        view = result.data
    assert result.success, result.error
    assert view["netns"] != os.readlink("/proc/self/ns/net")
    assert view["interfaces"] == ["lo"]


def test_another_sessions_workspace_is_out_of_reach(engine: Engine, tools: ToolAPI) -> None:
    if not engine.layers["landlock"]["active"]:
        pytest.skip(engine.layers["landlock"]["reason"])
    victim = ToolAPI(engine.connect(client_name="victim"))
    secret = victim.call(
        tool_name="python_eval",
        arguments={
            "code": "import os\nopen('secret.txt', 'w').write('s3cret')\nos.path.abspath('secret.txt')"
        },
    )
    path = secret.data["value"]
    read = run(tools, f"open({path!r}).read()")
    assert not read.success and "Permission denied" in (read.error or ""), read.error
    write = run(tools, f"open({os.path.dirname(path)!r} + '/planted.txt', 'w')")
    assert not write.success and "Permission denied" in (write.error or "")
    listing = run(tools, f"import os\nos.listdir({os.path.dirname(os.path.dirname(path))!r})")
    assert not listing.success
    victim.client.close()


def test_what_an_earlier_call_left_in_tmp_is_gone(tools: ToolAPI) -> None:
    first = run(
        tools,
        "import tempfile\nf = tempfile.NamedTemporaryFile(delete=False)\n"
        "f.write(b'left behind')\nf.close()\nf.name",
    )
    assert first.success and "/tmp/" in first.data["value"]
    second = run(tools, f"open({first.data['value']!r}).read()")
    assert not second.success
    assert "No such file" in (second.error or "") or "Permission denied" in (second.error or "")


def test_the_hosts_files_outside_the_allowlist_cannot_be_read(
    engine: Engine, tools: ToolAPI
) -> None:
    if not engine.layers["landlock"]["active"]:
        pytest.skip(engine.layers["landlock"]["reason"])
    repo_readme = os.path.join(os.path.dirname(os.path.dirname(__file__)), "README.md")
    for path in (repo_readme, "/root/.bashrc", "/root/.profile"):
        result = run(tools, f"open({path!r}).read()")
        assert not result.success and "Permission denied" in (result.error or ""), path
    assert run(tools, "import json, decimal, sqlite3, email.mime.text\n1").success
