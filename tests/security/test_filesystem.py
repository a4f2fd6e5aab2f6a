"""Filesystem attacks: writing outside the workspace, reading what is not the call's, escapes
through ``read_file``, device nodes and setuid programs."""

from __future__ import annotations

import os
import time

import pyseccomp
import pytest

from tests.security.harness import REPO, Attacker, Sandbox, attack

UNPROTECTED = (
    "NOT contained: a uid-0 worker without a mount namespace, Landlock or uid drop owns "
    "root's files (the engine refuses this unless allow_unprotected_root)"
)

WRITE_TARGETS = [
    "/proc/sys/kernel/core_pattern",  # would run a program as root on the next crash
    "/sys/fs/cgroup/pids/release_agent",  # the same, through cgroup v1
    "/etc/a2e-attack",
    "/root/.bashrc",
    os.path.join(os.path.dirname(os.__file__), "a2e_attack.pth"),  # run by every Python start
    os.path.join(os.path.dirname(pyseccomp.__file__), "a2e_attack.pth"),
    str(REPO / "a2e" / "a2e_attack.py"),
]


def _refused(error: str | None) -> bool:
    return any(
        word in (error or "")
        for word in ("Read-only file system", "Permission denied", "Operation not permitted")
    )


@pytest.mark.parametrize("target", WRITE_TARGETS)
@attack(
    "write outside the workspace",
    full="read-only mount tree, or the call's own run layer; Landlock; uid drop",
    reduced=UNPROTECTED,
)
def test_write_outside_the_workspace(sandbox: Sandbox, attacker: Attacker, target: str) -> None:
    if sandbox.mode == "reduced":
        # Only ask: writing would really change the host.
        parent = os.path.dirname(target)
        probe = target if os.path.exists(target) else parent
        result = attacker.attack(f"import os\nos.access({probe!r}, os.W_OK)")
        assert result.success and result.data["value"] is True
        return
    result = attacker.attack(f"open({target!r}, 'a').write('pwned')")
    if result.success:
        # Only where the call has a run layer of its own (a fresh /root): the host's file is
        # as it was (the harness compares it), and the next call does not find the write.
        assert sandbox.has("writable_root") and target.startswith("/root/"), target
        again = attacker.attack(f"import os\nos.path.exists({target!r})")
        assert again.success and again.data["value"] is False
    elif sandbox.has("writable_root") and "No such file" in (result.error or ""):
        # Not shown in the run layer at all: /sys, a checkout the installed engine does not
        # run from. The host's file is as it was (the harness compares it).
        assert not target.startswith(("/etc/", "/root/")), result.error
    else:
        assert _refused(result.error), result.error
    assert not os.path.exists("/etc/a2e-attack")


@pytest.mark.parametrize("how", ["overwrite", "remove", "rename", "create beside"])
@attack(
    "change the host's files that anyone may write (canaries in /tmp and the home directory)",
    full="private /tmp; read-only mount tree; Landlock (each alone refuses it)",
    reduced="NOT contained: the files are writable by anyone, and nothing else is in the way",
)
def test_files_anyone_may_write(sandbox: Sandbox, attacker: Attacker, how: str) -> None:
    code = {
        "overwrite": "open(path, 'w').write('pwned')",
        "remove": "os.unlink(path)",
        "rename": "os.rename(path, path + '.moved')",
        "create beside": "open(os.path.join(os.path.dirname(path), 'a2e-attack'), 'w')",
    }[how]
    assert sandbox.canaries.files, "no canary could be planted"
    for path in sandbox.canaries.files:
        if sandbox.mode == "reduced":
            # Only ask: the attack would succeed, and change the host.
            result = attacker.attack(f"import os\nos.access({path!r}, os.W_OK)")
            assert result.success and result.data["value"] is True
            continue
        result = attacker.attack(f"import os\npath = {path!r}\n{code}")
        assert not result.success, (path, result.data)
        assert any(
            word in (result.error or "")
            for word in ("Read-only file system", "Permission denied", "No such file")
        ), result.error


