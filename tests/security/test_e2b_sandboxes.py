"""What one E2B sandbox (``engine.e2b``) can take from another on the same server: its side
(commands, cells, files) without its token, its files, variables and processes from inside,
its signed URLs, and the control plane by way of the sandbox side.

A real server on 127.0.0.1 and E2B's own SDK; each sandbox an engine session of its own,
whose access token opens it and no other. The victim's sandbox is made by one API key, the
attacker's by another.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import httpx
import psutil
import pytest
from e2b_code_interpreter import Sandbox

from tests.security.harness import attack
from tests.service_process import ServiceProcess
from tests.waiting import wait_for

KEYS = ("victim-key-0123456789", "attacker-key-0123456789")
SECRET = "the victim's secret"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    keys = tmp_path_factory.mktemp("e2b-keys") / "keys"
    keys.write_text("".join(f"{key}\n" for key in KEYS))
    served = ServiceProcess("--api-key-file", str(keys), "--max-timeout", "60")
    yield served
    served.stop()


def _opts(server: ServiceProcess, key: str) -> dict[str, Any]:
    return {"api_key": key, "api_url": server.url, "sandbox_url": server.url}


@pytest.fixture(scope="module")
def pair(server: ServiceProcess) -> Iterator[tuple[Sandbox, Sandbox, str]]:
    """The victim's sandbox (a secret in a file, a variable and a running command), the
    attacker's, and the victim's workspace as the server names it."""
    victim = Sandbox.create(timeout=300, **_opts(server, KEYS[0]))
    attacker = Sandbox.create(timeout=300, **_opts(server, KEYS[1]))
    victim.files.write("/home/user/secret.txt", SECRET)
    victim.run_code(f"secret = {SECRET!r}")
    victim.commands.run("sleep 300", background=True)
    where = victim.commands.run("pwd").stdout.strip()
    yield victim, attacker, where
    victim.kill()
    attacker.kill()


def _headers(sandbox_id: str, token: str | None, port: int = 49983) -> dict[str, str]:
    headers = {"E2b-Sandbox-Id": sandbox_id, "E2b-Sandbox-Port": str(port)}
    if token is not None:
        headers["X-Access-Token"] = token
    return headers


def _envelope(message: bytes) -> bytes:
    return struct.pack(">BI", 0, len(message)) + message


@attack(
    "another sandbox's token on its side",
    full="the sandbox side's token check: a sandbox's access token opens it alone",
    reduced="the same (no isolation layer is involved)",
)
def test_a_token_opens_its_own_sandbox_and_no_other(
    server: ServiceProcess, pair: tuple[Sandbox, Sandbox, str]
) -> None:
    victim, attacker, _ = pair
    theirs = attacker._envd_access_token
    for token in (theirs, None, "", KEYS[0], KEYS[1]):
        headers = _headers(victim.sandbox_id, token)
        read = httpx.get(
            f"{server.url}/files", params={"path": "/home/user/secret.txt"}, headers=headers
        )
        assert read.status_code == 401 and SECRET not in read.text, (token, read.text)
        start = httpx.post(
            f"{server.url}/process.Process/Start",
            content=_envelope(b'{"process":{"cmd":"/bin/cat","args":["secret.txt"]}}'),
            headers={**headers, "Content-Type": "application/connect+json"},
        )
        assert start.status_code == 401 and b"secret" not in start.content, token
        listed = httpx.post(
            f"{server.url}/process.Process/List",
            json={},
            headers={**headers, "Content-Type": "application/json"},
        )
        assert listed.status_code == 401, token
        cell = httpx.post(
            f"{server.url}/execute",
            json={"code": "secret", "context_id": None, "language": None, "env_vars": None},
            headers=_headers(victim.sandbox_id, token, 49999),
        )
        assert cell.status_code == 401 and SECRET not in cell.text, token
    assert victim.run_code("secret").text == repr(SECRET)  # the victim's own token still works


@attack(
    "a sandbox's token as the service's key",
    full="the service's token check: a sandbox's token is not an API key",
    reduced="the same (no isolation layer is involved)",
)
def test_a_sandbox_token_does_not_open_the_control_plane(
    server: ServiceProcess, pair: tuple[Sandbox, Sandbox, str]
) -> None:
    victim, attacker, _ = pair
    token = attacker._envd_access_token
    listed = httpx.get(f"{server.url}/v2/sandboxes", headers={"X-API-Key": token})
    assert listed.status_code == 401
    # Naming a sandbox sends a request to the sandbox side, where no control plane is.
    through = httpx.delete(
        f"{server.url}/sandboxes/{victim.sandbox_id}",
        headers={**_headers(attacker.sandbox_id, token), "X-API-Key": token},
    )
    assert through.status_code in (404, 405), through.text
    made = httpx.post(
        f"{server.url}/v2/sandboxes", json={}, headers=_headers(attacker.sandbox_id, token)
    )
    assert made.status_code in (404, 405), made.text
    assert victim.is_running()


@attack(
    "another sandbox's files, variables and processes from inside",
    full="identity (a uid per session), landlock, pid_namespace; pids named per sandbox",
    reduced="not run: this server has every layer the host allows",
)
def test_from_inside_a_sandbox_nothing_of_another_is_reached(
    pair: tuple[Sandbox, Sandbox, str],
) -> None:
    victim, attacker, where = pair
    path = f"{where}/secret.txt"
    cat = attacker.run_code(f"cat {path}; ls {where}", language="bash")
    assert SECRET not in "".join(cat.logs.stdout), cat
    opened = attacker.run_code(f"open({path!r}).read()")
    assert opened.error is not None and SECRET not in (opened.text or "")
    with pytest.raises(Exception) as read:
        attacker.files.read(path)
    assert SECRET not in str(read.value)
    assert attacker.run_code("secret").error is not None  # an interpreter of its own
    ps = attacker.commands.run("ps -eo args || true").stdout
    assert "sleep 300" not in ps  # its own PID namespace
    victims = victim.commands.list()
    assert len(victims) == 1
    assert attacker.commands.kill(victims[0].pid) is False  # pids are each sandbox's own
    assert [p.pid for p in victim.commands.list()] == [victims[0].pid]


@attack(
    "a signed URL of one sandbox for another's file",
    full="the signature is of the signing sandbox's token: it opens that sandbox's file",
    reduced="the same (no isolation layer is involved)",
)
def test_a_signed_url_opens_its_own_sandboxs_file(
    server: ServiceProcess, pair: tuple[Sandbox, Sandbox, str]
) -> None:
    victim, attacker, _ = pair
    attacker.files.write("/home/user/secret.txt", "the attacker's own")
    url = attacker.download_url("/home/user/secret.txt")
    assert httpx.get(url).text == "the attacker's own"
    # The same URL sent with the victim's id: the signature is checked against its token.
    aimed = httpx.get(url, headers={"E2b-Sandbox-Id": victim.sandbox_id})
    assert aimed.status_code == 401 and SECRET not in aimed.text
    forged = url.split("signature=")[0] + "signature=v1_" + "A" * 43
    assert httpx.get(forged).status_code == 401


@attack(
    "hostile Connect bodies on the sandbox side",
    full="bounded, validated request envelopes: one-line errors, the server unharmed",
    reduced="the same (no isolation layer is involved)",
)
def test_hostile_rpc_bodies_get_one_line_errors(
    server: ServiceProcess, pair: tuple[Sandbox, Sandbox, str]
) -> None:
    _, attacker, _ = pair
    headers = {
        **_headers(attacker.sandbox_id, attacker._envd_access_token),
        "Content-Type": "application/connect+json",
    }
    url = f"{server.url}/process.Process/Start"
    bodies = [
        b"",
        b"\x00\x00\x00",
        struct.pack(">BI", 0, 1 << 30) + b"{}",
        struct.pack(">BI", 1, 2) + b"{}",
        _envelope(b"[1, 2]"),
        _envelope(b'{"process": {"cmd": 7}}'),
        _envelope(b'{"process": {"cmd": "sh", "args": "not a list"}}'),
        _envelope(b"{" * 100_000),
        _envelope(b" " * (2 << 20)),
    ]
    for body in bodies:
        answer = httpx.post(url, content=body, headers=headers, timeout=30)
        assert answer.status_code in (400, 429), (body[:20], answer.status_code)
        error = answer.json()
        assert set(error) == {"code", "message"} and "\n" not in error["message"]
    assert attacker.commands.run("echo alive").stdout == "alive\n"


@attack(
    "flooding a command's stdin that does not read it",
    full="the call input's bound: what the worker has not read waits up to 1 MiB, then no more",
    reduced="the same (no isolation layer is involved)",
)
def test_input_a_command_does_not_read_is_bounded(
    server: ServiceProcess, pair: tuple[Sandbox, Sandbox, str]
) -> None:
    _, attacker, _ = pair
    idle = attacker.commands.run("sleep 60", background=True, stdin=True)
    piece = b"x" * (600 << 10)
    refused = None
    for _ in range(4):
        try:
            attacker.commands.send_stdin(idle.pid, piece)
        except Exception as exc:
            refused = exc
            break
    assert refused is not None and "has not read" in str(refused), refused
    server_rss = psutil.Process(server.pid).memory_info().rss
    assert server_rss < 1 << 30
    attacker.commands.kill(idle.pid)
    assert attacker.commands.run("echo alive").stdout == "alive\n"


def _rss(server: ServiceProcess) -> int:
    return int(psutil.Process(server.pid).memory_info().rss)


@attack(
    "an upload of many parts to fill the server's memory",
    full="uploads parsed as a stream, each file written a piece at a time: never held whole",
    reduced="the same (no isolation layer is involved)",
)
def test_an_upload_of_many_parts_is_not_held_in_the_server(
    server: ServiceProcess, pair: tuple[Sandbox, Sandbox, str]
) -> None:
    _, attacker, _ = pair
    headers = _headers(attacker.sandbox_id, attacker._envd_access_token)
    part = b"x" * ((1 << 20) - 1024)  # under the 1 MiB a form parser keeps in memory
    files = [("file", (f"/home/user/up/{n}.bin", part)) for n in range(60)]
    before = _rss(server)
    sent = httpx.post(f"{server.url}/files", files=files, headers=headers, timeout=120)
    assert sent.status_code == 200 and len(sent.json()) == 60, sent.text[:200]
    assert _rss(server) - before < 30 << 20, (before, _rss(server))
    assert attacker.files.read("/home/user/up/59.bin", format="bytes") == part


@attack(
    "numbers the server parses: unicode digits, thousands of them",
    full="ASCII digits of bounded length only: a one-line refusal, never a traceback",
    reduced="the same (no isolation layer is involved)",
)
def test_odd_numbers_get_one_line_refusals_and_no_traceback(
    server: ServiceProcess, pair: tuple[Sandbox, Sandbox, str]
) -> None:
    _, attacker, _ = pair
    headers = _headers(attacker.sandbox_id, attacker._envd_access_token)
    json_headers = {**headers, "Content-Type": "application/json"}
    for odd in ("²", "9" * 5000):
        signed = httpx.get(
            f"{server.url}/files",
            params={"path": "x", "signature": "v1_x", "signature_expiration": odd},
        )
        assert signed.status_code == 401
        signal = httpx.post(
            f"{server.url}/process.Process/SendSignal",
            json={"process": {"pid": odd}, "signal": "SIGNAL_SIGKILL"},
            headers=json_headers,
        )
        assert signal.status_code in (400, 404), signal.text
        listed = httpx.post(
            f"{server.url}/filesystem.Filesystem/ListDir",
            json={"path": "/home/user", "depth": odd},
            headers=json_headers,
        )
        assert listed.status_code in (400, 404), listed.text
    started = httpx.post(
        f"{server.url}/process.Process/Start",
        content=_envelope(b'{"process":{"cmd":"/bin/echo","args":["ok"]}}'),
        headers={
            **headers,
            "Content-Type": "application/connect+json",
            "connect-timeout-ms": "9" * 5000,
        },
        timeout=30,
    )
    assert started.status_code == 200 and b"b2sK" in started.content  # "ok\n", base64
    assert not any("Traceback" in line for line in server.stderr), "".join(server.stderr)[-3000:]


@attack(
    "HEAD on a file, as a link preview sends it",
    full="only POST writes: HEAD reads",
    reduced="the same (no isolation layer is involved)",
)
def test_head_on_a_file_leaves_it_as_it_was(
    server: ServiceProcess, pair: tuple[Sandbox, Sandbox, str]
) -> None:
    _, attacker, _ = pair
    attacker.files.write("/home/user/kept.txt", "kept")
    headers = _headers(attacker.sandbox_id, attacker._envd_access_token)
    httpx.head(f"{server.url}/files", params={"path": "/home/user/kept.txt"}, headers=headers)
    httpx.head(attacker.upload_url("/home/user/kept.txt"))
    assert attacker.files.read("/home/user/kept.txt") == "kept"


@attack(
    "watchers and contexts made all at once, or with huge directories",
    full="a watcher's place taken before its first look; a context's directory bounded",
    reduced="the same (no isolation layer is involved)",
)
def test_the_bounds_on_watchers_and_contexts_hold_under_a_burst(
    server: ServiceProcess, pair: tuple[Sandbox, Sandbox, str]
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    _, attacker, _ = pair
    headers = {
        **_headers(attacker.sandbox_id, attacker._envd_access_token),
        "Content-Type": "application/json",
    }

    def watch(_: int) -> int:
        return httpx.post(
            f"{server.url}/filesystem.Filesystem/CreateWatcher",
            json={"path": "/home/user"},
            headers=headers,
            timeout=60,
        ).status_code

    with ThreadPoolExecutor(40) as pool:
        statuses = list(pool.map(watch, range(40)))
    assert statuses.count(200) <= 16 and statuses.count(429) >= 24, statuses
    huge = httpx.post(
        f"{server.url}/contexts",
        json={"language": "python", "cwd": "/home/user/" + "a" * 100_000},
        headers=_headers(attacker.sandbox_id, None, 49999),
    )
    assert huge.status_code == 400 and "\n" not in huge.json()["message"]


@attack(
    "commands that sleep, enough to hold every worker slot",
    full="a client's running commands, in all its sandboxes, bounded at half the engine's slots",
    reduced="the same (no isolation layer is involved)",
)
def test_one_client_cannot_hold_every_worker_slot_with_commands() -> None:
    from e2b import RateLimitException

    small = ServiceProcess("--token", KEYS[0], "--max-workers", "4")
    try:
        one, two = (Sandbox.create(timeout=60, **_opts(small, KEYS[0])) for _ in range(2))
        held = [one.commands.run("sleep 30", background=True) for _ in range(2)]
        with pytest.raises(RateLimitException, match="runs 2 commands already"):
            two.commands.run("sleep 30", background=True)
        one.commands.kill(held[0].pid)
        assert wait_for(lambda: len(one.commands.list()) == 1, 10)
        assert two.commands.run("echo free").stdout == "free\n"
        one.kill()
        two.kill()
    finally:
        small.stop()
