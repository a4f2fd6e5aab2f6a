"""What one copy of a forked sandbox can take from its parent and its siblings, attacked from
inside as one tenant attacks another (``sandbox._forks``, ``sandbox._adoption``): their
processes (signals, memory, descriptors, roots), their files (the workspace, the shared run
layer, the engine's state directory, from the interpreter and from a command), a way out of
its own namespaces, and the control plane from another client.

A real server on 127.0.0.1 and E2B's own SDK. The parent holds a secret in a variable and a
file before the fork; after it each sandbox writes a secret of its own, which no other may see.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from e2b import SandboxException
from e2b_code_interpreter import Sandbox

from tests.security.harness import attack
from tests.service_process import ServiceProcess

KEYS = ("family-key-0123456789", "stranger-key-0123456789")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    keys = tmp_path_factory.mktemp("e2b-fork-keys") / "keys"
    keys.write_text("".join(f"{key}\n" for key in KEYS))
    served = ServiceProcess("--api-key-file", str(keys), "--max-timeout", "300")
    yield served
    served.stop()


def _opts(server: ServiceProcess, key: str = KEYS[0]) -> dict[str, Any]:
    return {"api_key": key, "api_url": server.url, "sandbox_url": server.url}


@pytest.fixture(scope="module")
def family(server: ServiceProcess) -> Iterator[tuple[Sandbox, Sandbox, Sandbox]]:
    """The parent, the attacking child and its victim sibling, each with its own secret
    written after the fork; the victims' interpreters hold theirs in a variable too."""
    parent = Sandbox.create(timeout=300, **_opts(server))
    parent.run_code("inherited = 'from before the fork'")
    parent.files.write("/home/user/inherited.txt", "from before the fork")
    attacker, victim = parent.fork(count=2)
    assert isinstance(attacker, Sandbox) and isinstance(victim, Sandbox)
    for name, sandbox in (("parent", parent), ("victim", victim)):
        sandbox.run_code(f"secret = 'the {name} secret'")
        sandbox.files.write("/home/user/secret.txt", f"the {name} secret")
    yield parent, attacker, victim
    for sandbox in (attacker, victim, parent):
        sandbox.kill()


def _run(sandbox: Sandbox, code: str) -> str:
    execution = sandbox.run_code(code)
    assert execution.error is None, execution.error
    return "".join(execution.logs.stdout)


def _victims_unharmed(parent: Sandbox, victim: Sandbox) -> None:
    for name, sandbox in (("parent", parent), ("victim", victim)):
        assert sandbox.run_code("secret").text == repr(f"the {name} secret")
        assert sandbox.files.read("/home/user/secret.txt") == f"the {name} secret"


SIGNAL_EVERYONE = """
import os, signal
sent = []
for name in os.listdir('/proc'):
    if not name.isdigit() or int(name) == os.getpid():
        continue
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        try:
            os.kill(int(name), sig)
            sent.append((name, sig))
        except OSError:
            pass
print(sorted(set(n for n, _ in sent)))
"""


@attack(
    "a copy signals its parent, its siblings and its family's first worker",
    full="Landlock's signal scope: each copy's domain is its own, none nested in another's",
    reduced="no copies: a fork is refused without Landlock ABI 6",
)
def test_a_copy_cannot_signal_its_family(family: tuple[Sandbox, Sandbox, Sandbox]) -> None:
    parent, attacker, victim = family
    reached = _run(attacker, SIGNAL_EVERYONE)
    assert reached.strip() == "[]", f"signals reached {reached}"
    _victims_unharmed(parent, victim)


READ_EVERYONE = """
import os
got = []
for name in os.listdir('/proc'):
    if not name.isdigit() or int(name) == os.getpid():
        continue
    for how in ('mem', 'environ', 'fd', 'cwd', 'root', 'maps'):
        path = f'/proc/{name}/{how}'
        try:
            if how in ('fd', 'root'):
                seen = os.listdir(path)
            elif how == 'cwd':
                seen = os.listdir(os.readlink(path))
            else:
                with open(path, 'rb') as fh:
                    seen = fh.read(4096)[:64]
        except OSError:
            continue
        if seen:  # a process that has exited and waits to be reaped shows nothing
            got.append((path, seen))
print(got)
"""


