"""E2B's control plane (``engine.e2b``) driven by E2B's own SDK, unmodified: sandboxes made,
listed, read, timed, connected to and killed, each a real session of the engine; one that
outlives its timeout ends, and everything its session held goes. Every sandbox is its
client's alone: another API key can neither see, read, time nor kill it, and a request without
the key is refused. What is not served yet answers in E2B's error shape."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from e2b import Sandbox, SandboxQuery
from e2b.exceptions import (
    AuthenticationException,
    NotFoundException,
    RateLimitException,
    SandboxException,
)

from tests.service_process import ServiceProcess
from tests.waiting import wait_for

KEYS = ("alpha-key-0123456789", "beta-key-0123456789")
#: The live sandboxes each key may hold.
SHARE = 4


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    keys = tmp_path_factory.mktemp("e2b") / "keys"
    keys.write_text("".join(f"{key}\n" for key in KEYS))
    process = ServiceProcess("--api-key-file", str(keys), "--sandboxes-per-client", str(SHARE))
    yield process
    process.stop()


def _opts(service: ServiceProcess, key: str = KEYS[0]) -> dict[str, Any]:
    return {"api_key": key, "api_url": service.url, "sandbox_url": service.url}


def _sessions(service: ServiceProcess, key: str = KEYS[0]) -> int:
    """The sessions the service's engine holds open now (its ``a2e_sessions`` gauge)."""
    metrics = httpx.get(f"{service.url}/metrics", headers={"X-API-Key": key}, timeout=10).text
    (line,) = [row for row in metrics.splitlines() if row.startswith("a2e_sessions ")]
    return int(float(line.split()[1]))


def test_the_sdk_makes_lists_reads_times_and_kills_a_sandbox(service: ServiceProcess) -> None:
    opts = _opts(service)
    sandbox = Sandbox.create(timeout=120, metadata={"run": "r1"}, envs={"A": "1"}, **opts)
    try:
        info = sandbox.get_info()
        assert info.sandbox_id == sandbox.sandbox_id and info.template_id == "base"
        assert info.metadata == {"run": "r1"} and info.state.value == "running"
        assert 119 < (info.end_at - info.started_at).total_seconds() < 121
        listed = Sandbox.list(query=SandboxQuery(metadata={"run": "r1"}), **opts).next_items()
        assert [s.sandbox_id for s in listed] == [sandbox.sandbox_id]
        assert Sandbox.list(query=SandboxQuery(metadata={"run": "r2"}), **opts).next_items() == []
        sandbox.set_timeout(600)
        later = sandbox.get_info()
        assert (later.end_at - later.started_at).total_seconds() > 590
        again = Sandbox.connect(sandbox.sandbox_id, **opts)
        assert again.sandbox_id == sandbox.sandbox_id
    finally:
        assert Sandbox.kill(sandbox.sandbox_id, **opts) is True
    assert Sandbox.kill(sandbox.sandbox_id, **opts) is False  # gone: the SDK's False
    with pytest.raises(NotFoundException):
        Sandbox.get_info(sandbox.sandbox_id, **opts)


def test_a_sandbox_ends_at_its_timeout(service: ServiceProcess) -> None:
    opts = _opts(service)
    sandbox = Sandbox.create(timeout=1, **opts)
    listed = Sandbox.list(**opts).next_items()
    assert sandbox.sandbox_id in {s.sandbox_id for s in listed}
    assert wait_for(
        lambda: sandbox.sandbox_id not in {s.sandbox_id for s in Sandbox.list(**opts).next_items()},
        20,
    )
    with pytest.raises(NotFoundException):
        Sandbox.connect(sandbox.sandbox_id, **opts)


def test_another_client_can_neither_see_nor_touch_a_sandbox(service: ServiceProcess) -> None:
    """From a second API key, the first's sandbox does not exist: not listed, not readable,
    not timed, not connected to, not killed; without a key, nothing at all."""
    mine, theirs = _opts(service, KEYS[0]), _opts(service, KEYS[1])
    sandbox = Sandbox.create(timeout=120, **mine)
    try:
        assert sandbox.sandbox_id not in {s.sandbox_id for s in Sandbox.list(**theirs).next_items()}
        with pytest.raises(NotFoundException):
            Sandbox.get_info(sandbox.sandbox_id, **theirs)
        with pytest.raises(NotFoundException):
            Sandbox.set_timeout(sandbox.sandbox_id, 1, **theirs)
        with pytest.raises(NotFoundException):
            Sandbox.connect(sandbox.sandbox_id, **theirs)
        assert Sandbox.kill(sandbox.sandbox_id, **theirs) is False
        with pytest.raises(AuthenticationException):
            Sandbox.list(**_opts(service, "not-a-key")).next_items()
        assert Sandbox.get_info(sandbox.sandbox_id, **mine).state.value == "running"
    finally:
        Sandbox.kill(sandbox.sandbox_id, **mine)


