"""Attempts to get past the system-call filter, or to undo the limits it protects."""

from __future__ import annotations

import pytest

from tests.security.harness import Attacker, Sandbox, attack

#: (what, libc call) pairs; each must fail with EPERM (1). Without the filter, root would get
#: success or a different errno for every one of them.
DENIED_CALLS = [
    ("ptrace", "libc.ptrace(0, 0, 0, 0)"),
    ("process_vm_readv", "libc.syscall(310, 1, 0, 0, 0, 0, 0)"),
    ("unshare(CLONE_NEWUSER)", "libc.unshare(0x10000000)"),
    ("unshare(CLONE_NEWNS)", "libc.unshare(0x00020000)"),
    ("mount", "libc.mount(b'none', b'/mnt', b'tmpfs', 0, None)"),
    ("umount2", "libc.umount2(b'/proc', 2)"),
    ("setns", "libc.setns(os.open('/proc/self/ns/net', 0), 0)"),
    ("clone(CLONE_NEWUSER)", "libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0)"),
    ("chroot", "libc.chroot(b'/tmp')"),
    ("bpf", "libc.syscall(321, 0, 0, 0)"),
    ("perf_event_open", "libc.syscall(298, 0, 0, -1, -1, 0)"),
    ("userfaultfd", "libc.syscall(323, 0)"),
    ("keyctl", "libc.syscall(250, 0, 0, 0)"),
    ("add_key", "libc.syscall(248, b'user', b'k', b'v', 1, -2)"),
    ("ioctl TIOCSTI", "libc.ioctl(0, 0x5412, b'x')"),
    ("ioctl TIOCSTI with high bits", "libc.ioctl(0, ctypes.c_ulong(0x1_0000_5412), b'x')"),
    ("prctl PR_SET_MM", "libc.prctl(35, 15, ctypes.byref(ctypes.c_uint()), 0, 0)"),
    ("kill(-1)", "libc.kill(-1, 0)"),
    ("fcntl F_SETPIPE_SZ", "libc.fcntl(1, 1031, 1 << 20)"),
    ("sched_setscheduler FIFO", "libc.sched_setscheduler(0, 1, ctypes.byref(ctypes.c_int(1)))"),
    ("personality", "libc.personality(0x0040000)"),
]


@pytest.mark.parametrize(("what", "call"), DENIED_CALLS, ids=[w for w, _ in DENIED_CALLS])
@attack("a denied system call through ctypes", full="seccomp (EPERM)", reduced="seccomp (EPERM)")
def test_denied_system_calls(attacker: Attacker, what: str, call: str) -> None:
    code = (
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        f"assert {call} == -1\nctypes.get_errno()"
    )
    result = attacker.attack(code)
    assert result.success, f"{what}: {result.error}"
    assert result.data["value"] == 1, what


@pytest.mark.parametrize(
    ("number", "name"), [(246, "kexec_load"), (175, "init_module"), (169, "reboot")]
)
@attack("a machine-takeover system call", full="seccomp (SIGSYS)", reduced="seccomp (SIGSYS)")
def test_takeover_calls_kill_the_worker(attacker: Attacker, number: int, name: str) -> None:
    result = attacker.attack(f"import ctypes\nctypes.CDLL(None).syscall({number}, 0, 0, 0, 0)")
    assert not result.success and "seccomp" in (result.error or ""), (name, result.error)
    assert result.usage is not None and result.usage.signal == "SIGSYS"


@attack("x32 system calls", full="seccomp: foreign ABI kills", reduced="the same")
def test_x32_syscalls(attacker: Attacker) -> None:
    result = attacker.attack("import ctypes\nctypes.CDLL(None).syscall(0x40000000 | 39)")
    assert not result.success and result.usage is not None and result.usage.signal == "SIGSYS"