@attack(
    "a copy reads its family's memory, environment, descriptors and roots through /proc",
    full="Landlock: no ptrace-class access to a process outside the copy's own domain",
    reduced="no copies without Landlock ABI 6",
)
def test_a_copy_cannot_reach_its_familys_processes(
    family: tuple[Sandbox, Sandbox, Sandbox],
) -> None:
    parent, attacker, victim = family
    got = _run(attacker, READ_EVERYONE)
    assert got.strip() == "[]", got[:2000]
    _victims_unharmed(parent, victim)


@attack(
    "a copy writes where its family reads: the shared run layer, its inherited files",
    full="each copy's own mount of its session, and a Landlock domain that writes only there",
    reduced="no copies without Landlock ABI 6",
)
def test_a_copy_leaves_nothing_its_family_can_see(
    family: tuple[Sandbox, Sandbox, Sandbox],
) -> None:
    parent, attacker, victim = family
    wrote = _run(
        attacker,
        "import os\n"
        "for path in ('/tmp/a2e-attack.txt', '/root/a2e-attack.txt', '/home/a2e-attack.txt',"
        " '/home/user/a2e-attack.txt', '/home/user/inherited.txt'):\n"
        "    try:\n"
        "        open(path, 'w').write('the attacker was here')\n"
        "        print(path)\n"
        "    except OSError:\n"
        "        pass\n",
    )
    assert wrote.split() == ["/home/user/a2e-attack.txt", "/home/user/inherited.txt"]
    for sandbox in (parent, victim):
        seen = _run(
            sandbox,
            "import os\n"
            "print([p for p in ('/tmp/a2e-attack.txt', '/root/a2e-attack.txt',"
            " '/home/a2e-attack.txt', '/home/user/a2e-attack.txt') if os.path.exists(p)])\n"
            "print(open('/home/user/inherited.txt').read())",
        )
        assert seen.split("\n")[:2] == ["[]", "from before the fork"]
        assert not sandbox.files.exists("/home/user/a2e-attack.txt")
    assert "the attacker was here" in attacker.files.read("/home/user/inherited.txt")
    _victims_unharmed(parent, victim)


LOOK_FOR_SECRETS = """
import os
found = []
points = [line.split()[4] for line in open('/proc/self/mountinfo')]
state = {os.path.dirname(os.path.dirname(p)) for p in points if p.endswith('/session')}
for root in state:
    for where, dirs, files in os.walk(root):
        for name in files:
            try:
                with open(os.path.join(where, name)) as fh:
                    if 'secret' in fh.read(256):
                        found.append(os.path.join(where, name))
            except OSError:
                pass
        for name in dirs:
            try:
                with open(os.path.join(where, name, 'a2e-attack.txt'), 'w') as fh:
                    fh.write('x')
                found.append('wrote in ' + os.path.join(where, name))
            except OSError:
                pass
print(found)
"""


@attack(
    "a copy looks through the engine's state directory for its family's sessions",
    full="each copy's own uid for its commands (their sessions' guards are another uid's); "
    "for its interpreter, a mount namespace that holds no other session and a Landlock "
    "domain that writes only its own",
    reduced="the same where the identity layer is on; without it, uids are shared",
)
def test_a_copy_cannot_find_its_familys_sessions(
    family: tuple[Sandbox, Sandbox, Sandbox],
) -> None:
    parent, attacker, victim = family
    from_interpreter = _run(attacker, LOOK_FOR_SECRETS)
    assert from_interpreter.strip() == "[]", from_interpreter
    attacker.files.write("/home/user/look.py", LOOK_FOR_SECRETS)
    from_command = attacker.commands.run("python3 /home/user/look.py").stdout
    assert from_command.strip() == "[]", from_command
    _victims_unharmed(parent, victim)