@attack(
    "read a root-only file (/etc/shadow)",
    full="uid drop: the session uid is not root",
    reduced="NOT contained: root without capabilities still owns root's files",
)
def test_read_root_only_files(sandbox: Sandbox, attacker: Attacker) -> None:
    result = attacker.attack("len(open('/etc/shadow').read()) > 0")
    if sandbox.has("identity"):
        assert not result.success and "Permission denied" in (result.error or "")
    else:
        assert result.success and result.data["value"] is True


@attack(
    "read the host's private files (/root, this repository)",
    full="Landlock (reads only system and code paths); uid drop for /root",
    reduced="NOT contained (root owns them)",
)
def test_read_host_files_outside_the_allowlist(sandbox: Sandbox, attacker: Attacker) -> None:
    for path in (str(REPO / "README.md"), "/root/.bashrc"):
        if not os.path.exists(path):
            continue
        result = attacker.attack(f"len(open({path!r}).read())")
        if sandbox.has("landlock") or (sandbox.has("identity") and path.startswith("/root")):
            # Denied by Landlock, or not there at all: the worker's /root holds only the way to
            # the interpreter.
            assert not result.success and any(
                w in (result.error or "") for w in ("Permission denied", "No such file")
            ), (path, result.error)
        else:
            assert result.success
    assert attacker.call("import json, decimal, sqlite3, email.mime.text\n1").success


@attack(
    "another session's workspace",
    full="uid drop (0700, another uid) and Landlock",
    reduced="NOT contained: only the unguessable directory name, and root may list it",
)
def test_another_sessions_workspace(sandbox: Sandbox, attacker: Attacker) -> None:
    victim = sandbox.victim_file
    read = attacker.attack(f"open({victim!r}).read()")
    if not (sandbox.has("identity") or sandbox.has("landlock")):
        assert read.success and read.data["value"] == "untouched"  # the weakness, shown
        return
    assert not read.success and "Permission denied" in (read.error or ""), read.error
    listing = attacker.attack(f"import os\nos.listdir({os.path.dirname(victim)!r})")
    assert not listing.success and "Permission denied" in (listing.error or "")
    planted = attacker.attack(f"open({os.path.dirname(victim)!r} + '/planted', 'w')")
    assert not planted.success and "Permission denied" in (planted.error or "")


@attack(
    "what an earlier call left in tmp",
    full="private /tmp per worker: gone with it",
    reduced="the call's tmp directory is removed after the call",
)
def test_what_an_earlier_call_left_in_tmp(attacker: Attacker) -> None:
    first = attacker.attack(
        "import tempfile\nf = tempfile.NamedTemporaryFile(delete=False)\n"
        "f.write(b'left behind')\nf.close()\nf.name"
    )
    assert first.success, first.error
    second = attacker.attack(f"open({first.data['value']!r}).read()")
    assert not second.success and "No such file" in (second.error or ""), second.error


@pytest.mark.parametrize(
    "path",
    [
        "../../../../../../root/.bashrc",
        "../../../../../../proc/1/environ",
        "/root/.bashrc",
        "VICTIM",
    ],
)
@attack(
    "'..' and absolute escapes through read_file",
    full="read_file's roots (resolved after symlinks); Landlock; uid drop",
    reduced="read_file's roots",
)
def test_read_file_escapes(sandbox: Sandbox, attacker: Attacker, path: str) -> None:
    path = sandbox.victim_file if path == "VICTIM" else path
    result = attacker.attack(tool="read_file", path=path)
    assert not result.success and result.error_code in {
        "tool_denied",
        "invalid_arguments",
        "tool_error",
    }
    assert "untouched" not in str(result.data)


@attack(
    "symlink escape through read_file",
    full="read_file resolves symlinks before checking its roots; Landlock; uid drop",
    reduced="read_file resolves symlinks before checking its roots",
)
def test_read_file_symlink_escape(sandbox: Sandbox, attacker: Attacker) -> None:
    victim = sandbox.victim_file
    made = attacker.call(f"import os\nos.symlink({victim!r}, 'link')\nos.symlink('/root', 'r')")
    assert made.success, made.error
    for path in ("link", "r/.bashrc"):
        result = attacker.attack(tool="read_file", path=path)
        assert not result.success and "untouched" not in str(result.data), path


