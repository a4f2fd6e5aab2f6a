"""Thin ctypes wrappers for the Linux calls Python 3.11 does not expose.

Each wrapper raises ``OSError`` with the real errno, so callers can say precisely why a layer is
unavailable (``EPERM`` without privileges, ``EINVAL`` on an old kernel, ...).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable

__all__ = [
    "CLONE_NEWNET",
    "CLONE_NEWNS",
    "CLONE_NEWPID",
    "CLONE_NEWUSER",
    "empty_inherited_capability_sets",
    "idmap_detached",
    "install_seccomp_bpf",
    "keep_only_capabilities",
    "libc",
    "mount",
    "mount_setattr_recursive",
    "permitted_capabilities",
    "prctl",
    "prepare_seccomp_bpf",
    "setns",
    "syscall_number",
    "unshare",
]

#: The C library this process has loaded already, the one handle every module calls it
#: through. Its attributes are shared untyped functions (``libc.umount2``): a module that
#: declares a function's types takes a fresh object of its own (``libc["syscall"]``), so
#: that no module's declaration changes another's calls.
libc = ctypes.CDLL(None, use_errno=True)

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_THREAD = 0x00010000
NAMESPACE_FLAGS = (
    CLONE_NEWNS,
    CLONE_NEWCGROUP,
    CLONE_NEWUTS,
    CLONE_NEWIPC,
    CLONE_NEWUSER,
    CLONE_NEWPID,
    CLONE_NEWNET,
)

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_SLAVE = 1 << 19
MS_SHARED = 1 << 20


def _check(result: int, what: str, *args: object) -> int:
    """``result``, or ``OSError`` naming the call; the name is only formatted on failure."""
    if result < 0:
        err = ctypes.get_errno()
        shown = ", ".join(map(repr, args))
        raise OSError(err, f"{what}({shown}): {os.strerror(err)}")
    return result


def _typed(name: str, *argtypes: type) -> Callable[..., int]:
    """A libc function with its argument types declared: plain ints and bytes go straight in,
    without a ctypes object made per argument. Workers call these in their hardening, where
    every object made costs pages copied from the zygote."""
    function = libc[name]  # a fresh function object: the shared libc.<name> stays untyped
    function.argtypes = argtypes
    function.restype = ctypes.c_int
    return function


_prctl = _typed("prctl", ctypes.c_int, *(ctypes.c_ulong,) * 4)
_unshare = _typed("unshare", ctypes.c_int)
_setns = _typed("setns", ctypes.c_int, ctypes.c_int)
_mount = _typed(
    "mount", ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p
)


def prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> int:
    return _check(_prctl(option, arg2, arg3, arg4, arg5), "prctl", option)


def unshare(flags: int) -> None:
    _check(_unshare(flags), "unshare", flags)


def setns(fd: int, nstype: int) -> None:
    _check(_setns(fd, nstype), "setns", nstype)


def mount(
    source: str, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    _check(
        _mount(
            source.encode(),
            target.encode(),
            fstype.encode() if fstype else None,
            flags,
            data.encode() if data else None,
        ),
        "mount",
        source,
        target,
    )


AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
MOUNT_ATTR_NODEV = 0x4
MS_BIND = 4096


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def syscall_number(name: str) -> int:
    import pyseccomp

    number = pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)
    if number < 0:
        raise OSError(38, f"{name} does not exist on this architecture")
    return number


def mount_setattr_recursive(
    path: str, attr_set: int = 0, attr_clr: int = 0, recursive: bool = True
) -> None:
    """``mount_setattr(AT_RECURSIVE)``: change flags of a whole mount tree at once (5.12+);
    of the one mount at ``path`` only, with ``recursive=False``."""
    attr = _MountAttr(attr_set, attr_clr, 0, 0)
    _check(
        libc.syscall(
            ctypes.c_long(syscall_number("mount_setattr")),
            ctypes.c_int(AT_FDCWD),
            path.encode(),
            ctypes.c_uint(AT_RECURSIVE if recursive else 0),
            ctypes.byref(attr),
            ctypes.c_size_t(ctypes.sizeof(attr)),
        ),
        "mount_setattr",
        path,
    )


MOUNT_ATTR_IDMAP = 0x00100000


def idmap_detached(tree_fd: int, userns_fd: int) -> None:
    """A mount ``open_tree`` cloned, not attached yet, made to show its files' owners as
    ``userns_fd``'s mapping says (an idmapped mount, 5.12+; tmpfs from 6.3)."""
    attr = _MountAttr(MOUNT_ATTR_IDMAP, 0, 0, userns_fd)
    _check(
        libc.syscall(
            ctypes.c_long(syscall_number("mount_setattr")),
            ctypes.c_int(tree_fd),
            b"",
            ctypes.c_uint(AT_EMPTY_PATH),
            ctypes.byref(attr),
            ctypes.c_size_t(ctypes.sizeof(attr)),
        ),
        "mount_setattr",
        tree_fd,
    )