def test_what_is_not_served_yet_says_so_in_e2bs_shape(service: ServiceProcess) -> None:
    opts = _opts(service)
    sandbox = Sandbox.create(timeout=60, **opts)
    try:
        with pytest.raises(SandboxException, match="501: sandbox metrics is not supported"):
            sandbox.get_metrics()
        with pytest.raises(SandboxException, match="template 'mcp-gateway' is not served"):
            Sandbox.create(template="mcp-gateway", **opts)
        with pytest.raises(SandboxException, match="timeout"):
            Sandbox.create(timeout=10**9, **opts)
    finally:
        sandbox.kill()


def test_each_sandbox_is_a_session_that_goes_with_it(service: ServiceProcess) -> None:
    """Each sandbox holds a session of the engine of its own (its uid, workspace and limits),
    and killing it ends that session."""
    opts = _opts(service)
    before = _sessions(service)
    sandboxes = [Sandbox.create(timeout=60, **opts) for _ in range(3)]
    try:
        assert len({s.sandbox_id for s in sandboxes}) == 3
        assert _sessions(service) == before + 3
    finally:
        for sandbox in sandboxes:
            sandbox.kill()
    assert wait_for(lambda: _sessions(service) == before, 20)


def test_a_client_holds_its_share_of_sandboxes_and_no_more(service: ServiceProcess) -> None:
    """Each sandbox holds a session, and a session a uid of the engine's range: one client
    creating as fast as it can, all at once, gets its share and is then refused in one line,
    while another client still gets sandboxes."""
    greedy, other = _opts(service, KEYS[0]), _opts(service, KEYS[1])

    def attempt(_: int) -> Sandbox | str:
        try:
            return Sandbox.create(timeout=60, **greedy)
        except RateLimitException as exc:
            return str(exc)

    with ThreadPoolExecutor(8) as pool:
        made = list(pool.map(attempt, range(SHARE + 3)))
    sandboxes = [m for m in made if isinstance(m, Sandbox)]
    refusals = [m for m in made if isinstance(m, str)]
    theirs = Sandbox.create(timeout=60, **other)
    try:
        assert len(sandboxes) == SHARE and len(refusals) == 3, made
        assert all(f"holds {SHARE} live sandboxes already" in why for why in refusals)
        assert theirs.get_info().state.value == "running"
    finally:
        theirs.kill()
        for sandbox in sandboxes:
            sandbox.kill()
    Sandbox.create(timeout=60, **greedy).kill()  # its share is free again


def test_every_refusal_is_in_e2bs_shape(service: ServiceProcess) -> None:
    """The SDK parses E2B's ``{"code", "message"}`` and nothing else (a body of another shape
    crashes it): the service's own refusals before any handler, a wrong key or a body past the
    bound, come in that shape to a request that showed ``X-API-Key``."""
    url = f"{service.url}/v2/sandboxes"
    wrong = httpx.post(url, headers={"X-API-Key": "nope"}, json={}, timeout=10)
    assert wrong.status_code == 401 and wrong.json()["code"] == 401, wrong.text
    assert "wrong token" in wrong.json()["message"]
    huge = {"templateID": "base", "metadata": {"k": "v" * (2 << 20)}}
    too_big = httpx.post(url, headers={"X-API-Key": KEYS[0]}, json=huge, timeout=30)
    assert too_big.status_code == 413 and too_big.json()["code"] == 413, too_big.text
    odd = httpx.post(url, headers={"X-API-Key": KEYS[0]}, content=b"{not json", timeout=10)
    assert odd.status_code == 400 and set(odd.json()) == {"code", "message"}, odd.text


def test_bodies_of_the_wrong_type_and_filters_the_sdk_quotes(service: ServiceProcess) -> None:
    """A timeout that is text, a float or a boolean, and an empty variable name, are E2B's
    400 (a boolean read as 1 would give a one-second life); metadata the SDK quotes (accents,
    spaces) is found by its filter."""
    url, key = f"{service.url}/v2/sandboxes", {"X-API-Key": KEYS[0]}
    for body in ({"timeout": "10"}, {"timeout": 10.0}, {"timeout": True}, {"envVars": {"": "c"}}):
        refused = httpx.post(url, headers=key, json=body, timeout=10)
        assert refused.status_code == 400 and set(refused.json()) == {"code", "message"}, body
    opts = _opts(service)
    sandbox = Sandbox.create(timeout=60, metadata={"u": "é", "s": "a b&c=d"}, **opts)
    try:
        for wanted in ({"u": "é"}, {"s": "a b&c=d"}):
            found = Sandbox.list(query=SandboxQuery(metadata=wanted), **opts).next_items()
            assert [s.sandbox_id for s in found] == [sandbox.sandbox_id], wanted
    finally:
        sandbox.kill()