@attack(
    "create device nodes",
    full="seccomp (mknod of a device); private /dev; nodev mounts",
    reduced="seccomp (mknod of a device)",
)
def test_create_device_nodes(attacker: Attacker) -> None:
    code = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nerrs = []\n"
        "for mode, dev in ((0o60600, 0x0801), (0o20600, 0x0103)):\n"
        "    assert libc.mknod(f'node{mode}'.encode(), mode, dev) == -1\n"
        "    errs.append(ctypes.get_errno())\nerrs"
    )
    result = attacker.attack(code)
    assert result.success and result.data["value"] == [1, 1]  # EPERM, EPERM


@pytest.mark.parametrize(
    "device", ["/dev/loop0", "/dev/kvm", "/dev/userfaultfd", "/dev/kmsg", "/dev/mem"]
)
@attack(
    "open a host device",
    full="private /dev: the node does not exist",
    reduced="NOT contained: root's devices open, except those that need a capability "
    "(/dev/kmsg, /dev/mem: no capabilities)",
)
def test_open_a_host_device(sandbox: Sandbox, attacker: Attacker, device: str) -> None:
    result = attacker.attack(f"import os\nos.open({device!r}, os.O_RDONLY)")
    if sandbox.has("minimal_dev") or not os.path.exists(device):
        assert not result.success and "No such file or directory" in (result.error or "")
    elif device in ("/dev/kmsg", "/dev/mem"):  # CAP_SYSLOG, CAP_SYS_RAWIO
        assert not result.success and "Operation not permitted" in (result.error or "")
    else:  # the weakness, shown: root's devices open for a root worker
        assert result.success, result.error


@attack(
    "setuid bits and setuid programs",
    full="seccomp (no S_ISUID/S_ISGID in chmod); no_new_privs and an empty bounding set",
    reduced="the same",
)
def test_setuid(attacker: Attacker) -> None:
    result = attacker.attack("import os\nopen('suid', 'w').close()\nos.chmod('suid', 0o4755)")
    assert not result.success and "PermissionError" in (result.error or "")
    status = attacker.attack(tool="run_program", argv=["cat", "/proc/self/status"])
    assert status.success, status.error
    fields = dict(line.split(":\t", 1) for line in status.data["stdout"].splitlines())
    assert fields["NoNewPrivs"].strip() == "1"
    assert fields["CapBnd"].strip() == fields["CapEff"].strip() == "0" * 16
    mount = attacker.attack(tool="run_program", argv=["mount", "-t", "tmpfs", "none", "/mnt"])
    assert mount.success and mount.data["code"] != 0  # setuid-root mount got no privilege


@attack(
    "leave something in /dev/shm for a later call",
    full="private /dev: there is no /dev/shm (POSIX shared memory has nowhere to live)",
    reduced="NOT contained: the host's /dev/shm is writable by a uid-0 worker",
)
def test_dev_shm(sandbox: Sandbox, attacker: Attacker) -> None:
    if sandbox.has("minimal_dev"):
        result = attacker.attack("open('/dev/shm/a2e-left-behind', 'w').write('x')")
        assert not result.success and "No such file or directory" in (result.error or "")
        shm = attacker.attack("import _posixshmem\n_posixshmem.shm_open('/a2e', 0o100, 0o600)")
        assert not shm.success, shm.data
    else:  # only ask: writing would leave a file on the host
        result = attacker.attack("import os\nos.access('/dev/shm', os.W_OK)")
        assert result.success and result.data["value"] is True


def test_other_programs_using_tmp_do_not_disturb_the_check(attacker: Attacker) -> None:
    """The invariants compare only what the suite owns or attacks aim at: a busy /tmp (other
    programs making and removing files there during the call) is no change."""
    import tempfile
    import threading

    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            fd, path = tempfile.mkstemp(prefix="other-program-", dir="/tmp")
            os.close(fd)
            time.sleep(0.01)
            os.unlink(path)

    churn = threading.Thread(target=busy)
    churn.start()
    try:
        assert attacker.attack("import time\ntime.sleep(0.3)\n1").success
    finally:
        stop.set()
        churn.join()