@attack(
    "32-bit system calls (int 0x80)",
    full="seccomp: foreign architecture kills",
    reduced="the same",
)
def test_32_bit_syscalls(attacker: Attacker) -> None:
    code = """
import ctypes, mmap
# mov eax, 20 (getpid on i386); int 0x80; ret
machine = b"\\xb8\\x14\\x00\\x00\\x00\\xcd\\x80\\xc3"
page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(machine)
address = ctypes.addressof(ctypes.c_char.from_buffer(page))
ctypes.CFUNCTYPE(ctypes.c_int)(address)()
"""
    result = attacker.attack(code)
    assert not result.success and "seccomp" in (result.error or ""), result.error
    assert result.usage is not None and result.usage.signal == "SIGSYS"


@attack(
    "raise an rlimit back up",
    full="hard limits set; seccomp refuses setrlimit/prlimit64 with a new limit",
    reduced="the same",
)
def test_raise_rlimits(sandbox: Sandbox, attacker: Attacker) -> None:
    code = (
        "import resource\nsoft, hard = resource.getrlimit(resource.RLIMIT_AS)\n"
        "resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))"
    )
    result = attacker.attack(code)
    assert not result.success and "not allowed to raise" in (result.error or ""), result.error
    raw = attacker.attack(
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "new = (ctypes.c_uint64 * 2)(2**62, 2**62)\n"
        "assert libc.prlimit(0, 9, new, None) == -1\nctypes.get_errno()"
    )
    assert raw.data["value"] == 1  # EPERM from the seccomp filter
    limits = attacker.attack("import resource\nresource.getrlimit(resource.RLIMIT_AS)")
    memory = sandbox.engine.config.limits.memory_mb * 1024**2
    assert limits.data["value"] == [memory, memory]


@attack(
    "become root again (setuid(0), setgroups)",
    full="no capabilities left after the change to the session uid",
    reduced="no capabilities (the worker is uid 0 without any)",
)
def test_regain_root(sandbox: Sandbox, attacker: Attacker) -> None:
    code = (
        "import os\nerrors = []\n"
        "for attempt in (lambda: os.setuid(0), lambda: os.setgroups([0]),\n"
        "                lambda: os.setresuid(0, 0, 0)):\n"
        "    try:\n        attempt()\n        errors.append('ok')\n"
        "    except PermissionError:\n        errors.append('EPERM')\n"
        "[os.getuid(), os.geteuid(), errors,\n"
        " [l.split()[1] for l in open('/proc/self/status') if l.startswith('Cap')]]"
    )
    result = attacker.attack(code)
    assert result.success, result.error
    uid, euid, errors, caps = result.data["value"]
    assert caps == ["0000000000000000"] * 5
    if sandbox.has("identity"):
        assert uid == euid and uid >= sandbox.engine.config.isolation.uid_range[0]
        assert errors == ["EPERM"] * 3
    else:
        assert (uid, euid) == (0, 0)  # already root, without a single capability
        assert errors[1] == "EPERM"


@attack(
    "prctl tricks (dumpable, no_new_privs off, seccomp off, subreaper)",
    full="the kernel: no_new_privs and seccomp cannot be undone",
    reduced="the same",
)
def test_prctl_tricks(attacker: Attacker) -> None:
    code = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "nnp_off = libc.prctl(38, 0, 0, 0, 0)\n"  # PR_SET_NO_NEW_PRIVS 0: EINVAL
        "seccomp_off = libc.prctl(22, 0, 0, 0, 0)\n"  # PR_SET_SECCOMP disabled: EINVAL
        "[nnp_off, seccomp_off, libc.prctl(39, 0, 0, 0, 0), libc.prctl(21, 0, 0, 0, 0)]"
    )
    result = attacker.attack(code)
    assert result.success, result.error
    nnp_off, seccomp_off, nnp_now, seccomp_mode = result.data["value"]
    assert (nnp_off, seccomp_off) == (-1, -1)
    assert (nnp_now, seccomp_mode) == (1, 2)  # still no_new_privs, still filtered