ESCAPE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
done = []
if libc.mount(b'none', b'/home/user', b'tmpfs', 0, None) == 0:
    done.append('mount')
if libc.unshare(0x10000000 | 0x00020000) == 0:
    done.append('unshare')
    if libc.mount(b'none', b'/home/user', b'tmpfs', 0, None) == 0:
        done.append('mount after unshare')
fd = os.open('/proc/1/ns/mnt', os.O_RDONLY) if os.path.exists('/proc/1/ns/mnt') else -1
if fd >= 0 and libc.setns(fd, 0) == 0:
    done.append('setns')
if libc.ptrace(16, 1, 0, 0) == 0:
    done.append('ptrace')
print(done)
"""


@attack(
    "a copy uses the capabilities of its own user namespace to leave its mount namespace",
    full="seccomp: mount, setns and ptrace refused; unshare only of a user and mount "
    "namespace together, in which nothing can be mounted",
    reduced="the same (seccomp is always on)",
)
def test_a_copy_cannot_leave_its_namespaces(family: tuple[Sandbox, Sandbox, Sandbox]) -> None:
    parent, attacker, victim = family
    try:
        done = _run(attacker, ESCAPE)
    except AssertionError as exc:  # opening /proc/1/ns/mnt is refused, as it should be
        assert "PermissionError" in str(exc)
        done = "['unshare']\n"
    assert done.strip() in ("[]", "['unshare']"), done
    _victims_unharmed(parent, victim)


@attack(
    "another client forks a sandbox it does not own",
    full="the control plane: a sandbox is its creator's, and another's is not found",
    reduced="the same (no isolation layer is involved)",
)
def test_another_client_cannot_fork_a_sandbox(
    server: ServiceProcess, family: tuple[Sandbox, Sandbox, Sandbox]
) -> None:
    parent, _, _ = family
    response = httpx.post(
        f"{server.url}/sandboxes/{parent.sandbox_id}/fork",
        json={"count": 1},
        headers={"X-API-Key": KEYS[1]},
        timeout=30,
    )
    assert response.status_code == 404
    listed = httpx.get(f"{server.url}/v2/sandboxes", headers={"X-API-Key": KEYS[1]}, timeout=30)
    assert listed.json() == []


@attack(
    "another client lists, starts from or deletes a snapshot it does not own",
    full="the control plane: a snapshot is its sandbox's owner's, and another's is not found",
    reduced="the same (no isolation layer is involved)",
)
def test_another_client_cannot_use_a_snapshot(
    server: ServiceProcess, family: tuple[Sandbox, Sandbox, Sandbox]
) -> None:
    parent, _, _ = family
    snapshot = parent.create_snapshot(name="private")
    try:
        stranger = _opts(server, KEYS[1])
        assert Sandbox.list_snapshots(**stranger).next_items() == []
        for template in (snapshot.snapshot_id, "private"):
            with pytest.raises(SandboxException, match="not served"):
                Sandbox.create(template=template, **stranger)
        assert Sandbox.delete_snapshot(snapshot.snapshot_id, **stranger) is False
        assert [s.snapshot_id for s in Sandbox.list_snapshots(**_opts(server)).next_items()] == [
            snapshot.snapshot_id
        ]
    finally:
        Sandbox.delete_snapshot(snapshot.snapshot_id, **_opts(server))


@attack(
    "the parent signals and reads its copies, after forking them",
    full="the parent's own new Landlock domain: its copies' are nested in the one it left",
    reduced="no copies without Landlock ABI 6",
)
def test_the_parent_cannot_reach_its_copies(family: tuple[Sandbox, Sandbox, Sandbox]) -> None:
    parent, attacker, victim = family
    assert _run(parent, SIGNAL_EVERYONE).strip() == "[]"
    assert _run(parent, READ_EVERYONE).strip() == "[]"
    _victims_unharmed(parent, victim)
    assert _run(attacker, "print('alive')").strip() == "alive"