AT_EMPTY_PATH = 0x1000
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


#: Version 3 takes two of them (capabilities 0-31 and 32-63); the type made once, not per call.
_CapDataPair = _CapData * 2

CAP_SETGID = 6
CAP_SETUID = 7


def empty_inherited_capability_sets() -> None:
    """Empty the bounding and ambient sets, which only matter on ``execve``: the caller keeps
    every capability it holds, and its children inherit the empty sets."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            last = int(fh.read())
    except OSError:
        last = 63
    for cap in range(last + 1):
        try:
            prctl(PR_CAPBSET_DROP, cap)
        except PermissionError:
            # Not root (no CAP_SETPCAP): nothing to drop from a set we could never use, and
            # no_new_privs (set with the seccomp filter) keeps exec from granting anything.
            break
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)


def keep_only_capabilities(keep: tuple[int, ...] = ()) -> None:
    """Effective and permitted become ``keep``; inheritable becomes empty (one ``capset``)."""
    mask = 0
    for cap in keep:
        mask |= 1 << cap
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = _CapDataPair()
    data[0].effective = data[0].permitted = mask & 0xFFFFFFFF
    data[1].effective = data[1].permitted = mask >> 32
    _check(libc.capset(ctypes.byref(header), ctypes.byref(data)), "capset")


def permitted_capabilities() -> int:
    """The permitted set of this thread, as a bit mask (0: nothing left to use)."""
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = _CapDataPair()
    _check(libc.capget(ctypes.byref(header), ctypes.byref(data)), "capget")
    return data[0].permitted | (data[1].permitted << 32)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


#: Programs made ready for the kernel by the zygote (``prepare_seccomp_bpf``), by their bytes.
_PREPARED: dict[bytes, tuple[ctypes.Array[ctypes.c_char], _SockFprog]] = {}


def prepare_seccomp_bpf(program: bytes) -> None:
    """Make ``program``'s ``sock_fprog`` now, in the zygote: a worker installing it then makes
    no ctypes objects (each costs it copied pages)."""
    _PREPARED[program] = _sock_fprog(program)


def _sock_fprog(program: bytes) -> tuple[ctypes.Array[ctypes.c_char], _SockFprog]:
    if not program or len(program) % 8:
        raise ValueError(
            f"seccomp program must be a non-empty multiple of 8 bytes, got {len(program)}"
        )
    buffer = ctypes.create_string_buffer(program, len(program))
    return buffer, _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))


def install_seccomp_bpf(program: bytes) -> None:
    """Load a compiled classic-BPF seccomp program for this thread (no_new_privs first).

    Compiling with libseccomp costs several times what installing costs; the zygote compiles
    once and each worker only installs, nearly all of it the kernel translating the program.
    """
    _buffer, fprog = _PREPARED.get(program) or _sock_fprog(program)
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    _check(
        libc.prctl(
            ctypes.c_int(PR_SET_SECCOMP),
            ctypes.c_ulong(SECCOMP_MODE_FILTER),
            ctypes.byref(fprog),
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
        ),
        "prctl",
        "PR_SET_SECCOMP",
    )