def test_an_ended_sandbox_is_never_timed_again_nor_lives_past_a_day() -> None:
    """A timeout that arrives for a sandbox killed meanwhile (its body was slow) schedules
    nothing and keeps nothing; and however often its timeout is moved, a sandbox ends a day
    after it started."""
    import asyncio
    import datetime

    from a2e_engine.engine.e2b._sandboxes import MAX_TIMEOUT_S, Sandboxes

    class Session:
        closed = False

        def close(self) -> None:
            self.closed = True

    class Host:
        async def open_session(self, client: str, **_: Any) -> Session:
            return Session()

    async def scenario() -> None:
        sandboxes = Sandboxes(Host(), 4)  # type: ignore[arg-type]
        sandbox = await sandboxes.create("a", "base", 60, {}, {})
        sandbox.started_at -= datetime.timedelta(seconds=MAX_TIMEOUT_S - 10)
        sandboxes.set_timeout(sandbox, MAX_TIMEOUT_S)
        assert sandbox.ends_at <= sandbox.started_at + datetime.timedelta(seconds=MAX_TIMEOUT_S)
        sandboxes.end(sandbox)
        sandboxes.set_timeout(sandbox, MAX_TIMEOUT_S)
        assert sandbox._timer is None and len(sandboxes) == 0

    asyncio.run(scenario())


def test_a_client_that_hangs_up_mid_body_leaves_no_traceback(service: ServiceProcess) -> None:
    port = int(service.url.rsplit(":", 1)[1])
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(
                b"POST /v2/sandboxes HTTP/1.1\r\nHost: x\r\nX-API-Key: "
                + KEYS[0].encode()
                + b"\r\nContent-Length: 10\r\n\r\n{}"
            )
    assert httpx.get(f"{service.url}/healthz", timeout=10).status_code == 200
    time.sleep(0.5)  # what the server logs of it, if anything, has reached its stderr
    assert not any("Traceback" in line for line in service.stderr), "".join(service.stderr)


def test_past_the_memory_bound_a_new_sandbox_is_refused_in_one_line(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Sandboxes whose interpreters hold memory fill the sandbox's bound: past its high-water
    mark a new one is refused with E2B's 429 saying so (the SDK's ``RateLimitException``),
    never left to the host's OOM killer; those alive keep their state (or, where the bound's
    relief ended one, say it is gone), and once sandboxes are killed another can be made."""
    folder = tmp_path_factory.mktemp("bound")
    config = folder / "engine.toml"
    config.write_text("[engine.admission]\nsandbox_memory_mb = 400\n")
    process = ServiceProcess("--token", KEYS[0], "--config", str(config))
    opts = _opts(process)
    alive: list[Any] = []
    try:
        from e2b_code_interpreter import Sandbox as CodeSandbox

        refused = None
        for _ in range(12):
            try:
                sandbox = CodeSandbox.create(timeout=120, **opts)
            except RateLimitException as exc:
                refused = exc
                break
            alive.append(sandbox)
            sandbox.run_code("held = bytearray(60 << 20); held[::4096] = b'x' * len(held[::4096])")
        assert refused is not None, "twelve sandboxes of 60 MiB fit in a bound of 400 MiB"
        assert "MiB" in str(refused) and "\n" not in str(refused), str(refused)
        kept = 0
        for sandbox in alive:  # each one kept its state, or was ended (the bound's relief)
            try:
                kept += sandbox.run_code("len(held) >> 20").text == "60"
            except SandboxException:
                continue
        assert kept >= 2
        assert httpx.get(f"{process.url}/healthz", timeout=10).status_code == 200
        alive.pop().kill()
        alive.pop().kill()
        assert wait_for(lambda: _made(opts, alive), 30)
    finally:
        for sandbox in alive:
            sandbox.kill()
        process.stop()


def _made(opts: dict[str, Any], alive: list[Any]) -> bool:
    """Whether a sandbox can be made now (kept in ``alive`` to be killed)."""
    from e2b_code_interpreter import Sandbox as CodeSandbox

    try:
        alive.append(CodeSandbox.create(timeout=60, **opts))
    except RateLimitException:
        return False
    return True
